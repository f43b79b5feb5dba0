// Loss models: QbLossModel (Bernoulli or Gilbert-Elliott loss plus corruption, on wired
// links) and QbFrameErrorModel (a fixed frame error rate per transmitter, on radios).
#pragma once

#include "common.h"

#include "ns3/error-model.h"
#include "ns3/mac48-address.h"
#include "ns3/random-variable-stream.h"

#include <map>

namespace qbchannel
{

/// Bernoulli or Gilbert-Elliott packet loss (netem semantics), plus independent corruption.
class QbLossModel : public ErrorModel
{
  public:
    static TypeId GetTypeId();

    QbLossModel();

    void Configure(const Value& loss, double corrupt);

    uint64_t drops = 0;

  private:
    bool DoCorrupt(Ptr<Packet> p) override;
    void DoReset() override;

    Ptr<UniformRandomVariable> m_random;
    bool m_ge = false;
    bool m_bad = false;
    double m_p = 0, m_r = 1, m_lossBad = 1, m_lossGood = 0, m_corrupt = 0;
};

/// A fixed frame error rate per transmitter, applied to data MPDUs after the PHY's own
/// SNR-based decision (WifiPhy::PostReceptionErrorModel).
class QbFrameErrorModel : public ErrorModel
{
  public:
    static TypeId GetTypeId();

    QbFrameErrorModel();

    std::map<Mac48Address, double> rates;
    uint64_t drops = 0;

  private:
    bool DoCorrupt(Ptr<Packet> p) override;
    void DoReset() override;

    Ptr<UniformRandomVariable> m_random;
};

} // namespace qbchannel
