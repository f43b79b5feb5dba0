// Start-up: wait until every station is associated and every block-ack agreement exists
// (warm-up frames, resets of agreements stuck pending), then say READY.

#include "program.h"

#include "ns3/block-ack-manager.h"
#include "ns3/originator-block-ack-agreement.h"
#include "ns3/packet.h"
#include "ns3/qos-txop.h"
#include "ns3/simulator.h"
#include "ns3/sta-wifi-mac.h"

#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace qbchannel
{

size_t
Program::UnassociatedStations() const
{
    size_t n = 0;
    for (auto& radio : m_radios)
    {
        if (radio->role == "sta" && !DynamicCast<StaWifiMac>(radio->mac)->IsAssociated())
        {
            n++;
        }
    }
    return n;
}

std::vector<std::string>
Program::MissingAgreements() const
{
    std::vector<std::string> missing;
    for (auto& radio : m_radios)
    {
        if (!radio->needsBa)
        {
            continue;
        }
        Ptr<QosTxop> be = radio->mac->GetQosTxop(AC_BE);
        for (size_t i = 0; i < radio->peers.size(); i++)
        {
            if (!Linked(*radio, i))
            {
                continue;
            }
            // both ends: an originator sends A-MPDUs as soon as its agreement exists, and a
            // recipient whose agreement is still pending acknowledges each of their MPDUs
            // alone; with MPDUs shorter than a SIFS (HE) two such ACKs overlap and ns-3 3.37
            // aborts ("Invalid WifiPhy state")
            if (!be->GetBaAgreementEstablished(radio->peers[i], 0) || !Answered(radio->peers[i], radio->addr))
            {
                missing.push_back(radio->id + "->" + radio->peerIds[i]);
            }
        }
    }
    return missing;
}

void
Program::ResetStuckAgreements(const std::vector<std::string>& missing)
{
    // An ADDBA request lost together with an association (see ReadyCheck) leaves the
    // agreement PENDING for good, and no new request is ever sent: reset such agreements
    // (and those whose recipient has not established its side after a second).
    std::set<std::string> now(missing.begin(), missing.end());
    for (auto it = m_missingSince.begin(); it != m_missingSince.end();)
    {
        it = now.count(it->first) ? std::next(it) : m_missingSince.erase(it);
    }
    for (auto& radio : m_radios)
    {
        if (!radio->needsBa)
        {
            continue;
        }
        Ptr<QosTxop> be = radio->mac->GetQosTxop(AC_BE);
        for (size_t i = 0; i < radio->peers.size(); i++)
        {
            std::string link = radio->id + "->" + radio->peerIds[i];
            if (!now.count(link) || !Linked(*radio, i))
            {
                continue;
            }
            auto [entry, fresh] = m_missingSince.emplace(link, Simulator::Now());
            // (or established here while its recipient never saw its answer acknowledged:
            // ns-3 gave up resending that answer, and the recipient's agreement stays pending)
            bool stuck = be->GetBaManager()->ExistsAgreementInState(radio->peers[i],
                                                                    0,
                                                                    OriginatorBlockAckAgreement::PENDING) ||
                         be->GetBaAgreementEstablished(radio->peers[i], 0);
            if (!fresh && Simulator::Now() - entry->second > Seconds(1) && stuck)
            {
                be->GetBaManager()->NotifyAgreementReset(radio->peers[i], 0);
                entry->second = Simulator::Now();
            }
        }
    }
}

bool
Program::Linked(const WifiPort& radio, size_t peer) const
{
    if (radio.role == "sta" && radio.peers.size() > 1)
    {
        auto sta = DynamicCast<StaWifiMac>(radio.mac);
        return sta->IsAssociated() && sta->GetBssid(0) == radio.peers[peer];
    }
    if (radio.role == "ap")
    {
        const WifiPort& station = *m_radioById.at(radio.peerIds[peer]);
        if (station.peers.size() > 1)
        {
            return radio.mac->GetWifiRemoteStationManager()->IsAssociated(radio.peers[peer]);
        }
    }
    return true;
}

bool
Program::Answered(Mac48Address recipient, Mac48Address originator) const
{
    for (auto& radio : m_radios)
    {
        if (radio->addr == recipient)
        {
            return radio->answeredAddba.count(originator) > 0;
        }
    }
    return true; // not one of ours
}

void
Program::SendWarmup()
{
    uint32_t configured = uint32_t(m_config["warmup"].Num("packets", 8));
    uint32_t size = uint32_t(m_config["warmup"].Num("bytes", 200));
    for (auto& radio : m_radios)
    {
        Ptr<QosTxop> be = radio->qos ? radio->mac->GetQosTxop(AC_BE) : nullptr;
        // one frame where it sets up the agreement: several would leave in an A-MPDU as
        // soon as the originator's agreement exists, before the recipient's may (above)
        uint32_t packets = radio->baForOneFrame ? 1 : configured;
        for (size_t p = 0; p < radio->peers.size(); p++)
        {
            Mac48Address peer = radio->peers[p];
            if (!Linked(*radio, p) || (be && be->GetBaAgreementEstablished(peer, 0)))
            {
                continue;
            }
            for (uint32_t i = 0; i < packets; i++)
            {
                // in the radio's node context, like traffic arriving from its namespace
                Simulator::ScheduleWithContext(radio->dev->GetNode()->GetId(),
                                               Seconds(0),
                                               &WifiPort::SendRaw,
                                               radio.get(),
                                               Create<Packet>(size),
                                               peer,
                                               PROTO_WARMUP);
            }
        }
    }
}

void
Program::ReadyCheck()
{
    if (m_ready)
    {
        return;
    }
    double timeout = m_config["warmup"].Num("timeout_s", 20);
    if (m_phase == 0)
    {
        size_t waiting = UnassociatedStations();
        if (waiting == 0 && m_allAssociatedSince.IsNegative())
        {
            m_allAssociatedSince = Simulator::Now();
        }
        else if (waiting > 0)
        {
            m_allAssociatedSince = Time(-1);
        }
        // ns-3 3.37 arms a STA's beacon watchdog when it starts associating and refreshes it
        // only on beacons received once associated: a STA whose association took about a
        // second (dozens of STAs at once) drops it again right away. Wait until every STA
        // has stayed associated for two beacon intervals.
        if (waiting == 0 && Simulator::Now() - m_allAssociatedSince >= MilliSeconds(210))
        {
            m_phase = 1;
            Say("ASSOCIATED {\"t\": " + Num(Simulator::Now().GetSeconds()) + "}");
            SendWarmup();
            m_lastWarmup = Simulator::Now();
        }
        else if (Simulator::Now().GetSeconds() > timeout)
        {
            std::string list;
            for (auto& radio : m_radios)
            {
                if (radio->role == "sta" && !DynamicCast<StaWifiMac>(radio->mac)->IsAssociated())
                {
                    list += (list.empty() ? "" : ", ") + Quote(radio->id);
                }
            }
            Say("NOT-READY {\"reason\": \"association\", \"unassociated\": [" + list + "]}");
            m_ready = true; // give up checking; quicbed decides
            return;
        }
    }
    else
    {
        auto missing = MissingAgreements();
        if (missing.empty())
        {
            m_ready = true;
            size_t agreements = 0;
            for (auto& radio : m_radios)
            {
                for (size_t i = 0; radio->needsBa && i < radio->peers.size(); i++)
                {
                    agreements += Linked(*radio, i);
                }
            }
            std::ostringstream line;
            line << "READY {\"t\": " << Num(Simulator::Now().GetSeconds())
                 << ", \"radios\": " << m_radios.size() << ", \"agreements\": " << agreements
                 << ", \"lag_max_ms\": " << Num(m_lag.MaxMs()) << "}";
            ResetStats();
            Say(line.str());
            return;
        }
        if (Simulator::Now().GetSeconds() > timeout)
        {
            std::string list;
            for (auto& m : missing)
            {
                list += (list.empty() ? "" : ", ") + Quote(m);
            }
            Say("NOT-READY {\"reason\": \"block-ack agreements\", \"missing\": [" + list + "]}");
            m_ready = true;
            return;
        }
        ResetStuckAgreements(missing);
        if (Simulator::Now() - m_lastWarmup > MilliSeconds(250))
        {
            SendWarmup();
            m_lastWarmup = Simulator::Now();
        }
    }
    Simulator::Schedule(MilliSeconds(20), &Program::ReadyCheck, this);
}

} // namespace qbchannel
