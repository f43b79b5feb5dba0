// A radio's queue discipline: ns-3's CoDel or FQ-CoDel in front of its MAC queue, as a Linux
// access point's qdisc (or mac80211's per-station FQ-CoDel queues) sits in front of a driver's
// small hardware queue. The device's flow control (WifiHelper's NetDeviceQueueInterface,
// stopped when the MAC queue is full and woken when an MPDU leaves it) pulls frames from the
// discipline, so the MAC queue holds only what the driver would and the standing queue, where
// the discipline acts, is in front of it. Without one (kind "fifo") frames go straight to the
// MAC queue, as before.
#pragma once

#include "common.h"

#include "ns3/mac48-address.h"
#include "ns3/net-device-queue-interface.h"
#include "ns3/packet.h"
#include "ns3/queue-disc.h"
#include "ns3/wifi-net-device.h"

#include <functional>
#include <map>
#include <string>

namespace qbchannel
{

class RadioQueueDisc
{
  public:
    /// Hands a frame the discipline released to the radio's MAC (src matters at an AP).
    using ToMac = std::function<void(Ptr<Packet>, Mac48Address src, Mac48Address dst, uint16_t proto)>;

    /// The discipline of spec (a radio's "queue": kind codel or fq_codel, packets, target_ms,
    /// interval_ms, flows, quantum) in front of dev's transmit queue txIndex.
    RadioQueueDisc(const Value& spec, Ptr<WifiNetDevice> dev, size_t txIndex, ToMac toMac);

    /// Queue a frame; false when the discipline refused it (over its limit).
    bool Enqueue(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto);

    void ResetStats();
    /// {"kind", "limit_packets", "enqueued", "drops": {"overlimit", "aqm"}, "marks",
    ///  "backlog_packets", "sojourn_100us": {bucket: count}}
    std::string Json();

  private:
    void OnSojourn(Time sojourn);

    std::string m_kind;
    size_t m_txIndex;
    Ptr<QueueDisc> m_disc;
    ToMac m_toMac;
    QueueDisc::Stats m_base;
    std::map<uint32_t, uint64_t> m_sojourn; // 100 us buckets -> frames
};

} // namespace qbchannel
