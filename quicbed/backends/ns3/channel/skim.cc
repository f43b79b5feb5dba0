// Radios that skim PSDUs addressed to others (see skim.h).

#include "skim.h"

#include "ns3/boolean.h"
#include "ns3/frame-exchange-manager.h"
#include "ns3/interference-helper.h"
#include "ns3/simulator.h"
#include "ns3/wifi-mac.h"
#include "ns3/wifi-net-device.h"
#include "ns3/wifi-ppdu.h"
#include "ns3/wifi-psdu.h"

namespace qbchannel
{

template <class Base>
bool
SkimmingPhyEntity<Base>::Ours(Ptr<const WifiPsdu> psdu)
{
    if (!m_selfKnown) // the MAC exists only once the device is built: asked at the first PSDU
    {
        // the address the MAC filters on
        m_self = this->m_wifiPhy->GetDevice()->GetMac()->GetFrameExchangeManager()->GetAddress();
        m_selfKnown = true;
    }
    Mac48Address to = psdu->GetHeader(0).GetAddr1(); // every MPDU of a PSDU has the same
    return to.IsGroup() || to == m_self;
}

template <class Base>
Time
SkimmingPhyEntity<Base>::DoStartReceivePayload(Ptr<Event> event)
{
    Ptr<const WifiPpdu> ppdu = event->GetPpdu();
    Ptr<const WifiPsdu> psdu = this->GetAddressedPsduInPpdu(ppdu);
    if (!psdu || Ours(psdu))
    {
        m_counters->received++;
        return Base::DoStartReceivePayload(event);
    }
    m_counters->skimmed++;
    // what ns-3's DoStartReceivePayload does, less the event at the end of each MPDU
    auto key = std::make_pair(ppdu->GetUid(), this->GetStaId(ppdu));
    this->m_signalNoiseMap.insert({key, SignalNoiseDbm()});
    this->m_statusPerMpduMap.insert({key, std::vector<bool>()});
    const WifiTxVector& txVector = event->GetTxVector();
    Time payload = ppdu->GetTxDuration() - this->CalculatePhyPreambleAndHeaderDuration(txVector);
    this->NotifyPayloadBegin(txVector, payload);
    // kept where ns-3 keeps its end of payload: an aborted reception cancels it
    this->m_endRxPayloadEvents.push_back(
        Simulator::Schedule(payload, &SkimmingPhyEntity::EndSkimmedPayload, this, event));
    return payload;
}

template <class Base>
void
SkimmingPhyEntity<Base>::EndSkimmedPayload(Ptr<Event> event)
{
    Ptr<const WifiPpdu> ppdu = event->GetPpdu();
    Ptr<const WifiPsdu> psdu = this->GetAddressedPsduInPpdu(ppdu);
    const WifiTxVector& txVector = event->GetTxVector();
    uint16_t staId = this->GetStaId(ppdu);
    auto key = std::make_pair(ppdu->GetUid(), staId);
    std::vector<bool>& status = this->m_statusPerMpduMap.at(key);
    SignalNoiseDbm& signalNoise = this->m_signalNoiseMap.at(key);

    // Each MPDU over the time its symbols took, as ns-3 splits the payload: the A-MPDU's
    // running size and symbol count decide where one subframe ends (the last one takes what
    // padding is left when it is shorter than a guard interval).
    size_t count = psdu->GetNMpdus();
    Time left = ppdu->GetTxDuration() - this->CalculatePhyPreambleAndHeaderDuration(txVector);
    Time start = Seconds(0);
    uint32_t ampduBytes = 0;
    double ampduSymbols = 0;
    size_t index = 0;
    bool received = false;
    for (auto mpdu = psdu->begin(); mpdu != psdu->end() && index < count; ++mpdu, ++index)
    {
        if (received && !m_counters->judgeEveryMpdu)
        {
            this->GetRandomValue(); // the draw ns-3 would make against this MPDU's error rate
            status.push_back(false); // not judged: the MAC does not look at it (see skim.h)
            m_counters->mpdusDrawn++;
            continue;
        }
        MpduType type = count == 1                ? (psdu->IsSingle() ? SINGLE_MPDU : NORMAL_MPDU)
                        : index == 0             ? FIRST_MPDU_IN_AGGREGATE
                        : index + 1 == count     ? LAST_MPDU_IN_AGGREGATE
                                                 : MIDDLE_MPDU_IN_AGGREGATE;
        uint32_t bytes = type == NORMAL_MPDU ? psdu->GetSize() : psdu->GetAmpduSubframeSize(index);
        Time duration = WifiPhy::GetPayloadDuration(bytes, txVector, this->m_wifiPhy->GetPhyBand(), type, true,
                                                    ampduBytes, ampduSymbols, staId);
        left -= duration;
        if (index + 1 == count && !left.IsZero() && left < NanoSeconds(txVector.GetGuardInterval()))
        {
            duration += left;
        }
        // one MPDU as a PSDU of its own, as ns-3 judges it (a post-reception error model sees it alone)
        auto judged = this->GetReceptionStatus(Create<WifiPsdu>(*mpdu, false), event, staId, start, duration);
        signalNoise = judged.second;
        status.push_back(judged.first);
        received = received || judged.first;
        m_counters->mpdusJudged++;
        start += duration;
    }
    this->EndReceivePayload(event); // ns-3's: the MAC once (NAV), AIFS or EIFS, interference cleared
}

template class SkimmingPhyEntity<HtPhy>;
template class SkimmingPhyEntity<VhtPhy>;

TypeId
QbYansWifiPhy::GetTypeId()
{
    static TypeId tid = TypeId("ns3::QbYansWifiPhy")
                            .SetParent<YansWifiPhy>()
                            .SetGroupName("Quicbed")
                            .AddConstructor<QbYansWifiPhy>()
                            .AddAttribute("SkimOthers",
                                          "Judge the MPDUs of PSDUs addressed to other radios at the end of the PPDU",
                                          BooleanValue(true),
                                          MakeBooleanAccessor(&QbYansWifiPhy::m_skim),
                                          MakeBooleanChecker());
    return tid;
}

void
QbYansWifiPhy::ConfigureStandard(WifiStandard standard)
{
    YansWifiPhy::ConfigureStandard(standard); // (it may call this again, through a channel switch)
    if (!m_skim)
    {
        return;
    }
    auto ht = m_phyEntities.find(WIFI_MOD_CLASS_HT);
    if (ht != m_phyEntities.end() && !DynamicCast<SkimmingPhyEntity<HtPhy>>(ht->second))
    {
        ht->second = Create<SkimmingPhyEntity<HtPhy>>(&counters, GetMaxSupportedTxSpatialStreams());
        ht->second->SetOwner(this);
    }
    auto vht = m_phyEntities.find(WIFI_MOD_CLASS_VHT);
    if (vht != m_phyEntities.end() && !DynamicCast<SkimmingPhyEntity<VhtPhy>>(vht->second))
    {
        vht->second = Create<SkimmingPhyEntity<VhtPhy>>(&counters);
        vht->second->SetOwner(this);
    }
}

void
QbYansWifiPhy::SetPostReceptionErrorModel(const Ptr<ErrorModel> em)
{
    counters.judgeEveryMpdu = em != nullptr;
    YansWifiPhy::SetPostReceptionErrorModel(em);
}

NS_OBJECT_ENSURE_REGISTERED(QbYansWifiPhy);

QbYansWifiPhyHelper::QbYansWifiPhyHelper()
{
    m_phy.at(0).SetTypeId("ns3::QbYansWifiPhy");
}

} // namespace qbchannel
