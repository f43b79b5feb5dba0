// AP-side TCP ACK acceleration (see fastack.h).
// long on purpose: one state machine per connection. Its parts (handshake, cache, the MAC's
// delivery order, ACKs, timer, teardown) all read and write the same Flow, and each ACK the AP
// sends draws on all of them (number, window, timestamps, SACK blocks, ECE).

#include "fastack.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <optional>
#include <sstream>

namespace qbchannel
{

namespace
{

constexpr uint32_t SEGMENT = 1448; // a full-size TCP payload behind 1500-byte IP packets
constexpr uint32_t MAX_SEGMENT = 65536; // no IPv4 segment carries more: a held one covering a byte starts this close
// the fallback timer: well above the station's delayed ACK (40-200 ms) behind its uplink contention
const Time FIRST_TIMEOUT = MilliSeconds(300);
const Time LAST_TIMEOUT = Seconds(2);
// a connection whose second SYN never came: forgotten (Linux gives a SYN up after 63 s)
const Time HANDSHAKE_TIMEOUT = Seconds(75);

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
TcpSegment::Parse(const std::vector<uint8_t>& ip)
{
    std::optional<Ipv4View> packet = Ipv4View::Parse(ip);
    std::optional<TcpView> tcp = packet ? TcpView::Parse(*packet) : std::nullopt;
    if (!tcp)
    {
        return false;
    }
    srcIp = packet->Src();
    dstIp = packet->Dst();
    srcPort = tcp->SrcPort();
    dstPort = tcp->DstPort();
    seq = tcp->Seq();
    ack = tcp->Ack();
    flags = tcp->Flags();
    window = tcp->Window();
    payload = tcp->PayloadLength();
    hasTimestamp = false;
    tsValAt = 0;
    windowScale = -1;
    sackPermitted = false;
    size_t end = tcp->At() + tcp->HeaderLength(); // of the options
    for (size_t at = tcp->At() + TcpView::MIN_HEADER; at < end;)
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
        if (at + 1 >= end || ip[at + 1] < 2)
        {
            break;
        }
        if (kind == 3 && ip[at + 1] == 3 && at + 3 <= end)
        {
            windowScale = std::min<int>(ip[at + 2], 14);
        }
        if (kind == 4 && ip[at + 1] == 2)
        {
            sackPermitted = true;
        }
        if (kind == 8 && ip[at + 1] == 10 && at + 10 <= end)
        {
            hasTimestamp = true;
            tsValAt = at + 2;
            tsVal = Get32(ip, at + 2);
            tsEcr = Get32(ip, at + 6);
        }
        at += ip[at + 1];
    }
    return true;
}

FastAck::FastAck(ToStation toStation, ToSender toSender)
    : m_toStation(std::move(toStation)),
      m_toSender(std::move(toSender))
{
}

FastAck::Flow&
FastAck::Open(const Key& key)
{
    Flow& flow = m_flows[key];
    flow.timer.Cancel();
    if (flow.Accelerated())
    {
        flowsEnded++; // a new connection on these ports: the old one is gone
    }
    flow = Flow();
    flow.key = key;
    flow.id = m_nextId++;
    flow.timer = Simulator::Schedule(HANDSHAKE_TIMEOUT, &FastAck::OnTimer, this, key, flow.id);
    return flow;
}

void
FastAck::Handshaken(Flow& flow)
{
    flow.timer.Cancel();
    flow.base = flow.senderOffer.isn + 1;
    flow.next = flow.deliveredTo = flow.highest = flow.stationAcked = flow.base;
    flow.acked = flow.senderOffer.isn; // the sender's SYN is the station's to acknowledge
    flow.stationSeq = flow.stationOffer.isn + 1;
    flow.stationWindow = uint16_t(flow.stationOffer.window >> flow.Scale());
    flowsStarted++;
}

void
FastAck::End(Flow& flow, bool abandoned)
{
    if (flow.Accelerated())
    {
        (abandoned ? flowsAbandoned : flowsEnded)++;
    }
    flow.timer.Cancel();
    m_flows.erase(flow.key);
}

void
FastAck::EndIfClosed(Flow& flow)
{
    if (flow.senderFinAcked && flow.stationFinAcked)
    {
        End(flow, false);
    }
}

FastAck::Flow*
FastAck::Find(Key key, uint64_t id)
{
    auto it = m_flows.find(key);
    return it != m_flows.end() && it->second.id == id ? &it->second : nullptr;
}

FastAck::Flow*
FastAck::Established(std::map<Key, Flow>::iterator it, const TcpSegment& seg)
{
    if (it == m_flows.end())
    {
        return nullptr;
    }
    if (seg.flags & TcpView::RST)
    {
        End(it->second, false); // either end's reset ends the connection
        return nullptr;
    }
    return it->second.Accelerated() ? &it->second : nullptr;
}

bool
FastAck::FromSender(const std::vector<uint8_t>& ip, Mac48Address from, Mac48Address to, size_t in)
{
    TcpSegment seg;
    if (!seg.Parse(ip))
    {
        return false;
    }
    Key key{seg.srcIp, seg.srcPort, seg.dstIp, seg.dstPort};
    auto it = m_flows.find(key);
    if (seg.flags & TcpView::SYN)
    {
        bool answer = seg.flags & TcpView::ACK;
        Flow* flow = nullptr;
        if (!answer && (it == m_flows.end() || !it->second.senderOffer.seen || it->second.senderOffer.isn != seg.seq))
        {
            flow = &Open(key); // the wired end opens
        }
        else if (answer && it != m_flows.end() && it->second.stationOffer.seen && !it->second.senderOffer.seen)
        {
            flow = &it->second;
        }
        if (flow)
        {
            flow->senderOffer.Take(seg);
            flow->tsRecent = seg.tsVal;
            flow->sender = from;
            flow->station = to;
            flow->senderPort = in;
            if (answer)
            {
                Handshaken(*flow);
            }
        }
        return false;
    }
    Flow* established = Established(it, seg);
    if (!established)
    {
        return false;
    }
    Flow& flow = *established;
    flow.sender = from;
    flow.station = to;
    flow.senderPort = in;
    if (seg.hasTimestamp && !After(flow.senderTsVal, seg.tsVal))
    {
        flow.senderTsVal = seg.tsVal;
    }
    if ((seg.flags & TcpView::ACK) && flow.stationFin && After(seg.ack, flow.stationFinSeq))
    {
        flow.stationFinAcked = true;
    }
    if (seg.flags & TcpView::FIN)
    {
        flow.senderFin = true;
        flow.senderFinSeq = seg.seq + seg.payload;
    }
    if ((seg.flags & TcpView::CWR) && seg.payload > 0)
    {
        // the sender answered the ECE: echoing it again, from station ACKs sent before the
        // station saw this segment, would make the sender reduce its window a second time
        flow.cwrPending = true;
        flow.cwrEnd = seg.End();
        flow.ece = false;
    }
    bool taken = false;
    if (seg.payload > 0)
    {
        taken = SenderData(flow, seg, ip);
        if (After(flow.acked, seg.seq) && After(seg.End(), flow.acked))
        {
            Repeat(flow, seg); // sent again from below what the AP acknowledged, and beyond
        }
    }
    else if (!(seg.flags & TcpView::FIN) && After(flow.acked, seg.seq))
    {
        Repeat(flow, seg); // a window probe or keep-alive: the station's answer is consumed
    }
    else if ((seg.flags & TcpView::FIN) && !After(seg.End(), flow.acked))
    {
        // a bare FIN sent again: the sender never heard the ACK it got (the station's, passed, or
        // the AP's), and the station's answer to a copy would stop here, being no news
        Repeat(flow, seg);
        taken = true;
    }
    EndIfClosed(flow);
    return taken;
}

bool
FastAck::SenderData(Flow& flow, const TcpSegment& seg, const std::vector<uint8_t>& ip)
{
    uint32_t end = seg.End();
    if (!After(end, flow.acked))
    {
        Repeat(flow, seg); // the AP's ACK for it was lost on the way back
        return true;
    }
    if (After(flow.base, seg.seq))
    {
        return false;
    }
    if (After(end, flow.highest))
    {
        flow.highest = end;
    }
    HeldAt found = flow.held.find(seg.seq - flow.base);
    bool fresh = found == flow.held.end();
    if (!fresh && !After(end, found->second.end) && found->second.copy != Copy::Dropped)
    {
        return true; // the radio has a copy already (queued or confirmed)
    }
    if (fresh)
    {
        found = flow.held.emplace(seg.seq - flow.base, Held{}).first;
    }
    else
    {
        Account(flow, found, -1); // a copy the MAC dropped, or a longer one
    }
    Held& held = found->second;
    std::vector<uint8_t> previous = std::move(held.ip);
    held.ip = ip;
    if (!Enqueue(flow, found))
    {
        queueRefused++; // lost at the AP: a hole the sender repairs (or, for a copy it had, the AP)
        if (fresh)
        {
            flow.held.erase(found);
        }
        else
        {
            held.ip = std::move(previous);
            Account(flow, found, 1);
        }
        return true;
    }
    if (fresh)
    {
        accelerated++;
        if (After(seg.seq, flow.next))
        {
            outOfOrder++; // a loss before the AP
        }
    }
    held.end = end;
    held.tsVal = seg.tsVal;
    held.tsValAt = seg.tsValAt;
    held.copy = Copy::Queued;
    held.atStation = false;
    Account(flow, found, 1);
    Advance(flow);
    return true;
}

void
FastAck::Repeat(Flow& flow, const TcpSegment& seg)
{
    // RFC 7323 4.3: a segment at or below Last.ACK.sent updates TS.Recent; the ACK echoes it
    if (seg.hasTimestamp && !After(flow.tsRecent, seg.tsVal))
    {
        flow.tsRecent = seg.tsVal;
    }
    acksRepeated++;
    SendAck(flow, Window(flow));
}

bool
FastAck::FromStation(const std::vector<uint8_t>& ip)
{
    TcpSegment seg;
    if (!seg.Parse(ip))
    {
        return false;
    }
    Key key{seg.dstIp, seg.dstPort, seg.srcIp, seg.srcPort};
    auto it = m_flows.find(key);
    if (seg.flags & TcpView::SYN)
    {
        bool answer = seg.flags & TcpView::ACK;
        Flow* flow = nullptr;
        if (!answer &&
            (it == m_flows.end() || !it->second.stationOffer.seen || it->second.stationOffer.isn != seg.seq))
        {
            flow = &Open(key); // the station opens
        }
        else if (answer && it != m_flows.end() && it->second.senderOffer.seen && !it->second.stationOffer.seen)
        {
            flow = &it->second;
        }
        if (flow)
        {
            flow->stationOffer.Take(seg);
            flow->stationTsVal = seg.tsVal;
            if (answer)
            {
                Handshaken(*flow);
                flow->acked = seg.ack; // the sender hears this one
            }
        }
        return false;
    }
    Flow* established = Established(it, seg);
    if (!established)
    {
        return false;
    }
    Flow& flow = *established;
    uint32_t seqEnd = seg.End();
    if (After(seqEnd, flow.stationSeq))
    {
        flow.stationSeq = seqEnd; // never backwards: a retransmission is below it
    }
    if (seg.flags & TcpView::FIN)
    {
        flow.stationFin = true;
        flow.stationFinSeq = seg.seq + seg.payload;
    }
    if (seg.hasTimestamp && !After(flow.stationTsVal, seg.tsVal))
    {
        flow.stationTsVal = seg.tsVal;
    }
    if (!(seg.flags & TcpView::ACK))
    {
        return false;
    }
    if (HeldForRepair(flow, seg))
    {
        stationAcksHeld++;
        stationAcksSwallowed++;
        return true;
    }
    if (After(seg.ack, flow.stationAcked))
    {
        flow.stationAcked = seg.ack;
        flow.stationWindow = seg.window;
        flow.ece = StationEce(flow, seg);
        flow.duplicates = 0;
        if (flow.senderFin && After(seg.ack, flow.senderFinSeq))
        {
            flow.senderFinAcked = true;
        }
        Release(flow, seg.ack);
    }
    else if (seg.ack == flow.stationAcked)
    {
        // RFC 5681: no data, no SYN/FIN, the highest ACK, the same window, data outstanding
        bool duplicate = seg.PureAck() && seg.window == flow.stationWindow && flow.heldBytes > 0;
        flow.stationWindow = seg.window;
        flow.ece = StationEce(flow, seg);
        if (duplicate)
        {
            stationDuplicates++;
            HeldAt lacking = Covering(flow, seg.ack, false);
            if (++flow.duplicates == 3 && lacking != flow.held.end() && Missing(lacking->second))
            {
                Resend(flow, lacking, true);
                Arm(flow); // deferred or refused: the timer's
            }
        }
    }
    bool ahead = After(seg.ack, flow.acked);
    if (ahead && seg.hasTimestamp && !After(flow.tsRecent, seg.tsEcr))
    {
        // the station's TS.Recent: no later ACK of the AP may echo an older TSval, which the
        // sender would read as its retransmission's original arriving (Linux: TCPTSReorder)
        flow.tsRecent = seg.tsEcr;
    }
    // a keep-alive or zero-window probe: a pure ACK from before the station's next sequence
    // number, sent for the sender's answer (RFC 9293 3.8.4, 3.8.6.1); consumed, it would go unanswered
    bool probe = seg.PureAck() && After(flow.stationSeq, seg.seq);
    if (ahead || !seg.PureAck() || probe)
    {
        if (ahead)
        {
            flow.acked = seg.ack; // the station is ahead of the AP: the sender hears it
            flow.lastWindow = seg.window;
        }
        stationAcksPassed++;
        EndIfClosed(flow);
        return false;
    }
    stationAcksSwallowed++;
    WindowUpdate(flow);
    EndIfClosed(flow); // the station's ACK of a FIN the AP already answered can be the last packet
    return true;
}

bool
FastAck::StationEce(Flow& flow, const TcpSegment& seg)
{
    // the station echoes CE on every ACK until a segment with CWR reaches it: its ECE on an ACK
    // below the sender's CWR segment is the congestion the sender already answered; on an ACK
    // that covers it, a new CE mark
    if (flow.cwrPending)
    {
        if (After(flow.cwrEnd, seg.ack))
        {
            return false;
        }
        flow.cwrPending = false;
    }
    return seg.flags & TcpView::ECE;
}

uint16_t
FastAck::Window(const Flow& flow) const
{
    // the station's window less what it has not acknowledged of what the AP did
    int scale = flow.Scale();
    uint32_t edge = flow.stationAcked + (uint32_t(flow.stationWindow) << scale);
    uint64_t room = After(edge, flow.acked) ? edge - flow.acked : 0;
    return uint16_t(std::min<uint64_t>(room >> scale, 0xffff));
}

void
FastAck::WindowUpdate(Flow& flow)
{
    int scale = flow.Scale();
    uint16_t window = Window(flow);
    uint64_t open = uint64_t(window) << scale, last = uint64_t(flow.lastWindow) << scale;
    // what a receiver does when its reader frees room: say so once it is worth a segment
    if (open >= SEGMENT && (last < SEGMENT || open >= 2 * last))
    {
        windowUpdates++;
        SendAck(flow, window);
    }
}

FastAck::HeldAt
FastAck::Covering(Flow& flow, uint32_t at, bool atStationOnly)
{
    uint32_t offset = at - flow.base;
    for (HeldAt it = flow.held.upper_bound(offset); it != flow.held.begin();)
    {
        --it;
        if (offset - it->first >= MAX_SEGMENT)
        {
            break;
        }
        if (After(it->second.end, at) && (!atStationOnly || it->second.atStation))
        {
            return it;
        }
    }
    return flow.held.end();
}

void
FastAck::Advance(Flow& flow)
{
    if (After(flow.stationAcked, flow.next))
    {
        flow.next = flow.stationAcked;
    }
    if (After(flow.stationAcked, flow.deliveredTo))
    {
        flow.deliveredTo = flow.stationAcked;
    }
    for (HeldAt it; (it = Covering(flow, flow.next, false)) != flow.held.end();)
    {
        flow.next = it->second.end;
    }
    for (HeldAt it; (it = Covering(flow, flow.deliveredTo, true)) != flow.held.end();)
    {
        flow.deliveredTo = it->second.end;
    }
}

void
FastAck::Account(Flow& flow, HeldAt held, int sign)
{
    int64_t bytes = int64_t(held->second.end - (flow.base + held->first)) * sign;
    flow.heldBytes += bytes;
    if (held->second.copy == Copy::Queued)
    {
        flow.queuedBytes += bytes;
    }
}

void
FastAck::SetCopy(Flow& flow, HeldAt held, Copy copy)
{
    Account(flow, held, -1);
    held->second.copy = copy;
    Account(flow, held, 1);
}

void
FastAck::Release(Flow& flow, uint32_t ack)
{
    for (HeldAt it = flow.held.begin(); it != flow.held.end() && After(ack, flow.base + it->first);)
    {
        if (!After(it->second.end, ack))
        {
            Account(flow, it, -1);
            it = flow.held.erase(it);
        }
        else
        {
            ++it;
        }
    }
    Advance(flow);
    flow.silentExpiries = 0;
    flow.timer.Cancel(); // the station's TCP is alive
    flow.timeout = FIRST_TIMEOUT;
    if (flow.recovering && After(flow.recoverTo, ack))
    {
        // what else its TCP lost, one segment an ACK, rather than one a timer expiry
        HeldAt lacking = Covering(flow, ack, false);
        if (lacking != flow.held.end() && Missing(lacking->second) &&
            Resend(flow, lacking, false) == Resent::Sent)
        {
            partialAckResends++;
        }
    }
    else
    {
        flow.recovering = false;
    }
    Arm(flow);
    if (After(flow.deliveredTo, flow.acked))
    {
        ScheduleAcks(flow);
    }
}

FastAck::Flow*
FastAck::QueuedCopy(const std::vector<uint8_t>& ip, HeldAt& held)
{
    TcpSegment seg;
    if (!seg.Parse(ip) || seg.payload == 0)
    {
        return nullptr;
    }
    auto it = m_flows.find(Key{seg.srcIp, seg.srcPort, seg.dstIp, seg.dstPort});
    if (it == m_flows.end() || !it->second.Accelerated())
    {
        return nullptr;
    }
    Flow& flow = it->second;
    held = flow.held.find(seg.seq - flow.base);
    if (held == flow.held.end() || held->second.copy != Copy::Queued || held->second.end != seg.End())
    {
        return nullptr; // not the copy the AP holds (the station's TCP acknowledged it, or a newer one is queued)
    }
    return &flow;
}

void
FastAck::Dropped(const std::vector<uint8_t>& ip, bool expired)
{
    HeldAt held;
    Flow* found = QueuedCopy(ip, held);
    if (!found)
    {
        return;
    }
    Flow& flow = *found;
    uint32_t seq = flow.base + held->first;
    held->second.expired = expired;
    SetCopy(flow, held, Copy::Dropped);
    // not from inside the MAC's drop notification: the queue is the MAC's own
    Simulator::ScheduleNow(&FastAck::ResendDropped, this, flow.key, flow.id, seq);
}

void
FastAck::ResendDropped(Key key, uint64_t id, uint32_t seq)
{
    Flow* flow = Find(key, id);
    if (!flow)
    {
        return;
    }
    HeldAt held = flow->held.find(seq - flow->base);
    if (held == flow->held.end() || held->second.copy != Copy::Dropped)
    {
        return;
    }
    if (Resend(*flow, held, true) == Resent::Sent)
    {
        macDropsRepaired++;
    }
    else
    {
        held->second.copyId = 0; // none queued: the station's MAC moves past it; the timer resends it
    }
    Arm(*flow);
    ScheduleAcks(*flow);
}

void
FastAck::Delivered(const std::vector<uint8_t>& ip)
{
    HeldAt held;
    Flow* found = QueuedCopy(ip, held);
    if (!found)
    {
        return;
    }
    Flow& flow = *found;
    SetCopy(flow, held, Copy::Aired); // still held: the station's TCP may yet lose it
    deliveredOverAir++;
    Advance(flow);
    Arm(flow);
    ScheduleAcks(flow);
}

void
FastAck::ScheduleAcks(Flow& flow)
{
    if (!flow.ackScheduled)
    {
        flow.ackScheduled = true; // one ACK for all a block ACK confirmed
        Simulator::ScheduleNow(&FastAck::SendDue, this, flow.key, flow.id);
    }
}

void
FastAck::SendDue(Key key, uint64_t id)
{
    Flow* flow = Find(key, id);
    if (!flow)
    {
        return;
    }
    flow->ackScheduled = false;
    DeliverInOrder(*flow);
    AcknowledgeNew(*flow);
}

void
FastAck::AcknowledgeNew(Flow& flow)
{
    if (!After(flow.deliveredTo, flow.acked))
    {
        return;
    }
    // RFC 7323 4.3: echo the earliest segment this ACK acknowledges (the copy the station got)
    HeldAt first = Covering(flow, flow.acked, false);
    if (first != flow.held.end() && !After(flow.tsRecent, first->second.tsVal))
    {
        flow.tsRecent = first->second.tsVal;
    }
    flow.acked = flow.deliveredTo;
    SendAck(flow, Window(flow));
}

void
FastAck::NoteSack(Flow& flow, uint32_t start, uint32_t end)
{
    for (auto it = flow.sacks.begin(); it != flow.sacks.end();)
    {
        if (!After(start, it->second) && !After(it->first, end)) // overlapping or adjacent: one block
        {
            start = After(start, it->first) ? it->first : start;
            end = After(it->second, end) ? it->second : end;
            it = flow.sacks.erase(it);
        }
        else
        {
            ++it;
        }
    }
    flow.sacks.insert(flow.sacks.begin(), {start, end});
    if (flow.sacks.size() > 4)
    {
        flow.sacks.pop_back(); // Linux keeps four
    }
}

bool
FastAck::Enqueue(Flow& flow, HeldAt held)
{
    if (!m_toStation(held->second.ip, flow.sender, flow.station))
    {
        return false;
    }
    held->second.copyId = ++flow.copies;
    flow.order.emplace_back(held->first, held->second.copyId);
    return true;
}

bool
FastAck::HeldForRepair(Flow& flow, const TcpSegment& seg)
{
    // Ahead of the AP's ACK, the station's ACK covers segments behind the repair in the order
    // the AP reports (the station's MAC moved past the dropped frame) and its SACK blocks are
    // only its latest few. Passed, or only its ACK number reported, it tells the sender of later
    // segments before earlier ones the station also has, and its RACK resends those. So the
    // AP leaves it alone: once the repair arrives it reports everything in order, and the
    // station's next ACK frees the cache. An ACK of the sender's FIN ends the connection: passed.
    bool finAcked = flow.senderFin && After(seg.ack, flow.senderFinSeq);
    return seg.PureAck() && After(seg.ack, flow.acked) && !finAcked && AwaitingRepair(flow);
}

FastAck::Held*
FastAck::InPlace(Flow& flow, uint32_t offset, uint64_t copyId)
{
    HeldAt it = flow.held.find(offset);
    if (it == flow.held.end())
    {
        return nullptr;
    }
    Held& held = it->second;
    // a copy the AP queued again (after a MAC drop, or the sender's) takes this one's place
    // while the station lacks the segment: the sender hears of it in its first place, as if
    // the MAC had kept trying it, and sees no hole for the AP's own repair to fill
    bool replaced = held.copyId != copyId && held.copyId != 0 && !held.atStation;
    return held.copyId == copyId || replaced ? &held : nullptr;
}

bool
FastAck::AwaitingRepair(Flow& flow)
{
    for (const auto& [offset, copyId] : flow.order)
    {
        Held* held = InPlace(flow, offset, copyId);
        if (held && Waits(*held))
        {
            return held->resends > 0 || held->copy == Copy::Dropped; // where DeliverInOrder stops
        }
    }
    return false;
}

bool
FastAck::Repairing(Flow& flow)
{
    HeldAt lacking = Covering(flow, flow.acked, false);
    return lacking != flow.held.end() && (lacking->second.copy == Copy::Dropped || lacking->second.resends > 0);
}

void
FastAck::DeliverInOrder(Flow& flow)
{
    while (!flow.order.empty())
    {
        auto [offset, copyId] = flow.order.front();
        if (Held* inPlace = InPlace(flow, offset, copyId))
        {
            Held& held = *inPlace;
            if (Waits(held))
            {
                break; // the MAC still tries it, or the AP is about to: the station's reorder buffer waits
            }
            bool arrived = held.copy == Copy::Aired && !held.atStation;
            held.atStation = held.atStation || arrived;
            Advance(flow);
            if (arrived && After(held.end, flow.deliveredTo))
            {
                // above a byte the station lacks: it reports the segment in its SACK blocks (only
                // what it has: a SACKed segment the ACK reaches later is, to Linux, a receiver
                // reneging, answered by a retransmission timeout), and answers with a duplicate
                NoteSack(flow, flow.base + offset, held.end);
                AcknowledgeNew(flow); // what came in order before it first, as the station does
                if (!Repairing(flow))
                {
                    duplicateAcksSent++;
                    SendAck(flow, flow.lastWindow); // the same window: RFC 5681's duplicate
                }
            }
        }
        flow.order.pop_front(); // delivered, dropped, or no longer held
    }
}

void
FastAck::SendAck(Flow& flow, uint16_t window)
{
    std::vector<uint8_t> options;
    if (flow.Timestamps())
    {
        options = {1, 1, 8, 10};
        options.resize(12);
        Put32(options, 4, flow.stationTsVal);
        Put32(options, 8, flow.tsRecent);
    }
    if (flow.Sack() && !flow.sacks.empty())
    {
        // never a block starting at the ACK: Linux takes that for a receiver reneging
        auto covered = [&flow](const std::pair<uint32_t, uint32_t>& block) { return !After(block.second, flow.acked); };
        flow.sacks.erase(std::remove_if(flow.sacks.begin(), flow.sacks.end(), covered), flow.sacks.end());
        size_t at = options.size();
        options.resize(at + 4);
        options[at] = options[at + 1] = 1; // NOP NOP
        options[at + 2] = 5;
        for (const auto& [start, end] : flow.sacks)
        {
            if (options.size() + 8 <= 40 && After(start, flow.acked))
            {
                options.resize(options.size() + 8);
                Put32(options, options.size() - 8, start);
                Put32(options, options.size() - 4, end);
            }
        }
        options[at + 3] = uint8_t(options.size() - at - 2);
        if (options.size() == at + 4)
        {
            options.resize(at); // nothing to report
        }
    }
    std::vector<uint8_t> ip(40 + options.size(), 0);
    ip[0] = 0x45;
    Put16(ip, 2, uint16_t(ip.size()));
    Put16(ip, 6, 0x4000); // don't fragment
    ip[8] = 64;
    ip[9] = Ipv4View::TCP;
    Put32(ip, 12, std::get<2>(flow.key)); // from the station
    Put32(ip, 16, std::get<0>(flow.key));
    Put16(ip, 10, Fold(Sum16(ip, 0, 20)));
    Put16(ip, 20, std::get<3>(flow.key));
    Put16(ip, 22, std::get<1>(flow.key));
    Put32(ip, 24, flow.stationSeq);
    Put32(ip, 28, flow.acked);
    ip[32] = uint8_t((20 + options.size()) / 4) << 4;
    ip[33] = TcpView::ACK | (flow.ece ? TcpView::ECE : 0);
    Put16(ip, 34, window);
    std::copy(options.begin(), options.end(), ip.begin() + 40);
    uint32_t pseudo = Sum16(ip, 12, 20) + Ipv4View::TCP + uint32_t(ip.size() - 20);
    Put16(ip, 36, Fold(Sum16(ip, 20, ip.size(), pseudo)));
    flow.lastWindow = window;
    acksSent++;
    eceEchoed += flow.ece;
    m_toSender(flow.senderPort, ip, flow.station, flow.sender);
}

FastAck::Resent
FastAck::Resend(Flow& flow, HeldAt held, bool deferrable)
{
    // only the air's failures count: a copy that outlived its queue lifetime in a slow cell says
    // nothing of the station
    bool counts = !held->second.expired;
    if (counts && deferrable && held->second.resends >= MAX_RESENDS)
    {
        return Resent::Deferred; // no more at once: a station the air keeps failing gets the backoff
    }
    held->second.expired = false;
    std::vector<uint8_t>& ip = held->second.ip;
    if (held->second.tsValAt && After(flow.senderTsVal, Get32(ip, held->second.tsValAt)))
    {
        // the sender's latest TSval: with the copy's own, the station's PAWS check (RFC 7323)
        // discards it once a later segment moved its TS.Recent on
        Put32(ip, held->second.tsValAt, flow.senderTsVal);
        Ipv4View packet = *Ipv4View::Parse(ip); // (parsed as a TCP segment when the AP took it)
        size_t tcp = packet.HeaderLength(), total = packet.TotalLength();
        Put16(ip, tcp + 16, 0);
        uint32_t pseudo = Sum16(ip, 12, 20) + Ipv4View::TCP + uint32_t(total - tcp);
        Put16(ip, tcp + 16, Fold(Sum16(ip, tcp, total, pseudo)));
    }
    if (!Enqueue(flow, held))
    {
        return Resent::Refused;
    }
    held->second.resends += counts;
    mostResends = std::max(mostResends, held->second.resends);
    localRetransmissions++;
    SetCopy(flow, held, Copy::Queued);
    return Resent::Sent;
}

void
FastAck::Arm(Flow& flow)
{
    // only for what the radio no longer holds: what is queued gets its MAC's verdict
    if (flow.timer.IsRunning() || flow.heldBytes <= flow.queuedBytes)
    {
        return;
    }
    if (flow.timeout.IsZero())
    {
        flow.timeout = FIRST_TIMEOUT;
    }
    flow.timer = Simulator::Schedule(flow.timeout, &FastAck::OnTimer, this, flow.key, flow.id);
}

void
FastAck::OnTimer(Key key, uint64_t id)
{
    Flow* flow = Find(key, id);
    if (!flow)
    {
        return;
    }
    if (!flow->Accelerated())
    {
        m_flows.erase(key); // its handshake never completed
        return;
    }
    if (++flow->silentExpiries > MAX_SILENT_EXPIRIES)
    {
        End(*flow, true);
        return;
    }
    // the station's TCP went quiet about data its MAC confirmed: the first byte it lacks
    HeldAt lacking = Covering(*flow, flow->stationAcked, false);
    if (lacking != flow->held.end() && Missing(lacking->second))
    {
        if (Resend(*flow, lacking, false) == Resent::Sent)
        {
            timerResends++;
            flow->recovering = true;
            flow->recoverTo = flow->deliveredTo;
        }
    }
    flow->timeout = std::min(flow->timeout * 2, LAST_TIMEOUT);
    Arm(*flow);
}

void
FastAck::ResetStats()
{
    accelerated = deliveredOverAir = acksSent = stationAcksSwallowed = stationAcksPassed = stationAcksHeld =
        stationDuplicates = localRetransmissions = macDropsRepaired = timerResends = partialAckResends =
            outOfOrder = queueRefused = duplicateAcksSent = windowUpdates = acksRepeated = eceEchoed = flowsStarted =
                flowsEnded = flowsAbandoned = 0;
    mostResends = 0;
}

std::string
FastAck::Json() const
{
    size_t active = 0;
    int64_t heldBytes = 0;
    for (const auto& [key, flow] : m_flows)
    {
        active += flow.Accelerated();
        heldBytes += flow.heldBytes;
    }
    std::ostringstream o;
    o << "{\"accelerated\": " << accelerated << ", \"delivered_over_air\": " << deliveredOverAir
      << ", \"acks_sent\": " << acksSent << ", \"station_acks_swallowed\": " << stationAcksSwallowed
      << ", \"station_acks_passed\": " << stationAcksPassed << ", \"station_acks_held\": " << stationAcksHeld
      << ", \"station_duplicate_acks\": " << stationDuplicates
      << ", \"local_retransmissions\": " << localRetransmissions << ", \"mac_drops_repaired\": " << macDropsRepaired
      << ", \"timer_resends\": " << timerResends << ", \"partial_ack_resends\": " << partialAckResends
      << ", \"most_resends\": " << mostResends
      << ", \"out_of_order\": " << outOfOrder << ", \"queue_refused\": " << queueRefused
      << ", \"duplicate_acks_sent\": " << duplicateAcksSent << ", \"window_updates\": " << windowUpdates
      << ", \"acks_repeated\": " << acksRepeated << ", \"ece_echoed\": " << eceEchoed
      << ", \"flows_started\": " << flowsStarted << ", \"flows_ended\": " << flowsEnded
      << ", \"flows_abandoned\": " << flowsAbandoned << ", \"flows_active\": " << active
      << ", \"held_bytes\": " << heldBytes << "}";
    return o.str();
}

} // namespace qbchannel
