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
#include "ns3/wifi-mac-queue.h"
#include "ns3/packet.h"
#include "ns3/queue-disc.h"
#include "ns3/wifi-net-device.h"

#include <deque>
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
    /// frames it holds
    uint32_t Backlog() const;

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

/// Per-station queues in the style of Linux mac80211 (kind "mac80211"): each receiver has its
/// own FQ-CoDel (flows by 5-tuple), and the next frame for the MAC comes from the station an
/// airtime deficit round robin picks: a station may send while its deficit is positive, each
/// PSDU sent to it (retries included) charges its airtime, and a station whose deficit is
/// spent gets `weight_us` more and waits for its next turn (mac80211's DRR, weight 256 us).
/// The MAC queue is the driver's: it takes frames while it holds fewer than `mac_packets`
/// MPDUs in all (waiting or in flight until acknowledged; 64, one aggregate's worth), so a
/// station whose deficit is spent waits while another sends, and a station in turn fills the
/// room (its deficit is charged once its frames are on the air: mac80211's driver, too,
/// dequeues a whole aggregate from the station it was given). As mac80211 holds back a
/// station once the driver has enough of its airtime in flight (AQL), a station with a
/// block-ack window's worth (64 MPDUs) in the MAC queue is passed over when the MAC queue is
/// larger. Group frames skip the queues.
/// Differences from mac80211, by design: one queue limit per station rather than one shared
/// by all, airtime charged for frames sent only (mac80211 also charges a station's uplink
/// when the driver reports it), no slower CoDel for stations under 6 Mbit/s.
class StationQueues
{
  public:
    using ToMac = RadioQueueDisc::ToMac;

    /// spec: a radio's "queue" (kind mac80211: packets, target_ms, interval_ms, flows,
    /// quantum, mac_packets, weight_us); macQueue: the queue data frames go to; oneReceiver:
    /// a station's radio, whose frames all go to its AP whatever their destination (one queue).
    StationQueues(const Value& spec, Ptr<WifiMacQueue> macQueue, bool qos, bool oneReceiver, ToMac toMac);

    bool Enqueue(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto);
    /// frames it holds, over every station
    uint32_t Backlog() const;
    /// A data PSDU's airtime (s), charged to its receiver.
    void Charge(Mac48Address receiver, double seconds);
    /// An MPDU left the MAC queue (acknowledged or dropped): its station may be served again.
    void OnMacRoom();

    void ResetStats();
    /// As RadioQueueDisc::Json, over every station, with "weight_us" and "mac_packets".
    std::string Json();
    /// One station's {"enqueued", "drops", "backlog_packets", "sojourn_100us", "airtime_s",
    /// "turns"}, or "" for a receiver it never queued for.
    std::string StationJson(const Mac48Address& station);

  private:
    /// MPDUs of one station the MAC queue may hold (a block-ack window)
    static const uint32_t STATION_MPDUS = 64;

    struct Station
    {
        Ptr<QueueDisc> disc;
        QueueDisc::Stats base;
        std::map<uint32_t, uint64_t> sojourn; // 100 us buckets -> frames
        double deficitUs = 0;
        double airtime = 0;                   // charged since the last reset (s)
        uint64_t turns = 0;                   // times it was given `weight_us` more
        bool listed = false;                  // in the round robin
    };

    /// The queue of frames to dst: the receiver's own, or a station radio's only one.
    Station& Get(const Mac48Address& dst);
    Mac48Address Key(const Mac48Address& receiver) const;
    uint32_t InMac(const Mac48Address& station) const;
    void Run();

    std::string m_target, m_interval;
    uint32_t m_limitPackets, m_flows, m_quantum, m_macPackets;
    double m_weightUs;
    Ptr<WifiMacQueue> m_macQueue;
    WifiContainerQueueType m_queueType;
    bool m_oneReceiver;
    ToMac m_toMac;
    std::map<Mac48Address, Station> m_stations;
    std::deque<Mac48Address> m_round; // stations with frames, in turn
    bool m_running = false;
    bool m_runScheduled = false;
};

} // namespace qbchannel
