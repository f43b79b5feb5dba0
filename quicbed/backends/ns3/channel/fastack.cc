// AP-side TCP ACK acceleration (see fastack.h).

#include "fastack.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <sstream>

namespace qbchannel
{

namespace
{

constexpr uint8_t PROTO_TCP = 6;
constexpr uint32_t SEGMENT = 1448; // a full-size TCP payload behind 1500-byte IP packets
// the fallback timer: above the radio queue's delay (500 packets at 50 Mbit/s are 120 ms)
const Time FIRST_TIMEOUT = MilliSeconds(300);
const Time LAST_TIMEOUT = Seconds(2);

/// a after b in sequence space (RFC 1982)
bool
After(uint32_t a, uint32_t b)
{
    return int32_t(a - b) > 0;
}

uint32_t
Get32(const std::vector<uint8_t>& b, size_t at)
{
    return uint32_t(b[at]) << 24 | uint32_t(b[at + 1]) << 16 | uint32_t(b[at + 2]) << 8 | b[at + 3];
}

uint16_t
Get16(const std::vector<uint8_t>& b, size_t at)
{
    return uint16_t(b[at] << 8 | b[at + 1]);
}

void
Put32(std::vector<uint8_t>& b, size_t at, uint32_t v)
{
    b[at] = v >> 24;
    b[at + 1] = v >> 16;
    b[at + 2] = v >> 8;
    b[at + 3] = v;
}

void
Put16(std::vector<uint8_t>& b, size_t at, uint16_t v)
{
    b[at] = v >> 8;
    b[at + 1] = v;
}

uint32_t
Sum16(const std::vector<uint8_t>& b, size_t from, size_t to, uint32_t sum = 0)
{
    for (size_t i = from; i + 1 < to; i += 2)
    {
        sum += Get16(b, i);
    }
    if ((to - from) % 2)
    {
        sum += uint32_t(b[to - 1]) << 8;
    }
    return sum;
}

uint16_t
Fold(uint32_t sum)
{
    while (sum >> 16)
    {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return uint16_t(~sum);
}

} // namespace

bool
TcpView::Parse(const std::vector<uint8_t>& ip)
{
    if (ip.size() < 20 || ip[0] >> 4 != 4 || ip[9] != PROTO_TCP)
    {
        return false;
    }
    size_t ihl = (ip[0] & 0x0f) * 4;
    size_t total = Get16(ip, 2);
    if (Get16(ip, 6) & 0x3fff) // a fragment
    {
        return false;
    }
    if (ihl < 20 || total > ip.size() || total < ihl + 20)
    {
        return false;
    }
    size_t tcp = ihl;
    size_t offset = (ip[tcp + 12] >> 4) * 4;
    if (offset < 20 || tcp + offset > total)
    {
        return false;
    }
    srcIp = Get32(ip, 12);
    dstIp = Get32(ip, 16);
    srcPort = Get16(ip, tcp);
    dstPort = Get16(ip, tcp + 2);
    seq = Get32(ip, tcp + 4);
    ack = Get32(ip, tcp + 8);
    flags = ip[tcp + 13];
    window = Get16(ip, tcp + 14);
    payload = uint32_t(total - tcp - offset);
    hasTimestamp = false;
    for (size_t at = tcp + 20; at < tcp + offset;)
    {
        uint8_t kind = ip[at];
        if (kind == 0)
        {
            break;
        }
        if (kind == 1)
        {
            at++;
            continue;
        }
        if (at + 1 >= tcp + offset || ip[at + 1] < 2)
        {
            break;
        }
        if (kind == 3 && ip[at + 1] == 3 && at + 3 <= tcp + offset)
        {
            windowScale = std::min<int>(ip[at + 2], 14);
        }
        if (kind == 8 && ip[at + 1] == 10 && at + 10 <= tcp + offset)
        {
            hasTimestamp = true;
            tsVal = Get32(ip, at + 2);
            tsEcr = Get32(ip, at + 6);
        }
        at += ip[at + 1];
    }
    return true;
}

FastAck::FastAck(Send toStation,
                 std::function<void(size_t, const std::vector<uint8_t>&, Mac48Address, Mac48Address)> toSender,
                 uint32_t queuePackets)
    : m_toStation(std::move(toStation)),
      m_toSender(std::move(toSender)),
      m_budgetBytes(uint64_t(queuePackets) / 2 * SEGMENT)
{
}

void
FastAck::Queued(const std::vector<uint8_t>& ip, Mac48Address from, Mac48Address to, size_t in)
{
    TcpView seg;
    if (!seg.Parse(ip) || (seg.flags & (TcpView::SYN | TcpView::RST)))
    {
        return;
    }
    auto it = m_flows.find(Key{seg.srcIp, seg.srcPort, seg.dstIp, seg.dstPort});
    if (it == m_flows.end() || !it->second.stationSeen)
    {
        return; // a connection the AP did not see start: left alone
    }
    Flow& flow = it->second;
    if (seg.payload == 0)
    {
        if (flow.started && !(seg.flags & TcpView::FIN) && After(flow.next, seg.seq))
        {
            Repeat(flow); // a window probe or keep-alive: the station's answer is swallowed
        }
        return;
    }
    if (!flow.started)
    {
        if (seg.seq != flow.stationAcked)
        {
            return;
        }
        flow.started = true; // the first data byte after the handshake
        flow.base = flow.next = flow.apAcked = flow.highest = seg.seq;
    }
    flow.sender = from;
    flow.station = to;
    flow.senderPort = in;
    uint32_t end = seg.seq + seg.payload + ((seg.flags & TcpView::FIN) ? 1 : 0);
    if (!After(end, flow.next))
    {
        Repeat(flow); // sent again what the AP acknowledged: that ACK was lost on the way back
        return;
    }
    if (After(end, flow.highest))
    {
        flow.highest = end;
    }
    if (seg.hasTimestamp)
    {
        flow.lastTsEcr = seg.tsVal;
    }
    if (After(seg.seq, flow.next))
    {
        outOfOrder++; // a loss before the AP: held, acknowledged once the gap is filled
    }
    if (flow.held.emplace(seg.seq - flow.base, Held{ip, end}).second)
    {
        flow.queuedBytes += end - seg.seq;
    }
    uint32_t before = flow.next;
    // over the held segments that continue what the AP has, in order (offsets from the first byte)
    for (auto it = flow.held.upper_bound(flow.next - flow.base); it != flow.held.begin();)
    {
        --it; // the last one starting at or before next
        if (!After(it->second.end, flow.next))
        {
            break;
        }
        flow.next = it->second.end;
        accelerated++;
        it = flow.held.upper_bound(flow.next - flow.base);
    }
    if (flow.next == before)
    {
        return;
    }
    flow.apAcked = flow.next;
    Acknowledge(flow);
    Arm(flow);
}

bool
FastAck::FromStation(const std::vector<uint8_t>& ip, Mac48Address from, Mac48Address to)
{
    TcpView seg;
    if (!seg.Parse(ip))
    {
        return false;
    }
    Key key{seg.dstIp, seg.dstPort, seg.srcIp, seg.srcPort};
    if (seg.flags & TcpView::SYN)
    {
        Flow& flow = m_flows[key];
        flow.timer.Cancel();
        flow = Flow(); // a new connection on these ports
        flow.key = key;
        flow.stationSeen = true;
        flow.window = seg.window;
        flow.scale = std::max(0, seg.windowScale); // (applies if the sender's SYN-ACK has one too: Linux's does)
        return false;
    }
    auto it = m_flows.find(key);
    if (it == m_flows.end())
    {
        return false;
    }
    Flow& flow = it->second;
    flow.window = seg.window;
    flow.stationSeq = seg.seq + seg.payload + ((seg.flags & TcpView::FIN) ? 1 : 0);
    if (seg.hasTimestamp)
    {
        flow.timestamps = true;
        flow.stationTsVal = seg.tsVal;
    }
    if (!(seg.flags & TcpView::ACK))
    {
        return false;
    }
    if (!flow.started)
    {
        flow.stationAcked = seg.ack;
        return false;
    }
    if (After(seg.ack, flow.stationAcked))
    {
        flow.stationAcked = seg.ack;
        flow.duplicates = 0;
        Release(flow, seg.ack);
    }
    else if (seg.ack == flow.stationAcked && seg.PureAck() && !flow.held.empty() && ++flow.duplicates == 3)
    {
        Resend(flow, seg.ack); // the station lacks what the AP holds from here
    }
    if (After(seg.ack, flow.apAcked))
    {
        flow.apAcked = seg.ack; // the station has more than the AP acknowledged (a hole filled upstream)
        if (After(seg.ack, flow.next))
        {
            flow.next = seg.ack;
        }
        stationAcksPassed++;
        return false;
    }
    if (seg.PureAck() && !After(flow.highest, flow.next))
    {
        stationAcksSwallowed++;
        return true;
    }
    stationAcksPassed++;
    return false;
}

uint16_t
FastAck::Window(const Flow& flow) const
{
    size_t active = 0;
    for (const auto& [key, other] : m_flows)
    {
        active += other.started && other.queuedBytes > 0;
    }
    uint64_t share = m_budgetBytes / std::max<size_t>(1, active);
    uint64_t room = share > flow.queuedBytes ? share - flow.queuedBytes : 0;
    uint32_t stationEdge = flow.stationAcked + (uint32_t(flow.window) << flow.scale);
    uint64_t station = After(stationEdge, flow.next) ? stationEdge - flow.next : 0;
    return uint16_t(std::min<uint64_t>(std::min(room, station) >> flow.scale, 0xffff));
}

void
FastAck::Acknowledge(Flow& flow)
{
    size_t options = flow.timestamps ? 12 : 0;
    std::vector<uint8_t> ip(40 + options, 0);
    ip[0] = 0x45;
    Put16(ip, 2, uint16_t(ip.size()));
    Put16(ip, 6, 0x4000); // don't fragment
    ip[8] = 64;
    ip[9] = PROTO_TCP;
    Put32(ip, 12, std::get<2>(flow.key)); // from the station
    Put32(ip, 16, std::get<0>(flow.key));
    Put16(ip, 10, Fold(Sum16(ip, 0, 20)));
    Put16(ip, 20, std::get<3>(flow.key));
    Put16(ip, 22, std::get<1>(flow.key));
    Put32(ip, 24, flow.stationSeq);
    Put32(ip, 28, flow.next);
    ip[32] = uint8_t((20 + options) / 4) << 4;
    ip[33] = TcpView::ACK;
    uint16_t window = Window(flow);
    flow.windowClosed = (uint64_t(window) << flow.scale) < SEGMENT;
    Put16(ip, 34, window);
    if (options)
    {
        ip[40] = ip[41] = 1; // NOP NOP
        ip[42] = 8;
        ip[43] = 10;
        Put32(ip, 44, flow.stationTsVal);
        Put32(ip, 48, flow.lastTsEcr); // echoes the segment: the sender measures its RTT to the AP
    }
    uint32_t pseudo = Sum16(ip, 12, 20) + PROTO_TCP + uint32_t(ip.size() - 20);
    Put16(ip, 36, Fold(Sum16(ip, 20, ip.size(), pseudo)));
    acksSent++;
    m_toSender(flow.senderPort, ip, flow.station, flow.sender);
}

void
FastAck::Repeat(Flow& flow)
{
    acksRepeated++;
    Acknowledge(flow);
}

void
FastAck::Release(Flow& flow, uint32_t ack)
{
    for (auto it = flow.held.begin(); it != flow.held.end();)
    {
        if (!After(it->second.end, ack))
        {
            SetAired(flow, it->second, flow.base + it->first, true); // leaves the queue's count too
            it = flow.held.erase(it);
        }
        else
        {
            ++it;
        }
    }
    Progressed(flow);
}

void
FastAck::Progressed(Flow& flow)
{
    flow.timer.Cancel();
    flow.timeout = FIRST_TIMEOUT;
    Arm(flow);
    if (flow.windowClosed && (uint64_t(Window(flow)) << flow.scale) >= SEGMENT)
    {
        windowUpdates++;
        Acknowledge(flow); // the sender waits for room: say there is some
    }
}

bool
FastAck::Resend(Flow& flow, uint32_t from)
{
    auto it = flow.held.find(from - flow.base);
    if (it == flow.held.end() || !m_toStation(it->second.ip, flow.sender, flow.station))
    {
        return false;
    }
    SetAired(flow, it->second, from, false); // in the queue again
    localRetransmissions++;
    return true;
}

void
FastAck::SetAired(Flow& flow, Held& held, uint32_t seq, bool aired)
{
    if (held.aired != aired)
    {
        held.aired = aired;
        aired ? flow.queuedBytes -= held.end - seq : flow.queuedBytes += held.end - seq;
    }
}

FastAck::Flow*
FastAck::Accelerated(const TcpView& seg)
{
    if (seg.payload == 0)
    {
        return nullptr;
    }
    auto it = m_flows.find(Key{seg.srcIp, seg.srcPort, seg.dstIp, seg.dstPort});
    return it != m_flows.end() && it->second.started ? &it->second : nullptr;
}

void
FastAck::Dropped(const std::vector<uint8_t>& ip)
{
    TcpView seg;
    Flow* flow = seg.Parse(ip) ? Accelerated(seg) : nullptr;
    if (flow && After(seg.seq + seg.payload, flow->stationAcked))
    {
        // not from inside the MAC's drop notification: the queue is the MAC's own
        Simulator::ScheduleNow(&FastAck::ResendLater, this, flow->key, seg.seq);
    }
}

void
FastAck::Delivered(const std::vector<uint8_t>& ip)
{
    TcpView seg;
    Flow* flow = seg.Parse(ip) ? Accelerated(seg) : nullptr;
    if (!flow)
    {
        return;
    }
    auto it = flow->held.find(seg.seq - flow->base);
    if (it == flow->held.end() || it->second.aired ||
        it->second.end != seg.seq + seg.payload + ((seg.flags & TcpView::FIN) ? 1 : 0))
    {
        return;
    }
    SetAired(*flow, it->second, seg.seq, true); // still held: the station's TCP may yet lose it
    deliveredOverAir++;
    Progressed(*flow);
}

void
FastAck::ResendLater(Key key, uint32_t from)
{
    auto it = m_flows.find(key);
    if (it != m_flows.end() && Resend(it->second, from))
    {
        macDropsRepaired++;
    }
}

void
FastAck::Arm(Flow& flow)
{
    if (flow.held.empty() || flow.timer.IsRunning())
    {
        return;
    }
    if (flow.timeout.IsZero())
    {
        flow.timeout = FIRST_TIMEOUT;
    }
    flow.timer = Simulator::Schedule(flow.timeout, &FastAck::OnTimer, this, flow.key);
}

void
FastAck::OnTimer(Key key)
{
    auto it = m_flows.find(key);
    if (it == m_flows.end() || it->second.held.empty())
    {
        return;
    }
    Flow& flow = it->second;
    Resend(flow, flow.stationAcked); // the station's ACKs stalled: the first byte it lacks, if the AP has it
    flow.timeout = std::min(flow.timeout * 2, LAST_TIMEOUT);
    Arm(flow);
}

void
FastAck::ResetStats()
{
    accelerated = acksSent = stationAcksSwallowed = stationAcksPassed = localRetransmissions = macDropsRepaired =
        outOfOrder = windowUpdates = acksRepeated = deliveredOverAir = 0;
}

std::string
FastAck::Json() const
{
    std::ostringstream o;
    o << "{\"accelerated\": " << accelerated << ", \"delivered_over_air\": " << deliveredOverAir
      << ", \"acks_sent\": " << acksSent
      << ", \"station_acks_swallowed\": " << stationAcksSwallowed
      << ", \"station_acks_passed\": " << stationAcksPassed
      << ", \"local_retransmissions\": " << localRetransmissions << ", \"mac_drops_repaired\": " << macDropsRepaired
      << ", \"out_of_order\": " << outOfOrder
      << ", \"window_updates\": " << windowUpdates << ", \"acks_repeated\": " << acksRepeated << "}";
    return o.str();
}

} // namespace qbchannel
