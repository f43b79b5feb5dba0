// Radios that skim PSDUs addressed to others (docs/ns3-backend.md, "Skimming receivers").
//
// In a cell every radio receives every PPDU, and ns-3 judges each MPDU of an A-MPDU at the
// instant its last symbol arrives (an event, an SNR and error-rate computation, a call into
// the MAC) whether or not the PSDU is for that radio. A skimming radio receives a PSDU
// addressed to another exactly as ns-3 does (preamble, header, the medium busy for the
// payload, interference, NAV and AIFS or EIFS after it), but judges its MPDUs all at once at
// the end of the payload, in the same order, over the same time windows: the outcome and the
// random numbers drawn are those of ns-3's own path, without an event and a MAC call per MPDU.
// Once one MPDU is received, the MAC has learnt all it takes from another radio's PSDU (it is
// busy until the PSDU's Duration/ID: NAV, TXOP holder; AIFS, not EIFS, after it), so the
// rest only draw their random number, as ns-3 would, without the SNR and error-rate
// computation; unless a post-reception error model (frame errors) is installed, which draws
// for an MPDU only when the error rate let it through: then every MPDU is judged.
// Off (ns3 option skim_receivers=False, node option ns3_skim_receivers) every radio takes
// ns-3's path.
#pragma once

#include "common.h"

#include "ns3/ht-phy.h"
#include "ns3/mac48-address.h"
#include "ns3/vht-phy.h"
#include "ns3/yans-wifi-helper.h"
#include "ns3/yans-wifi-phy.h"

#include <cstdint>

namespace qbchannel
{

/// PSDUs a radio received on ns-3's own path, PSDUs addressed to others it skimmed, and of
/// their MPDUs those judged and those that only drew their random number.
struct SkimCounters
{
    uint64_t received = 0, skimmed = 0;
    uint64_t mpdusJudged = 0, mpdusDrawn = 0;
    /// a post-reception error model is installed: judge every MPDU
    bool judgeEveryMpdu = false;
};

/// An HT or VHT PHY entity that skims PSDUs addressed to others.
template <class Base>
class SkimmingPhyEntity : public Base
{
  public:
    template <class... Args>
    explicit SkimmingPhyEntity(SkimCounters* counters, Args... args)
        : Base(args...),
          m_counters(counters)
    {
    }

  protected:
    Time DoStartReceivePayload(Ptr<Event> event) override;

  private:
    /// Addressed to this radio (or to a group): ns-3's own path.
    bool Ours(Ptr<const WifiPsdu> psdu);
    /// The end of a skimmed payload: every MPDU judged, then ns-3's end of reception.
    void EndSkimmedPayload(Ptr<Event> event);

    SkimCounters* m_counters;
    Mac48Address m_self;
    bool m_selfKnown = false;
};

/// A YansWifiPhy whose HT and VHT receivers skim (attribute SkimOthers, default true).
class QbYansWifiPhy : public YansWifiPhy
{
  public:
    static TypeId GetTypeId();
    void ConfigureStandard(WifiStandard standard) override;
    /// WifiPhy's (not virtual: call it on a QbYansWifiPhy), noting that every MPDU must be judged
    void SetPostReceptionErrorModel(const Ptr<ErrorModel> em);

    SkimCounters counters;

  private:
    bool m_skim = true;
};

/// YansWifiPhyHelper that installs QbYansWifiPhy.
class QbYansWifiPhyHelper : public YansWifiPhyHelper
{
  public:
    QbYansWifiPhyHelper();
};

} // namespace qbchannel
