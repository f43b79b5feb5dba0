// Radios: WifiPort (one radio's devices, statistics and transmit path), WifiChannels (the
// channel of each band) and BuildWifiPort, which makes a radio from its spec.
#pragma once

#include "aqm.h"
#include "common.h"
#include "lag.h"
#include "ledger.h"
#include "loss.h"
#include "skim.h"

#include "ns3/mac48-address.h"
#include "ns3/multi-model-spectrum-channel.h"
#include "ns3/node.h"
#include "ns3/packet.h"
#include "ns3/propagation-loss-model.h"
#include "ns3/wifi-mac-queue.h"
#include "ns3/wifi-mac.h"
#include "ns3/wifi-net-device.h"
#include "ns3/wifi-phy.h"
#include "ns3/yans-wifi-channel.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace qbchannel
{

/// A radio; it holds frames in its queue discipline (or per-station queues) and MAC queue.
struct WifiPort : public FrameHolder
{
    std::string id;
    std::string node;
    std::string role; // ap, sta, adhoc
    int channelNumber = 0;
    Ptr<WifiNetDevice> dev;
    Ptr<WifiPhy> phy;
    Ptr<WifiMac> mac;
    Mac48Address addr;
    WifiPhyBand band = WIFI_PHY_BAND_5GHZ;
    bool qos = false;
    bool needsBa = false;
    /// VHT or HE: ns-3 sets up a block-ack agreement for a single queued frame (HT: two)
    bool baForOneFrame = false;
    /// peers whose ADDBA requests this radio answered and saw acknowledged: only then is its
    /// recipient agreement established (ns-3 keeps it pending until that ACK)
    std::set<Mac48Address> answeredAddba;
    std::vector<std::string> peerIds;
    std::vector<Mac48Address> peers;
    Ptr<QbFrameErrorModel> frameErrors;
    std::map<std::string, double> frameErrorById;

    // statistics
    TxCounters data;
    std::map<Mac48Address, TxCounters> perReceiver;
    double airData = 0, airCtrl = 0, airMgmt = 0;
    uint64_t ctrlFrames = 0, mgmtFrames = 0;
    uint64_t dropQueue = 0, dropRetry = 0, dropLifetime = 0, dropOld = 0, txDrop = 0;
    uint64_t rxUp = 0;
    /// told of every frame a station radio delivers to its namespace (motion.h), or empty
    std::function<void(uint32_t)> delivered;
    uint64_t frameErrorBase = 0;
    uint64_t dataRateMax = 0; // bit/s, the fastest data PPDU sent
    int dataStreamsMax = 0;   // and the most spatial streams one used
    uint64_t muPpdus = 0, muPsdus = 0; // downlink OFDMA PPDUs, and the PSDUs (receivers) they carried
    uint64_t obssPdResets = 0; // PPDUs of another BSS colour ignored by spatial reuse (OBSS-PD)
    uint64_t ulMuPpdus = 0;    // HE TB PPDUs sent (a station's part of an uplink OFDMA PPDU)
    uint64_t ulMuDataPsdus = 0; // ... that carried data (the others: QoS Null, buffer status reports)
    uint64_t triggerFrames = 0; // Trigger frames sent (an AP soliciting uplink OFDMA)
    SkimCounters skimBase; // the PHY's counts (skim.h) at the last reset

    void ResetStats();
    uint32_t Held() const override;
    void OnPsduBegin(WifiConstPsduMap psdus, WifiTxVector txVector, double /*powerW*/);
    void OnDropped(WifiMacDropReason reason, Ptr<const WifiMpdu> /*mpdu*/);
    void OnTxDrop(Ptr<const Packet>);
    void OnObssPdReset(uint8_t bssColor,
                       double rssiDbm,
                       bool powerRestricted,
                       double txPowerMaxSiso,
                       double txPowerMaxMimo);
    /// A data MPDU the receiver's MAC acknowledged: its time since Enqueue took it.
    void OnAcked(Ptr<const WifiMpdu> mpdu);
    void SendRaw(Ptr<Packet> p, Mac48Address dst, uint16_t proto);

    Ptr<WifiMacQueue> queue; // the queue data frames go to (AC_BE, or the DCF queue)
    std::unique_ptr<RadioQueueDisc> disc; // in front of it (aqm.h), or none: frames go straight in
    std::unique_ptr<StationQueues> stations; // or per-station queues with airtime fairness (aqm.h)

    /// Hand a frame to the MAC; false when its queue is full. ns-3 3.37's queue scheduler drops
    /// the newest MPDU of a full queue without a trace, so queue overflow is detected (and
    /// counted) here.
    bool Enqueue(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto);
    /// The MAC's own send (from src at an AP).
    bool ToMac(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto);
};

/// The channel of each band (Yans, or spectrum where OFDMA needs it), made on first use from
/// the configuration's "propagation" settings.
class WifiChannels
{
  public:
    explicit WifiChannels(const Value& config)
        : m_config(config)
    {
    }

    Ptr<YansWifiChannel> Get(const std::string& band);
    /// The band's spectrum channel, for bands with OFDMA: ns-3 receives the resource units of
    /// a multi-user PPDU only on a SpectrumWifiPhy (every radio of the band then uses one)
    Ptr<MultiModelSpectrumChannel> GetSpectrum(const std::string& band);
    bool IsSpectrum(const std::string& band) const;

  private:
    Ptr<PropagationLossModel> LossModel(const std::string& band) const;

    const Value& m_config;
    std::map<std::string, Ptr<YansWifiChannel>> m_channels; // band -> channel
    std::map<std::string, Ptr<MultiModelSpectrumChannel>> m_spectrumChannels;
};

/// One radio of node nodeName from its spec (a "wifi" port), on the channel of its band.
std::unique_ptr<WifiPort> BuildWifiPort(Ptr<Node> node,
                                        const std::string& nodeName,
                                        const Value& spec,
                                        WifiChannels& channels);

} // namespace qbchannel
