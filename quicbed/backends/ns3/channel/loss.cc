// Loss models (see loss.h).

#include "loss.h"

#include "ns3/packet.h"

namespace qbchannel
{

TypeId
QbLossModel::GetTypeId()
{
    static TypeId tid = TypeId("ns3::QbLossModel").SetParent<ErrorModel>().SetGroupName("Quicbed");
    return tid;
}

QbLossModel::QbLossModel()
{
    m_random = CreateObject<UniformRandomVariable>();
}

void
QbLossModel::Configure(const Value& loss, double corrupt)
{
    m_corrupt = corrupt;
    if (loss.kind == Value::OBJECT)
    {
        std::string model = loss.Str("model", "bernoulli");
        if (model == "bernoulli")
        {
            m_lossGood = loss.Num("probability", 0);
        }
        else if (model == "gilbert_elliott")
        {
            m_ge = true;
            m_p = loss.Num("p", 0);
            m_r = loss.Num("r", 1);
            m_lossBad = loss.Num("loss_bad", 1);
            m_lossGood = loss.Num("loss_good", 0);
        }
        else
        {
            Die("unknown loss model " + model);
        }
    }
}

bool
QbLossModel::DoCorrupt(Ptr<Packet> p)
{
    bool lost;
    if (m_ge)
    {
        // netem gemodel: the loss probability of the current state, then the transition
        lost = m_random->GetValue() < (m_bad ? m_lossBad : m_lossGood);
        if (m_bad ? m_random->GetValue() < m_r : m_random->GetValue() < m_p)
        {
            m_bad = !m_bad;
        }
    }
    else
    {
        lost = m_lossGood > 0 && m_random->GetValue() < m_lossGood;
    }
    if (!lost && m_corrupt > 0 && m_random->GetValue() < m_corrupt)
    {
        lost = true; // a corrupted frame fails its checksum at the receiver
    }
    drops += lost;
    return lost;
}

void
QbLossModel::DoReset()
{
    m_bad = false;
}

NS_OBJECT_ENSURE_REGISTERED(QbLossModel);

TypeId
QbFrameErrorModel::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::QbFrameErrorModel").SetParent<ErrorModel>().SetGroupName("Quicbed");
    return tid;
}

QbFrameErrorModel::QbFrameErrorModel()
{
    m_random = CreateObject<UniformRandomVariable>();
}

bool
QbFrameErrorModel::DoCorrupt(Ptr<Packet> p)
{
    uint8_t buf[20];
    if (p->GetSize() < sizeof(buf))
    {
        return false;
    }
    p->CopyData(buf, sizeof(buf));
    size_t offset = 0;
    if (buf[3] == 0x4e) // A-MPDU subframe delimiter signature: the MAC header follows it
    {
        offset = 4;
    }
    uint8_t type = (buf[offset] >> 2) & 0x3;
    if (type != 2) // only data frames
    {
        return false;
    }
    Mac48Address ta;
    ta.CopyFrom(buf + offset + 10);
    auto it = rates.find(ta);
    if (it == rates.end() || it->second <= 0)
    {
        return false;
    }
    bool lost = m_random->GetValue() < it->second;
    drops += lost;
    return lost;
}

void
QbFrameErrorModel::DoReset()
{
}

NS_OBJECT_ENSURE_REGISTERED(QbFrameErrorModel);

} // namespace qbchannel
