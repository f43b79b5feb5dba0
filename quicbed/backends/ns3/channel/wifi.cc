// Radios (see wifi.h), and QbApWifiMac, the AP MAC that BuildWifiPort selects by TypeId name.

#include "wifi.h"

#include "ledger.h"

#include "skim.h"

#include "ns3/ap-wifi-mac.h"
#include "ns3/boolean.h"
#include "ns3/delay-jitter-estimation.h"
#include "ns3/double.h"
#include "ns3/he-configuration.h"
#include "ns3/he-ru.h"
#include "ns3/ht-configuration.h"
#include "ns3/mgt-headers.h"
#include "ns3/obss-pd-algorithm.h"
#include "ns3/propagation-delay-model.h"
#include "ns3/propagation-loss-model.h"
#include "ns3/qos-txop.h"
#include "ns3/spectrum-wifi-helper.h"
#include "ns3/ssid.h"
#include "ns3/sta-wifi-mac.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"
#include "ns3/wifi-helper.h"
#include "ns3/wifi-mac-helper.h"
#include "ns3/wifi-psdu.h"
#include "ns3/yans-wifi-helper.h"

namespace qbchannel
{

namespace
{

/// ns-3 3.37's AP forwards every subframe of an uplink A-MSDU back into the BSS, even when
/// its destination is behind the AP (the DS): with A-MSDU on, a station's packets to the
/// wired side were lost. This AP delivers such subframes up to the bridge instead.
class QbApWifiMac : public ApWifiMac
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::QbApWifiMac")
                                .SetParent<ApWifiMac>()
                                .SetGroupName("Quicbed")
                                .AddConstructor<QbApWifiMac>();
        return tid;
    }

  protected:
    void DeaggregateAmsduAndForward(Ptr<const WifiMpdu> mpdu) override
    {
        for (auto& i : *PeekPointer(mpdu))
        {
            Mac48Address from = i.second.GetSourceAddr();
            Mac48Address to = i.second.GetDestinationAddr();
            bool inBss = to.IsGroup() || GetWifiRemoteStationManager()->IsAssociated(to);
            if (to != GetAddress() && inBss)
            {
                Enqueue(i.first->Copy(), to, from); // (the TID falls back to 0, as for all our traffic)
            }
            if (to == GetAddress() || !inBss || to.IsGroup())
            {
                ForwardUp(i.first, from, to);
            }
        }
    }
};

NS_OBJECT_ENSURE_REGISTERED(QbApWifiMac);

} // namespace

void
WifiPort::OnObssPdReset(uint8_t /*bssColor*/,
                        double /*rssiDbm*/,
                        bool /*powerRestricted*/,
                        double /*txPowerMaxSiso*/,
                        double /*txPowerMaxMimo*/)
{
    obssPdResets++;
}

void
WifiPort::ResetStats()
{
    data = TxCounters();
    perReceiver.clear();
    airData = airCtrl = airMgmt = 0;
    ctrlFrames = mgmtFrames = 0;
    dropQueue = dropRetry = dropLifetime = dropOld = txDrop = 0;
    rxUp = 0;
    dataRateMax = 0;
    dataStreamsMax = 0;
    muPpdus = muPsdus = 0;
    obssPdResets = 0;
    ulMuPpdus = ulMuDataPsdus = triggerFrames = 0;
    if (auto skimming = DynamicCast<QbYansWifiPhy>(phy))
    {
        skimBase = skimming->counters;
    }
    frameErrorBase = frameErrors ? frameErrors->drops : 0;
    if (disc)
    {
        disc->ResetStats();
    }
    if (stations)
    {
        stations->ResetStats();
    }
}

void
WifiPort::OnPsduBegin(WifiConstPsduMap psdus, WifiTxVector txVector, double /*powerW*/)
{
    double duration = WifiPhy::CalculateTxDuration(psdus, txVector, band).GetSeconds();
    bool multiUser = txVector.IsDlMu();
    bool uplinkMu = txVector.IsUlMu(); // an HE TB PPDU: this station's part of an uplink MU PPDU
    ulMuPpdus += uplinkMu;
    triggerFrames += psdus.begin()->second->GetHeader(0).IsTrigger();
    bool counted = false;
    for (auto& [staId, psdu] : psdus)
    {
        const WifiMacHeader& first = psdu->GetHeader(0);
        if (first.IsData() && first.HasData())
        {
            uint32_t retries = 0;
            for (size_t i = 0; i < psdu->GetNMpdus(); i++)
            {
                retries += psdu->GetHeader(i).IsRetry();
            }
            uint32_t n = psdu->GetNMpdus();
            // a receiver of a DL MU PPDU (OFDMA) holds its resource unit's share of the channel
            // (and a sender of an HE TB PPDU its own)
            double share = multiUser || uplinkMu ? double(HeRu::GetBandwidth(txVector.GetRu(staId).GetRuType())) /
                                                       txVector.GetChannelWidth()
                                                 : 1.0;
            data.Add(n, psdu->GetSize(), retries, duration * share);
            perReceiver[psdu->GetAddr1()].Add(n, psdu->GetSize(), retries, duration * share);
            if (!counted)
            {
                airData += uplinkMu ? duration * share : duration; // the stations of a TB PPDU share it
                counted = true;
            }
            if (stations)
            {
                stations->Charge(psdu->GetAddr1(), duration * share);
            }
            dataRateMax = std::max(dataRateMax, txVector.GetMode(staId).GetDataRate(txVector, staId));
            dataStreamsMax = std::max(dataStreamsMax, int(txVector.GetNss(staId)));
            ulMuDataPsdus += uplinkMu;
            if (multiUser)
            {
                muPsdus++;
                continue; // every PSDU of an MU PPDU
            }
        }
        else if (first.IsCtl())
        {
            ctrlFrames++;
            airCtrl += duration;
        }
        else
        {
            mgmtFrames++;
            airMgmt += duration;
        }
        break; // SU PPDUs have one PSDU; MU PPDUs other than downlink data are counted once
    }
    muPpdus += multiUser && counted;
}

void
WifiPort::OnDropped(WifiMacDropReason reason, Ptr<const WifiMpdu> mpdu)
{
    if (stations)
    {
        stations->OnMacRoom();
    }
    switch (reason)
    {
    case WIFI_MAC_DROP_FAILED_ENQUEUE:
        dropQueue++;
        g_ledger.Dropped(mpdu, "mac_queue_full");
        break;
    case WIFI_MAC_DROP_EXPIRED_LIFETIME:
        dropLifetime++;
        g_ledger.Dropped(mpdu, "mac_lifetime");
        break;
    case WIFI_MAC_DROP_REACHED_RETRY_LIMIT:
        dropRetry++;
        g_ledger.Dropped(mpdu, "mac_retry_limit");
        break;
    case WIFI_MAC_DROP_QOS_OLD_PACKET:
        dropOld++;
        g_ledger.Dropped(mpdu, "mac_old_packet");
        break;
    default:
        dropOld++;
        g_ledger.Dropped(mpdu, "mac_other");
    }
}

uint32_t
WifiPort::Held() const
{
    return (queue ? queue->GetNPackets() : 0) + (disc ? disc->Backlog() : 0) + (stations ? stations->Backlog() : 0);
}

void
WifiPort::OnTxDrop(Ptr<const Packet> packet)
{
    txDrop++;
    g_ledger.Dropped(packet, 0, Framing::LLC, "mac_not_associated");
}

void
WifiPort::OnAcked(Ptr<const WifiMpdu> mpdu)
{
    if (stations)
    {
        stations->OnMacRoom();
    }
    if (mpdu->GetHeader().IsAction())
    {
        WifiActionHeader action;
        mpdu->GetPacket()->PeekHeader(action);
        if (action.GetCategory() == WifiActionHeader::BLOCK_ACK &&
            action.GetAction().blockAck == WifiActionHeader::BLOCK_ACK_ADDBA_RESPONSE)
        {
            answeredAddba.insert(mpdu->GetHeader().GetAddr1());
        }
        return;
    }
    if (!mpdu->GetHeader().IsData())
    {
        return;
    }
    g_ledger.Reached(mpdu, FrameLedger::ACKED);
    // Enqueue stamped the packet (an MPDU's own expiry time is only readable while queued)
    DelayJitterEstimation stamp;
    stamp.RecordRx(mpdu->GetPacket());
    int64_t us = stamp.GetLastDelay().GetMicroSeconds();
    if (us > 0)
    {
        data.AddDelay(us);
        perReceiver[mpdu->GetHeader().GetAddr1()].AddDelay(us);
    }
}

void
WifiPort::SendRaw(Ptr<Packet> p, Mac48Address dst, uint16_t proto)
{
    dev->Send(p, dst, proto);
}

bool
WifiPort::Enqueue(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto)
{
    if (!disc && !stations && queue && queue->GetNPackets() >= queue->GetMaxSize().GetValue())
    {
        dropQueue++;
        g_ledger.Dropped(p, proto, Framing::IP, "radio_queue_full");
        return false;
    }
    g_ledger.Queued(p, proto, Framing::IP, this);
    p->RemoveAllByteTags(); // a relayed packet's stamp from its previous hop
    DelayJitterEstimation::PrepareTx(p); // (so the MAC delay includes the discipline's)
    if (stations)
    {
        return stations->Enqueue(p, src, dst, proto);
    }
    return disc ? disc->Enqueue(p, src, dst, proto) : ToMac(p, src, dst, proto);
}

bool
WifiPort::ToMac(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto)
{
    return role == "ap" ? dev->SendFrom(p, src, dst, proto) : dev->Send(p, dst, proto);
}

Ptr<PropagationLossModel>
WifiChannels::LossModel(const std::string& band) const
{
    const Value& props = m_config["propagation"];
    std::string model = props.Str("model", "log_distance");
    const Value& byBand = props["reference_loss_db"];
    double refLoss = byBand.kind == Value::OBJECT ? byBand.Num(band, 46.6777) : 46.6777;
    if (model == "log_distance")
    {
        Ptr<LogDistancePropagationLossModel> loss = CreateObject<LogDistancePropagationLossModel>();
        loss->SetPathLossExponent(props.Num("exponent", 3.0));
        loss->SetReference(1.0, refLoss);
        return loss;
    }
    if (model == "fixed_rss")
    {
        Ptr<FixedRssLossModel> loss = CreateObject<FixedRssLossModel>();
        loss->SetRss(props.Num("rss_dbm", -50));
        return loss;
    }
    if (model == "friis")
    {
        Ptr<FriisPropagationLossModel> loss = CreateObject<FriisPropagationLossModel>();
        loss->SetFrequency(band == "2.4GHz" ? 2.437e9 : band == "6GHz" ? 6.525e9 : 5.25e9); // mid-band
        return loss;
    }
    Die("unknown propagation model " + model);
    return nullptr;
}

Ptr<YansWifiChannel>
WifiChannels::Get(const std::string& band)
{
    auto it = m_channels.find(band);
    if (it != m_channels.end())
    {
        return it->second;
    }
    Ptr<YansWifiChannel> channel = CreateObject<YansWifiChannel>();
    channel->SetPropagationDelayModel(CreateObject<ConstantSpeedPropagationDelayModel>());
    channel->SetPropagationLossModel(LossModel(band));
    m_channels[band] = channel;
    return channel;
}

Ptr<MultiModelSpectrumChannel>
WifiChannels::GetSpectrum(const std::string& band)
{
    auto it = m_spectrumChannels.find(band);
    if (it != m_spectrumChannels.end())
    {
        return it->second;
    }
    Ptr<MultiModelSpectrumChannel> channel = CreateObject<MultiModelSpectrumChannel>();
    channel->SetPropagationDelayModel(CreateObject<ConstantSpeedPropagationDelayModel>());
    channel->AddPropagationLossModel(LossModel(band));
    m_spectrumChannels[band] = channel;
    return channel;
}

bool
WifiChannels::IsSpectrum(const std::string& band) const
{
    for (const auto& listed : m_config["spectrum_bands"].Arr())
    {
        if (listed.AsStr() == band)
        {
            return true;
        }
    }
    return false;
}

static std::string
ModeName(const std::string& standard, const std::string& band, int mcs)
{
    if (standard == "802.11n")
    {
        return "HtMcs" + std::to_string(mcs);
    }
    if (standard == "802.11ax")
    {
        return "HeMcs" + std::to_string(mcs);
    }
    if (standard == "802.11ac")
    {
        return "VhtMcs" + std::to_string(mcs);
    }
    if (standard == "802.11g" || (standard != "802.11a" && band == "2.4GHz"))
    {
        return "ErpOfdmRate54Mbps";
    }
    return "OfdmRate54Mbps";
}

std::unique_ptr<WifiPort>
BuildWifiPort(Ptr<Node> node,
              const std::string& nodeName,
              const Value& spec,
              WifiChannels& channels)
{
    auto port = std::make_unique<WifiPort>();
    port->id = spec.At("id").AsStr();
    port->node = nodeName;
    port->role = spec.At("role").AsStr();
    std::string standard = spec.Str("standard", "802.11n");
    std::string band = spec.Str("band", "5GHz");
    int width = int(spec.Num("width", 20));
    int number = int(spec.At("ns3_channel").AsNum());
    int primary20 = int(spec.Num("primary20", 0));
    port->channelNumber = int(spec.Num("channel", number));
    bool ht = standard == "802.11n" || standard == "802.11ac" || standard == "802.11ax";
    bool he = standard == "802.11ax";
    port->band = band == "2.4GHz" ? WIFI_PHY_BAND_2_4GHZ : band == "6GHz" ? WIFI_PHY_BAND_6GHZ : WIFI_PHY_BAND_5GHZ;

    WifiHelper wifi;
    if (standard == "802.11n")
    {
        wifi.SetStandard(WIFI_STANDARD_80211n);
    }
    else if (standard == "802.11ac")
    {
        wifi.SetStandard(WIFI_STANDARD_80211ac);
    }
    else if (he)
    {
        wifi.SetStandard(WIFI_STANDARD_80211ax);
    }
    else if (standard == "802.11g")
    {
        wifi.SetStandard(WIFI_STANDARD_80211g);
    }
    else if (standard == "802.11a")
    {
        wifi.SetStandard(WIFI_STANDARD_80211a);
    }
    else
    {
        Die("unknown standard " + standard);
    }
    int mcs = int(spec.Num("mcs", 7));
    // antennas and streams of this radio (802.11n's MCS index names its streams: checked in
    // quicbed.spec.link); a VHT sender uses as many as the receiver supports
    int nss = ht ? int(spec.Num("spatial_streams", 1)) : 1;
    std::string rateControl = spec.Str("rate_control", "constant");
    if (rateControl == "minstrel")
    {
        if (he)
        {
            Die("ns-3's Minstrel has no HE rates: give 802.11ax radios a constant MCS");
        }
        wifi.SetRemoteStationManager(ht ? "ns3::MinstrelHtWifiManager" : "ns3::MinstrelWifiManager");
    }
    else
    {
        if (standard == "802.11n" && nss != mcs / 8 + 1)
        {
            Die("802.11n MCS " + std::to_string(mcs) + " has " + std::to_string(mcs / 8 + 1) +
                " spatial stream(s), not " + std::to_string(nss));
        }
        std::string control = band == "2.4GHz" ? "ErpOfdmRate6Mbps" : "OfdmRate6Mbps";
        wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager",
                                     "DataMode",
                                     StringValue(ModeName(standard, band, mcs)),
                                     "ControlMode",
                                     StringValue(control));
    }
    if (spec.Has("obss_pd_dbm"))
    {
        // spatial reuse: PPDUs of another BSS colour heard below the level are ignored
        wifi.SetObssPdAlgorithm("ns3::ConstantObssPdAlgorithm",
                                "ObssPdLevel",
                                DoubleValue(spec.Num("obss_pd_dbm", -82)));
    }
    QbYansWifiPhyHelper yans;
    SpectrumWifiPhyHelper spectrum;
    bool onSpectrum = channels.IsSpectrum(band);
    WifiPhyHelper& phy = onSpectrum ? static_cast<WifiPhyHelper&>(spectrum) : yans;
    if (onSpectrum)
    {
        spectrum.SetChannel(channels.GetSpectrum(band));
    }
    else
    {
        yans.SetChannel(channels.Get(band));
        yans.Set("SkimOthers", BooleanValue(spec.Bool("skim_receivers", true)));
    }
    std::ostringstream settings;
    settings << "{" << number << ", " << width << ", "
             << (band == "2.4GHz" ? "BAND_2_4GHZ" : band == "6GHz" ? "BAND_6GHZ" : "BAND_5GHZ") << ", " << primary20
             << "}";
    phy.Set("ChannelSettings", StringValue(settings.str()));
    double power = spec.Num("tx_power_dbm", 16.0206);
    phy.Set("TxPowerStart", DoubleValue(power));
    phy.Set("TxPowerEnd", DoubleValue(power));
    if (nss > 1)
    {
        phy.Set("Antennas", UintegerValue(nss));
        phy.Set("MaxSupportedTxSpatialStreams", UintegerValue(nss));
        phy.Set("MaxSupportedRxSpatialStreams", UintegerValue(nss));
    }

    WifiMacHelper mac;
    uint32_t ampdu = uint32_t(spec.Num("ampdu_max_bytes", 65535));
    uint32_t amsdu = uint32_t(spec.Num("amsdu_max_bytes", 0));
    Ssid ssid(spec.Str("ssid", "quicbed"));
    if (port->role == "ap" && spec.Bool("ofdma", false))
    {
        // uplink OFDMA when asked: after a downlink MU PPDU the AP triggers its stations' HE TB
        // PPDUs (TCP's ACKs); otherwise the uplink stays single-user
        mac.SetMultiUserScheduler("ns3::RrMultiUserScheduler",
                                  "EnableUlOfdma",
                                  BooleanValue(spec.Bool("ofdma_uplink", false)));
    }
    if (port->role == "ap")
    {
        mac.SetType("ns3::QbApWifiMac",
                    "Ssid",
                    SsidValue(ssid),
                    "BE_MaxAmpduSize",
                    UintegerValue(ampdu),
                    "BE_MaxAmsduSize",
                    UintegerValue(amsdu));
    }
    else if (port->role == "sta")
    {
        mac.SetType("ns3::StaWifiMac",
                    "Ssid",
                    SsidValue(ssid),
                    "BE_MaxAmpduSize",
                    UintegerValue(ampdu),
                    "BE_MaxAmsduSize",
                    UintegerValue(amsdu));
    }
    else if (port->role == "adhoc")
    {
        mac.SetType("ns3::AdhocWifiMac",
                    "BE_MaxAmpduSize",
                    UintegerValue(ampdu),
                    "BE_MaxAmsduSize",
                    UintegerValue(amsdu));
    }
    else
    {
        Die("unknown radio role " + port->role);
    }
    NetDeviceContainer devices = wifi.Install(phy, mac, node);
    port->dev = DynamicCast<WifiNetDevice>(devices.Get(0));
    port->phy = port->dev->GetPhy();
    port->mac = port->dev->GetMac();
    port->addr = Mac48Address::ConvertFrom(port->dev->GetAddress());
    port->qos = ht;
    port->needsBa = ht && (ampdu > 0 || standard == "802.11ac");
    port->baForOneFrame = standard == "802.11ac" || he;
    int guardNs = int(spec.Num("guard_interval_ns", 800));
    if (he)
    {
        Ptr<HeConfiguration> heConfig = port->dev->GetHeConfiguration();
        heConfig->SetGuardInterval(NanoSeconds(guardNs));
        heConfig->SetMpduBufferSize(256); // HE's block-ack window: up to 256 MPDUs per A-MPDU
        if (port->role == "ap" && spec.Has("bss_color"))
        {
            heConfig->SetAttribute("BssColor", UintegerValue(uint32_t(spec.Num("bss_color", 0))));
        }
        if (auto obssPd = port->dev->GetObject<ObssPdAlgorithm>())
        {
            obssPd->TraceConnectWithoutContext("Reset", MakeCallback(&WifiPort::OnObssPdReset, port.get()));
        }
    }
    if (ht)
    {
        port->dev->GetHtConfiguration()->SetShortGuardIntervalSupported(guardNs == 400);
        Ptr<QosTxop> be = port->mac->GetQosTxop(AC_BE);
        port->queue = be->GetWifiMacQueue();
        be->GetWifiMacQueue()->SetMaxSize(
            QueueSize(QueueSizeUnit::PACKETS, uint32_t(spec.Num("queue_packets", 500))));
        if (spec.Has("queue_max_delay_ms"))
        {
            be->GetWifiMacQueue()->SetAttribute(
                "MaxDelay",
                TimeValue(MilliSeconds(spec.At("queue_max_delay_ms").AsNum())));
        }
    }
    else
    {
        port->queue = port->mac->GetTxop()->GetWifiMacQueue();
        port->queue->SetMaxSize(
            QueueSize(QueueSizeUnit::PACKETS, uint32_t(spec.Num("queue_packets", 500))));
    }
    const Value& discipline = spec["queue"];
    if (discipline.kind == Value::OBJECT && discipline.Str("kind", "") == "mac80211")
    {
        // the per-station queues bound each station's MPDUs in the MAC queue themselves: it
        // holds every station's share
        size_t receivers = std::max<size_t>(1, spec["peers"].Arr().size());
        port->queue->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS,
                                          uint32_t(discipline.Num("mac_packets", 64) * receivers + 64)));
        WifiPort* radio = port.get();
        port->stations = std::make_unique<StationQueues>(
            discipline, port->queue, port->qos, port->role == "sta",
            [radio](Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto) {
                radio->ToMac(p, src, dst, proto);
            });
    }
    else if (discipline.kind == Value::OBJECT)
    {
        // the MAC queue (queue_packets) is then the driver's, the discipline's limit its own
        WifiPort* radio = port.get();
        port->disc = std::make_unique<RadioQueueDisc>(
            discipline, port->dev, 0, // AC_BE's transmit queue, or the only one
            [radio](Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto) {
                radio->ToMac(p, src, dst, proto);
            });
    }
    if (port->role == "adhoc")
    {
        // An AP advertises the mandatory rates as its basic rate set; do the same for the
        // ad-hoc radios so that control responses (block ACKs) use the same rates.
        Ptr<WifiRemoteStationManager> manager = port->dev->GetRemoteStationManager();
        for (const auto& mode : port->phy->GetModeList())
        {
            if (mode.IsMandatory() && mode.GetModulationClass() != WIFI_MOD_CLASS_DSSS &&
                mode.GetModulationClass() != WIFI_MOD_CLASS_HR_DSSS)
            {
                manager->AddBasicMode(mode);
            }
        }
    }
    for (const auto& peer : spec["peers"].Arr())
    {
        port->peerIds.push_back(peer.AsStr());
    }
    const Value& errors = spec["frame_error"];
    if (errors.kind == Value::OBJECT)
    {
        for (auto& [peerId, rate] : errors.o)
        {
            port->frameErrorById[peerId] = rate.AsNum();
        }
    }
    port->phy->TraceConnectWithoutContext("PhyTxPsduBegin",
                                          MakeCallback(&WifiPort::OnPsduBegin, port.get()));
    port->mac->TraceConnectWithoutContext("DroppedMpdu",
                                          MakeCallback(&WifiPort::OnDropped, port.get()));
    port->mac->TraceConnectWithoutContext("MacTxDrop", MakeCallback(&WifiPort::OnTxDrop, port.get()));
    port->mac->TraceConnectWithoutContext("AckedMpdu", MakeCallback(&WifiPort::OnAcked, port.get()));
    if (auto sta = DynamicCast<StaWifiMac>(port->mac))
    {
        Mac48Address self = port->addr;
        sta->TraceConnectWithoutContext(
            "DeAssoc",
            MakeBoundCallback(+[](Mac48Address station, Mac48Address /*ap*/) { g_ledger.StationLeft(station); },
                              self));
        // a station that lost its AP (ten missed beacons) still acknowledges data frames, and
        // its MAC then drops them as not associated: counted
        StaWifiMac* raw = PeekPointer(sta);
        sta->TraceConnectWithoutContext(
            "MacRxDrop",
            MakeBoundCallback(+[](StaWifiMac* mac, Ptr<const Packet> packet) {
                if (!mac->IsAssociated())
                {
                    g_ledger.Dropped(packet, 0, Framing::LLC, "mac_rx_not_associated");
                }
            }, raw));
    }
    return port;
}

} // namespace qbchannel
