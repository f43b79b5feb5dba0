// Program: builds the simulation from CONFIG.json and runs it in real time. Its members are
// defined in qbchannel.cc (building, running), startup.cc (waiting for associations and
// block-ack agreements) and stats.cc (the statistics files).
#pragma once

#include "common.h"
#include "lag.h"
#include "mesh.h"
#include "motion.h"
#include "pacer.h"
#include "ports.h"
#include "tap.h"
#include "wifi.h"
#include "wired.h"

#include "ns3/mac48-address.h"
#include "ns3/nstime.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace qbchannel
{

extern const char* const VERSION;

std::string MacStr(const Mac48Address& mac);
/// CLOCK_MONOTONIC in seconds.
double NowWallSeconds();
/// CPU seconds (user + system) of this process.
double CpuSeconds();

class Program
{
  public:
    explicit Program(const Value& config, bool dryRun)
        : m_config(config),
          m_dryRun(dryRun),
          m_channels(config)
    {
    }

    void Build();
    void Run();

  private:
    const Value& m_config;
    bool m_dryRun;
    WifiChannels m_channels;
    std::vector<std::unique_ptr<TapPort>> m_taps;
    std::vector<std::unique_ptr<WifiPort>> m_radios;
    std::vector<std::unique_ptr<Wire>> m_wires;
    std::vector<std::unique_ptr<Switch>> m_switches;
    std::vector<std::unique_ptr<StationRelay>> m_stations;
    std::vector<std::unique_ptr<MeshRelay>> m_meshes;
    std::map<std::string, WifiPort*> m_radioById;
    std::map<std::string, TapPort*> m_tapByNode; // mesh node name -> its TAP (identity)
    Motion m_motion;

    /// the wall clock as simulated time (empty in a dry run: no real time)
    std::function<Time()> m_realtimeNow;
    Ptr<PacedSimulatorImpl> m_paced; // when the paced simulator runs
    Time m_probeInterval = MicroSeconds(1000);
    Time m_liveInterval = Seconds(1);
    LagMeter m_lag;
    bool m_ready = false;
    int m_phase = 0;
    Time m_lastWarmup;
    Time m_allAssociatedSince = Time(-1);
    std::map<std::string, Time> m_missingSince; // link -> when its agreement was first missing
    uint64_t m_snapshots = 0;
    uint64_t m_resets = 0;
    double m_wallStart = 0, m_cpuStart = 0;
    uint64_t m_eventsStart = 0; // simulator events executed before the statistics were reset
    Time m_simStart;
    std::string m_statsFile, m_snapshotFile, m_liveFile;

    WifiPort* BuildRadio(Ptr<Node> node, const std::string& nodeName, const Value& spec);
    TapPort* BuildTap(Ptr<Node> node, const Value& spec);
    void BuildWires();
    void ResolvePeers();
    /// whether radio and its peer are linked now: a roaming station only with the AP it is
    /// associated with, an AP only with the roaming stations associated with it
    bool Linked(const WifiPort& radio, size_t peer) const;

    void Probe();
    void Live();
    void ReadyCheck();
    void SendWarmup();
    std::vector<std::string> MissingAgreements() const;
    /// whether recipient has seen its ADDBA response to originator acknowledged
    bool Answered(Mac48Address recipient, Mac48Address originator) const;
    void ResetStuckAgreements(const std::vector<std::string>& missing);
    size_t UnassociatedStations() const;
    void ResetStats();
    std::string StatsJson(bool final) const;
    double MonoAtSimStart() const;
    void WriteFile(const std::string& path, const std::string& text) const;
};

} // namespace qbchannel
