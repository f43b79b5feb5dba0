// A radio's queue discipline (see aqm.h).

#include "aqm.h"

#include "ledger.h"
#include "packet_view.h"

#include "ns3/fq-codel-queue-disc.h"
#include "ns3/hash.h"
#include "ns3/object-factory.h"
#include "ns3/queue-item.h"
#include "ns3/queue-size.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <optional>
#include <sstream>

namespace qbchannel
{

namespace
{

/// A frame in the discipline: the whole packet as the MAC will take it (an IPv4 packet keeps
/// its header bytes, so nothing is parsed and written again), and its source, which an AP
/// sends from. Its hash (FQ-CoDel's flow) is the IPv4 5-tuple, as Linux's flow dissector
/// finds it; frames that are not IPv4 share one flow. Not ECN-capable: CoDel drops.
class QbQueueDiscItem : public QueueDiscItem
{
  public:
    QbQueueDiscItem(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto)
        : QueueDiscItem(p, dst, proto),
          src(src)
    {
    }

    void AddHeader() override
    {
    }

    bool Mark() override
    {
        return false;
    }

    uint32_t Hash(uint32_t perturbation) const override
    {
        if (GetProtocol() != PROTO_IPV4)
        {
            return 0;
        }
        uint8_t head[64]; // the longest IPv4 header, and a transport header's ports
        // unchecked (version, lengths): the hash takes the ethertype's word that this is IPv4
        std::optional<Ipv4View> ip = Ipv4View::Unchecked(head, GetPacket()->CopyData(head, sizeof(head)));
        if (!ip)
        {
            return 0;
        }
        uint8_t tuple[17] = {};
        std::copy(ip->Bytes() + 12, ip->Bytes() + 20, tuple); // source and destination addresses
        tuple[8] = ip->Protocol();
        bool ports = ip->Protocol() == Ipv4View::TCP || ip->Protocol() == Ipv4View::UDP;
        // (a later fragment has none; the bytes, not the total length, bound them)
        if (ports && ip->FragmentOffset() == 0 && ip->Size() >= ip->HeaderLength() + 4)
        {
            std::copy(ip->Payload(), ip->Payload() + 4, tuple + 9);
        }
        std::copy(reinterpret_cast<uint8_t*>(&perturbation),
                  reinterpret_cast<uint8_t*>(&perturbation) + 4,
                  tuple + 13);
        return Hash32(reinterpret_cast<const char*>(tuple), sizeof(tuple));
    }

    Mac48Address src;
};

std::string
TimeString(double ms)
{
    return std::to_string(int64_t(ms * 1000 + 0.5)) + "us";
}

uint32_t
Difference(const std::map<std::string, uint32_t, std::less<>>& now,
           const std::map<std::string, uint32_t, std::less<>>& base,
           std::map<std::string, uint32_t>& into)
{
    uint32_t total = 0;
    for (auto& [reason, count] : now)
    {
        auto it = base.find(reason);
        uint32_t n = count - (it != base.end() ? it->second : 0);
        if (n)
        {
            into[reason] += n;
            total += n;
        }
    }
    return total;
}

/// A discipline's counters since its statistics were reset, summed over one or more discs.
struct DiscCounts
{
    uint64_t enqueued = 0, marks = 0, backlog = 0;
    uint32_t atEnqueue = 0, atDequeue = 0;
    std::map<std::string, uint32_t> reasons;
    std::map<uint32_t, uint64_t> sojourn;

    void Add(Ptr<QueueDisc> disc, const QueueDisc::Stats& base, const std::map<uint32_t, uint64_t>& times)
    {
        const QueueDisc::Stats& now = disc->GetStats();
        atEnqueue += Difference(now.nDroppedPacketsBeforeEnqueue, base.nDroppedPacketsBeforeEnqueue, reasons);
        atDequeue += Difference(now.nDroppedPacketsAfterDequeue, base.nDroppedPacketsAfterDequeue, reasons);
        enqueued += now.nTotalEnqueuedPackets - base.nTotalEnqueuedPackets;
        marks += now.nTotalMarkedPackets - base.nTotalMarkedPackets;
        backlog += disc->GetNPackets();
        for (auto& [bucket, count] : times)
        {
            sojourn[bucket] += count;
        }
    }

    /// "enqueued", "drops": {"at_enqueue", "at_dequeue", "reasons"}, "marks",
    /// "backlog_packets", "sojourn_100us" (the inside of a JSON object)
    std::string Json() const
    {
        std::ostringstream o;
        o << "\"enqueued\": " << enqueued << ", \"drops\": {\"at_enqueue\": " << atEnqueue
          << ", \"at_dequeue\": " << atDequeue << ", \"reasons\": {";
        bool first = true;
        for (auto& [reason, count] : reasons)
        {
            o << (first ? "" : ", ") << Quote(reason) << ": " << count;
            first = false;
        }
        o << "}}, \"marks\": " << marks << ", \"backlog_packets\": " << backlog
          << ", \"sojourn_100us\": " << qbjson::Counts(sojourn);
        return o.str();
    }
};

/// The discipline's drops (CoDel's, a full queue's) go in the frame ledger.
void
LedgerDrops(Ptr<QueueDisc> disc)
{
    auto dropped = +[](Ptr<const QueueDiscItem> item, const char*) {
        g_ledger.Dropped(item->GetPacket(), item->GetProtocol(), Framing::IP, "queue_disc");
    };
    disc->TraceConnectWithoutContext("DropBeforeEnqueue", MakeCallback(dropped));
    disc->TraceConnectWithoutContext("DropAfterDequeue", MakeCallback(dropped));
}

} // namespace

RadioQueueDisc::RadioQueueDisc(const Value& spec, Ptr<WifiNetDevice> dev, size_t txIndex, ToMac toMac)
    : m_kind(spec.Str("kind", "codel")),
      m_txIndex(txIndex),
      m_toMac(std::move(toMac))
{
    ObjectFactory factory;
    std::string target = TimeString(spec.Num("target_ms", 5));
    std::string interval = TimeString(spec.Num("interval_ms", 100));
    std::string limit = std::to_string(uint32_t(spec.Num("packets", 1000))) + "p";
    if (m_kind == "codel")
    {
        factory.SetTypeId("ns3::CoDelQueueDisc");
    }
    else if (m_kind == "fq_codel")
    {
        factory.SetTypeId("ns3::FqCoDelQueueDisc");
        factory.Set("Flows", UintegerValue(uint32_t(spec.Num("flows", 1024))));
    }
    else
    {
        Die("unknown queue kind " + m_kind + " (codel or fq_codel)");
    }
    factory.Set("MaxSize", QueueSizeValue(QueueSize(limit)));
    factory.Set("Target", StringValue(target));
    factory.Set("Interval", StringValue(interval));
    m_disc = factory.Create<QueueDisc>();
    if (auto fq = DynamicCast<FqCoDelQueueDisc>(m_disc); fq && spec.Num("quantum", 0) > 0)
    {
        fq->SetQuantum(uint32_t(spec.Num("quantum", 0))); // (0: the MTU, from the device)
    }
    Ptr<NetDeviceQueueInterface> ndqi = dev->GetObject<NetDeviceQueueInterface>();
    if (!ndqi || txIndex >= ndqi->GetNTxQueues())
    {
        Die("radio " + spec.Str("id", "?") + " has no flow control for a queue discipline");
    }
    m_disc->SetNetDeviceQueueInterface(ndqi);
    m_disc->SetSendCallback([this](Ptr<QueueDiscItem> item) {
        Ptr<QbQueueDiscItem> frame = DynamicCast<QbQueueDiscItem>(item);
        m_toMac(frame->GetPacket(), frame->src, Mac48Address::ConvertFrom(frame->GetAddress()),
                frame->GetProtocol());
    });
    m_disc->TraceConnectWithoutContext("SojournTime", MakeCallback(&RadioQueueDisc::OnSojourn, this));
    LedgerDrops(m_disc);
    m_disc->Initialize();
    // the MAC queue wakes the discipline whenever it has room again
    ndqi->GetTxQueue(txIndex)->SetWakeCallback(MakeCallback(&QueueDisc::Run, m_disc));
    m_base = m_disc->GetStats();
}

bool
RadioQueueDisc::Enqueue(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto)
{
    Ptr<QbQueueDiscItem> item = Create<QbQueueDiscItem>(p, src, dst, proto);
    item->SetTxQueueIndex(m_txIndex);
    bool queued = m_disc->Enqueue(item);
    m_disc->Run();
    return queued;
}

void
RadioQueueDisc::OnSojourn(Time sojourn)
{
    m_sojourn[uint32_t(sojourn.GetMicroSeconds() / 100)]++;
}

void
RadioQueueDisc::ResetStats()
{
    m_base = m_disc->GetStats();
    m_sojourn.clear();
}

std::string
RadioQueueDisc::Json()
{
    DiscCounts counts;
    counts.Add(m_disc, m_base, m_sojourn);
    return "{\"kind\": " + Quote(m_kind) + ", \"limit_packets\": " +
           std::to_string(m_disc->GetMaxSize().GetValue()) + ", " + counts.Json() + "}";
}

// -- per-station queues with airtime fairness ----------------------------------------------------

StationQueues::StationQueues(const Value& spec,
                             Ptr<WifiMacQueue> macQueue,
                             bool qos,
                             bool oneReceiver,
                             ToMac toMac)
    : m_target(TimeString(spec.Num("target_ms", 20))),
      m_interval(TimeString(spec.Num("interval_ms", 100))),
      m_limitPackets(uint32_t(spec.Num("packets", 8192))),
      m_flows(uint32_t(spec.Num("flows", 1024))),
      m_quantum(uint32_t(spec.Num("quantum", 300))),
      m_macPackets(uint32_t(spec.Num("mac_packets", 64))),
      m_weightUs(spec.Num("weight_us", 256)),
      m_macQueue(macQueue),
      m_queueType(qos ? WIFI_QOSDATA_UNICAST_QUEUE : WIFI_DATA_QUEUE),
      m_oneReceiver(oneReceiver),
      m_toMac(std::move(toMac))
{
}

Mac48Address
StationQueues::Key(const Mac48Address& receiver) const
{
    return m_oneReceiver ? Mac48Address() : receiver; // (a station's one queue: the zero address)
}

uint32_t
RadioQueueDisc::Backlog() const
{
    return m_disc->GetNPackets();
}

uint32_t
StationQueues::Backlog() const
{
    uint32_t frames = 0;
    for (const auto& [address, station] : m_stations)
    {
        frames += station.disc->GetNPackets();
    }
    return frames;
}

StationQueues::Station&
StationQueues::Get(const Mac48Address& dst)
{
    Mac48Address key = Key(dst);
    auto it = m_stations.find(key);
    if (it != m_stations.end())
    {
        return it->second;
    }
    Station& made = m_stations[key];
    ObjectFactory factory;
    factory.SetTypeId("ns3::FqCoDelQueueDisc");
    factory.Set("Flows", UintegerValue(m_flows));
    factory.Set("MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, m_limitPackets)));
    factory.Set("Target", StringValue(m_target));
    factory.Set("Interval", StringValue(m_interval));
    made.disc = factory.Create<QueueDisc>();
    DynamicCast<FqCoDelQueueDisc>(made.disc)->SetQuantum(m_quantum);
    std::map<uint32_t, uint64_t>* sojourn = &made.sojourn;
    made.disc->TraceConnectWithoutContext(
        "SojournTime",
        MakeBoundCallback(+[](std::map<uint32_t, uint64_t>* into, Time t) {
            (*into)[uint32_t(t.GetMicroSeconds() / 100)]++;
        }, sojourn));
    LedgerDrops(made.disc);
    made.disc->Initialize();
    made.base = made.disc->GetStats();
    return made;
}

uint32_t
StationQueues::InMac(const Mac48Address& station) const
{
    if (m_oneReceiver)
    {
        return m_macQueue->GetNPackets();
    }
    return m_macQueue->GetNPackets(WifiContainerQueueId(m_queueType, station, 0)); // (all our traffic is TID 0)
}

bool
StationQueues::Enqueue(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto)
{
    if (dst.IsGroup())
    {
        return m_toMac(p, src, dst, proto), true;
    }
    Station& station = Get(dst);
    Ptr<QbQueueDiscItem> item = Create<QbQueueDiscItem>(p, src, dst, proto);
    bool queued = station.disc->Enqueue(item);
    if (queued && !station.listed)
    {
        // a station that was idle starts with what it had left, as mac80211 keeps an idle
        // station's deficit (it earns nothing while it has no frames)
        station.listed = true;
        m_round.push_back(Key(dst));
    }
    Run();
    return queued;
}

void
StationQueues::Charge(Mac48Address receiver, double seconds)
{
    auto it = m_stations.find(Key(receiver));
    if (it != m_stations.end())
    {
        it->second.deficitUs -= seconds * 1e6;
        it->second.airtime += seconds;
    }
}

void
StationQueues::OnMacRoom()
{
    // called from inside the MAC (its acknowledgement and drop traces): hand it frames once
    // it has finished with the one that left
    if (!m_runScheduled)
    {
        m_runScheduled = true;
        Simulator::ScheduleNow(&StationQueues::Run, this);
    }
}

void
StationQueues::Run()
{
    m_runScheduled = false;
    if (m_running)
    {
        return;
    }
    m_running = true;
    // Deficit round robin over the stations with frames: the first one in turn whose deficit
    // is positive sends one frame; a spent one gets its weight and goes to the back. A station
    // whose MPDUs already fill its share of the MAC queue is passed over without earning.
    size_t blocked = 0;
    while (!m_round.empty() && blocked < m_round.size() && m_macQueue->GetNPackets() < m_macPackets)
    {
        Mac48Address address = m_round.front();
        Station& station = m_stations[address];
        if (station.disc->GetNPackets() == 0)
        {
            station.listed = false;
            m_round.pop_front();
            continue;
        }
        if (InMac(address) >= STATION_MPDUS)
        {
            m_round.pop_front();
            m_round.push_back(address);
            blocked++;
            continue;
        }
        if (station.deficitUs <= 0)
        {
            station.deficitUs += m_weightUs;
            station.turns++;
            m_round.pop_front();
            m_round.push_back(address);
            continue;
        }
        blocked = 0;
        Ptr<QueueDiscItem> item = station.disc->Dequeue(); // (CoDel may drop frames here)
        if (item)
        {
            Ptr<QbQueueDiscItem> frame = DynamicCast<QbQueueDiscItem>(item);
            m_toMac(frame->GetPacket(), frame->src, Mac48Address::ConvertFrom(frame->GetAddress()),
                    frame->GetProtocol());
        }
    }
    m_running = false;
}

void
StationQueues::ResetStats()
{
    for (auto& [address, station] : m_stations)
    {
        station.base = station.disc->GetStats();
        station.sojourn.clear();
        station.airtime = 0;
        station.turns = 0;
    }
}

std::string
StationQueues::Json()
{
    DiscCounts counts;
    for (auto& [address, station] : m_stations)
    {
        counts.Add(station.disc, station.base, station.sojourn);
    }
    std::ostringstream o;
    o << "{\"kind\": \"mac80211\", \"limit_packets\": " << m_limitPackets
      << ", \"mac_packets\": " << m_macPackets << ", \"weight_us\": " << Num(m_weightUs) << ", " << counts.Json()
      << "}";
    return o.str();
}

std::string
StationQueues::StationJson(const Mac48Address& address)
{
    auto it = m_stations.find(Key(address));
    if (it == m_stations.end())
    {
        return "";
    }
    Station& station = it->second;
    DiscCounts counts;
    counts.Add(station.disc, station.base, station.sojourn);
    std::ostringstream o;
    o << "{" << counts.Json() << ", \"airtime_s\": " << Num(station.airtime) << ", \"turns\": " << station.turns
      << "}";
    return o.str();
}

} // namespace qbchannel
