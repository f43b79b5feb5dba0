// The statistics files: counters reset at READY and on SIGUSR2, snapshots as JSON, written
// atomically (rename), and the clocks they are measured with.

#include "ledger.h"
#include "program.h"
#include "skim.h"

#include "ns3/simulator.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <sys/resource.h>

namespace qbchannel
{

std::string
MacStr(const Mac48Address& mac)
{
    std::ostringstream out;
    out << mac;
    return out.str();
}

double
NowWallSeconds()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double
CpuSeconds()
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec +
           usage.ru_stime.tv_usec * 1e-6;
}

void
Program::ResetStats()
{
    m_lag.Reset();
    m_wallStart = NowWallSeconds();
    m_cpuStart = CpuSeconds();
    m_eventsStart = Simulator::GetEventCount();
    if (m_paced)
    {
        m_paced->ResetWaitStats();
    }
    m_simStart = Simulator::Now();
    for (auto& radio : m_radios)
    {
        radio->ResetStats();
    }
    for (auto& wire : m_wires)
    {
        for (int d = 0; d < 2; d++)
        {
            wire->packetsBase[d] = wire->channel->packets[d];
            wire->bytesBase[d] = wire->channel->bytes[d];
            wire->lossBase[d] = wire->loss[d]->drops;
            wire->queueBase[d] = wire->queue[d]->GetTotalDroppedPackets();
            if (wire->channel->gate[d])
            {
                wire->channel->gate[d]->Restart(); // each run meets the trace from its start
            }
        }
    }
    g_writer.ResetStats();
    g_ledger.Reset();
    for (auto& tap : m_taps)
    {
        tap->fromNs = tap->toNs = tap->writeErrors = tap->foreignSource = 0;
        tap->dev->ResetStats();
    }
    for (auto& mesh : m_meshes)
    {
        mesh->ResetStats();
    }
    for (auto& sw : m_switches)
    {
        sw->flooded = sw->sameSegment = sw->received = 0;
        if (sw->fastAck)
        {
            sw->fastAck->ResetStats();
        }
    }
}

namespace
{

/// Seconds with microseconds whatever the magnitude (Num keeps 10 significant digits only).
std::string
Fixed6(double seconds)
{
    std::ostringstream out;
    out << std::fixed;
    out.precision(6);
    out << seconds;
    return out.str();
}

} // namespace

double
Program::MonoAtSimStart() const
{
    // when an event due at the interval's start ran (or would have run) on time, in
    // CLOCK_MONOTONIC seconds: the clock quicbed's runner and clients time transfers with
    if (!m_realtimeNow)
    {
        return 0;
    }
    return NowWallSeconds() - (m_realtimeNow() - m_simStart).GetSeconds();
}

std::string
Program::StatsJson(bool final) const
{
    double wall = NowWallSeconds() - m_wallStart;
    double cpu = CpuSeconds() - m_cpuStart;
    double sim = (Simulator::Now() - m_simStart).GetSeconds();
    std::map<Mac48Address, std::string> names;
    for (auto& radio : m_radios)
    {
        names[radio->addr] = radio->id;
    }
    std::ostringstream o;
    o << "{\"version\": " << Quote(VERSION) << ", \"final\": " << (final ? "true" : "false")
      << ", \"snapshot\": " << m_snapshots << ", \"resets\": " << m_resets
      << ", \"ready\": " << (m_ready ? "true" : "false") << ",\n \"interval\": {\"sim_s\": "
      << Num(sim) << ", \"wall_s\": " << Num(wall) << ", \"cpu_s\": " << Num(cpu)
      << ", \"cpu_share\": " << Num(wall > 0 ? cpu / wall : 0)
      << ", \"events\": " << Simulator::GetEventCount() - m_eventsStart
      << ", \"mono_at_sim_start\": " << Fixed6(MonoAtSimStart())
      << ", \"realtime\": " << Quote(m_paced ? "paced" : "ns3")
      << ", \"waits\": " << (m_paced ? m_paced->WaitJson() : "null") << "},\n \"lag\": "
      << m_lag.Json(m_probeInterval.GetSeconds() * 1000) << ",\n \"radios\": [";
    for (size_t i = 0; i < m_radios.size(); i++)
    {
        const WifiPort& r = *m_radios[i];
        double air = r.airData + r.airCtrl + r.airMgmt;
        o << (i ? ",\n  " : "\n  ") << "{\"id\": " << Quote(r.id) << ", \"node\": " << Quote(r.node)
          << ", \"role\": " << Quote(r.role) << ", \"mac\": " << Quote(MacStr(r.addr))
          << ", \"channel\": " << r.channelNumber << ", \"tx_data\": " << r.data.Json()
          << ", \"airtime_s\": {\"data\": " << Num(r.airData) << ", \"control\": " << Num(r.airCtrl)
          << ", \"management\": " << Num(r.airMgmt) << ", \"total\": " << Num(air) << "}"
          << ", \"airtime_share\": " << Num(sim > 0 ? air / sim : 0)
          << ", \"control_frames\": " << r.ctrlFrames << ", \"management_frames\": " << r.mgmtFrames
          << ", \"drops\": {\"queue_full\": " << r.dropQueue << ", \"retry_limit\": " << r.dropRetry
          << ", \"lifetime\": " << r.dropLifetime << ", \"other\": " << r.dropOld
          << ", \"not_associated\": " << r.txDrop << ", \"frame_errors\": "
          << (r.frameErrors ? r.frameErrors->drops - r.frameErrorBase : 0) << "}"
          << ", \"rx_forwarded\": " << r.rxUp << ", \"data_phy_rate_max_bps\": " << r.dataRateMax
          << ", \"data_streams_max\": " << r.dataStreamsMax << ", \"mu_ppdus\": " << r.muPpdus
          << ", \"mu_psdus\": " << r.muPsdus << ", \"obss_pd_resets\": " << r.obssPdResets
          << ", \"ul_mu_ppdus\": " << r.ulMuPpdus << ", \"ul_mu_data_psdus\": " << r.ulMuDataPsdus
          << ", \"trigger_frames\": " << r.triggerFrames;
        if (auto phy = DynamicCast<QbYansWifiPhy>(r.phy))
        {
            o << ", \"psdus_received\": " << phy->counters.received - r.skimBase.received
              << ", \"psdus_skimmed\": " << phy->counters.skimmed - r.skimBase.skimmed
              << ", \"skimmed_mpdus_judged\": " << phy->counters.mpdusJudged - r.skimBase.mpdusJudged
              << ", \"skimmed_mpdus_drawn_only\": " << phy->counters.mpdusDrawn - r.skimBase.mpdusDrawn;
        }
        if (r.disc || r.stations)
        {
            o << ", \"queue_disc\": " << (r.disc ? r.disc->Json() : r.stations->Json());
        }
        o << ", \"per_receiver\": {";
        bool first = true;
        for (auto& [mac, counters] : r.perReceiver)
        {
            auto it = names.find(mac);
            std::string key = it != names.end() ? it->second : MacStr(mac);
            std::string json = counters.Json();
            if (std::string queue = r.stations ? r.stations->StationJson(mac) : ""; !queue.empty())
            {
                json.insert(json.size() - 1, ", \"queue\": " + queue);
            }
            o << (first ? "" : ", ") << Quote(key) << ": " << json;
            first = false;
        }
        o << "}}";
    }
    o << "],\n \"wires\": [";
    for (size_t i = 0; i < m_wires.size(); i++)
    {
        const Wire& w = *m_wires[i];
        o << (i ? ",\n  " : "\n  ") << "{\"name\": " << Quote(w.name);
        const char* dirs[2] = {"forward", "backward"};
        for (int d = 0; d < 2; d++)
        {
            o << ", " << Quote(dirs[d]) << ": {\"packets\": "
              << w.channel->packets[d] - w.packetsBase[d]
              << ", \"bytes\": " << w.channel->bytes[d] - w.bytesBase[d]
              << ", \"queue_drops\": " << w.queue[d]->GetTotalDroppedPackets() - w.queueBase[d]
              << ", \"loss_drops\": " << w.loss[d]->drops - w.lossBase[d];
            if (const TraceGate* gate = w.channel->gate[d].get())
            {
                o << ", \"trace_opportunities\": " << gate->opportunities
                  << ", \"trace_opportunities_used\": " << gate->used;
            }
            o << "}";
        }
        o << "}";
    }
    o << "],\n \"taps\": [";
    for (size_t i = 0; i < m_taps.size(); i++)
    {
        const TapPort& t = *m_taps[i];
        o << (i ? ",\n  " : "\n  ") << "{\"id\": " << Quote(t.id) << ", \"mac\": "
          << Quote(MacStr(t.mac)) << ", \"from_namespace\": " << t.fromNs
          << ", \"to_namespace\": " << t.toNs << ", \"write_errors\": " << t.writeErrors
          << ", \"foreign_source\": " << t.foreignSource << ", \"rx_read\": " << t.dev->rxFrames
          << ", \"rx_drops\": " << t.dev->rxDrops << ", \"rx_pending_max\": " << t.dev->pendingMax
          << ", \"rx_pending_limit\": " << t.dev->pendingLimit << ", " << t.dev->rxDelay.Json() << "}";
    }
    o << "],\n \"tap_writer\": " << g_writer.StatsJson();
    o << ",\n \"frames\": " << g_ledger.Json();
    o << ",\n \"bridges\": [";
    for (size_t i = 0; i < m_switches.size(); i++)
    {
        const Switch& b = *m_switches[i];
        o << (i ? ",\n  " : "\n  ") << "{\"node\": " << Quote(b.name) << ", \"received\": " << b.received
          << ", \"flooded\": " << b.flooded << ", \"same_segment\": " << b.sameSegment;
        if (b.fastAck)
        {
            o << ", \"fastack\": " << b.fastAck->Json();
        }
        o << "}";
    }
    o << "],\n \"mesh\": [";
    for (size_t i = 0; i < m_meshes.size(); i++)
    {
        const MeshRelay& m = *m_meshes[i];
        o << (i ? ",\n  " : "\n  ") << "{\"node\": " << Quote(m.name)
          << ", \"delivered\": " << m.delivered << ", \"forwarded\": " << m.forwarded
          << ", \"broadcasts\": " << m.broadcasts << ", \"no_route\": " << m.noRoute
          << ", \"ttl_drops\": " << m.ttlDrops << ", \"duplicates\": " << m.duplicates
          << ", \"not_peer\": " << m.notPeer << "}";
    }
    o << "],\n \"motion\": " << m_motion.Json() << "}\n";
    return o.str();
}

void
Program::WriteFile(const std::string& path, const std::string& text) const
{
    if (path.empty())
    {
        return;
    }
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp);
        out << text;
    }
    if (rename(tmp.c_str(), path.c_str()) != 0)
    {
        std::cerr << "quicbed-ns3-channel: cannot write " << path << ": " << strerror(errno)
                  << std::endl;
    }
}

} // namespace qbchannel
