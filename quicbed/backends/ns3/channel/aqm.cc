// A radio's queue discipline (see aqm.h).

#include "aqm.h"

#include "ns3/fq-codel-queue-disc.h"
#include "ns3/hash.h"
#include "ns3/object-factory.h"
#include "ns3/queue-item.h"
#include "ns3/queue-size.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

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
        uint8_t ip[24] = {};
        if (GetProtocol() != PROTO_IPV4 || GetPacket()->CopyData(ip, sizeof(ip)) < 20)
        {
            return 0;
        }
        size_t headerLength = size_t(ip[0] & 0x0f) * 4;
        uint8_t tuple[17] = {};
        std::copy(ip + 12, ip + 20, tuple); // source and destination addresses
        tuple[8] = ip[9];                   // protocol
        uint8_t l4[4] = {};
        bool ports = (ip[9] == 6 || ip[9] == 17) && (ip[6] & 0x1f) == 0 && ip[7] == 0; // not a later fragment
        if (ports && GetPacket()->GetSize() >= headerLength + 4)
        {
            uint8_t head[64];
            uint32_t n = GetPacket()->CopyData(head, std::min<size_t>(sizeof(head), headerLength + 4));
            if (n >= headerLength + 4)
            {
                std::copy(head + headerLength, head + headerLength + 4, l4);
            }
        }
        std::copy(l4, l4 + 4, tuple + 9);
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
    const QueueDisc::Stats& now = m_disc->GetStats();
    std::map<std::string, uint32_t> reasons;
    uint32_t atEnqueue = Difference(now.nDroppedPacketsBeforeEnqueue, m_base.nDroppedPacketsBeforeEnqueue, reasons);
    uint32_t atDequeue = Difference(now.nDroppedPacketsAfterDequeue, m_base.nDroppedPacketsAfterDequeue, reasons);
    std::ostringstream o;
    o << "{\"kind\": " << Quote(m_kind) << ", \"limit_packets\": " << m_disc->GetMaxSize().GetValue()
      << ", \"enqueued\": " << now.nTotalEnqueuedPackets - m_base.nTotalEnqueuedPackets
      << ", \"drops\": {\"at_enqueue\": " << atEnqueue << ", \"at_dequeue\": " << atDequeue
      << ", \"reasons\": {";
    bool first = true;
    for (auto& [reason, count] : reasons)
    {
        o << (first ? "" : ", ") << Quote(reason) << ": " << count;
        first = false;
    }
    o << "}}, \"marks\": " << now.nTotalMarkedPackets - m_base.nTotalMarkedPackets
      << ", \"backlog_packets\": " << m_disc->GetNPackets()
      << ", \"sojourn_100us\": " << qbjson::Counts(m_sojourn) << "}";
    return o.str();
}

} // namespace qbchannel
