// Moving and roaming stations (motion.h).

#include "motion.h"

#include "program.h" // MacStr

#include "ns3/ampdu-subframe-header.h"
#include "ns3/simulator.h"
#include "ns3/sta-wifi-mac.h"
#include "ns3/wifi-mac-header.h"

#include <sstream>

namespace qbchannel
{

std::string
Tracked::ApId(Mac48Address ap) const
{
    auto it = apIds.find(ap);
    return it != apIds.end() ? it->second : MacStr(ap);
}

void
Tracked::Event(const std::string& what, Mac48Address ap, const std::string& extra)
{
    if (start.IsNegative())
    {
        return; // (start-up's associations are not part of a run)
    }
    std::ostringstream out;
    out << "{\"t\": " << Num((Simulator::Now() - start).GetSeconds()) << ", \"event\": " << Quote(what)
        << ", \"ap\": " << Quote(ApId(ap)) << extra << "}";
    events.push_back(out.str());
}

void
Tracked::OnSniff(Ptr<const Packet> packet,
                 uint16_t /*channelFreqMhz*/,
                 WifiTxVector txVector,
                 MpduInfo aMpdu,
                 SignalNoiseDbm signalNoise,
                 uint16_t /*staId*/)
{
    WifiMacHeader header;
    if (aMpdu.type != NORMAL_MPDU)
    {
        // an A-MPDU's subframe: its delimiter comes first
        Ptr<Packet> subframe = packet->Copy();
        AmpduSubframeHeader delimiter;
        subframe->RemoveHeader(delimiter);
        packet = subframe;
    }
    if (packet->PeekHeader(header) == 0 || (!header.IsMgt() && !header.IsData()))
    {
        return; // control frames carry no transmitter address worth keeping
    }
    Mac48Address from = header.GetAddr2();
    if (!apIds.count(from))
    {
        return;
    }
    auto& [sum, count] = signal[from];
    sum += signalNoise.signal;
    count++;
    if (header.IsData() && header.GetAddr1() == radio->addr && txVector.GetMode().GetModulationClass() >=
                                                                     WIFI_MOD_CLASS_HT)
    {
        mcsSum += txVector.GetMode().GetMcsValue();
        mcsCount++;
    }
}

void
Tracked::OnAssoc(Mac48Address ap)
{
    bssid = ap;
    awaitingDelivery = true;
    Event("associated", ap);
}

void
Tracked::OnDeAssoc(Mac48Address ap)
{
    bssid = Mac48Address();
    // the last frame delivered before the station gave up on its AP: the outage's start
    std::string last = lastDelivery.IsNegative() || lastDelivery < start
                           ? ", \"last_delivery\": null"
                           : ", \"last_delivery\": " + Num((lastDelivery - start).GetSeconds());
    Event("lost", ap, last);
}

void
Tracked::OnDelivered(uint32_t bytes)
{
    rxBytes += bytes;
    lastDelivery = Simulator::Now();
    if (awaitingDelivery)
    {
        awaitingDelivery = false;
        Event("first_delivery", bssid);
    }
}

void
Motion::Track(WifiPort* radio,
              Ptr<Node> node,
              const Value& trajectory,
              const std::map<Mac48Address, std::string>& apIds)
{
    auto tracked = std::make_unique<Tracked>();
    tracked->radio = radio;
    tracked->apIds = apIds;
    tracked->position = node->GetObject<MobilityModel>();
    tracked->waypoints = node->GetObject<WaypointMobilityModel>();
    if (trajectory.kind == Value::ARRAY)
    {
        for (const auto& point : trajectory.Arr())
        {
            const auto& p = point.Arr();
            tracked->points.push_back({p[0].AsNum(), p[1].AsNum(), p[2].AsNum(), p[3].AsNum()});
        }
    }
    Tracked* raw = tracked.get();
    radio->phy->TraceConnectWithoutContext("MonitorSnifferRx", MakeCallback(&Tracked::OnSniff, raw));
    radio->mac->TraceConnectWithoutContext("Assoc", MakeCallback(&Tracked::OnAssoc, raw));
    radio->mac->TraceConnectWithoutContext("DeAssoc", MakeCallback(&Tracked::OnDeAssoc, raw));
    radio->delivered = [raw](uint32_t bytes) { raw->OnDelivered(bytes); };
    m_tracked.push_back(std::move(tracked));
}

void
Motion::Start()
{
    if (!m_start.IsNegative() || m_tracked.empty())
    {
        return;
    }
    m_start = Simulator::Now();
    for (auto& tracked : m_tracked)
    {
        tracked->start = m_start;
        tracked->awaitingDelivery = false; // (its association at start-up is not a handover)
        tracked->rxBytesSampled = tracked->rxBytes;
        tracked->signal.clear();
        tracked->mcsSum = tracked->mcsCount = 0;
        if (auto sta = DynamicCast<StaWifiMac>(tracked->radio->mac); sta && sta->IsAssociated())
        {
            tracked->bssid = sta->GetBssid(0);
        }
        if (!tracked->waypoints || tracked->points.empty())
        {
            continue;
        }
        const auto& first = tracked->points.front();
        if (first[0] > 0)
        {
            tracked->waypoints->AddWaypoint(Waypoint(m_start, Vector(first[1], first[2], first[3])));
        }
        for (const auto& p : tracked->points)
        {
            tracked->waypoints->AddWaypoint(Waypoint(m_start + Seconds(p[0]), Vector(p[1], p[2], p[3])));
        }
    }
    Simulator::Schedule(interval, &Motion::Sample, this);
}

void
Motion::Sample()
{
    double t = (Simulator::Now() - m_start).GetSeconds();
    for (auto& tracked : m_tracked)
    {
        Vector where = tracked->position->GetPosition();
        std::ostringstream out;
        out << "{\"t\": " << Num(t) << ", \"x\": " << Num(where.x) << ", \"y\": " << Num(where.y)
            << ", \"ap\": "
            << (tracked->bssid == Mac48Address() ? std::string("null") : Quote(tracked->ApId(tracked->bssid)))
            << ", \"signal_dbm\": {";
        bool first = true;
        for (auto& [ap, sums] : tracked->signal)
        {
            out << (first ? "" : ", ") << Quote(tracked->ApId(ap)) << ": " << Num(sums.first / sums.second);
            first = false;
        }
        out << "}, \"mcs\": "
            << (tracked->mcsCount ? Num(tracked->mcsSum / tracked->mcsCount) : std::string("null"))
            << ", \"rx_bytes\": " << tracked->rxBytes - tracked->rxBytesSampled << "}";
        tracked->samples.push_back(out.str());
        tracked->signal.clear();
        tracked->mcsSum = tracked->mcsCount = 0;
        tracked->rxBytesSampled = tracked->rxBytes;
    }
    Simulator::Schedule(interval, &Motion::Sample, this);
}

std::string
Motion::Json() const
{
    if (m_start.IsNegative())
    {
        return "null";
    }
    std::ostringstream o;
    o << "{\"interval_s\": " << Num(interval.GetSeconds()) << ", \"stations\": {";
    for (size_t i = 0; i < m_tracked.size(); i++)
    {
        const Tracked& tracked = *m_tracked[i];
        o << (i ? ",\n  " : "\n  ") << Quote(tracked.radio->id) << ": {\"samples\": [";
        for (size_t s = 0; s < tracked.samples.size(); s++)
        {
            o << (s ? ", " : "") << tracked.samples[s];
        }
        o << "], \"events\": [";
        for (size_t e = 0; e < tracked.events.size(); e++)
        {
            o << (e ? ", " : "") << tracked.events[e];
        }
        o << "]}";
    }
    o << "}}";
    return o.str();
}

} // namespace qbchannel
