// quicbed-ns3-channel: an ns-3 real-time 802.11 channel that real network namespaces plug into.
//
// Usage:  quicbed-ns3-channel CONFIG.json          run (needs root: opens TAPs in namespaces)
//         quicbed-ns3-channel --dry-run CONFIG.json build the simulation without TAPs, print
//                                                   the summary line, exit
//         quicbed-ns3-channel --version
//
// CONFIG.json is written by quicbed.backends.ns3.description (see its docstring for the
// schema). Design, in short (the Python module docstring has the long version):
//
// * Every ns-3 node forwards at layer 2; there is no ns-3 IP stack. Namespaces keep the
//   addresses quicbed resolved, ARP runs end to end over the simulated media.
//   - "switch" nodes (access points, Ethernet switches, a host's wired interface) are
//     learning bridges over their ports (TAP, wired link, AP radio). ns-3's AP MAC can
//     send frames on behalf of other addresses (SendFrom), and relays frames between its
//     own stations itself.
//   - "station" nodes join one TAP to one STA radio. The TAP's MAC is set to the STA
//     radio's MAC, so every frame the namespace sends is the station's own frame: the
//     station never has to bridge (which ns-3's STA MAC, like a real 3-address STA,
//     cannot do).
//   - "mesh" nodes join one TAP (the mesh point's identity) to one ad-hoc HT/VHT radio
//     per channel. Frames travel hop by hop with a mesh header (final destination,
//     origin, TTL, sequence number), like 802.11s's mesh control + address extension,
//     along static shortest paths computed by quicbed (what HWMP converges to).
// * TAP devices are opened inside the namespaces (setns + TUNSETIFF IFF_TAP|IFF_NO_PI)
//   and handed to FdNetDevice for reading; frames to the namespaces are written by a
//   separate writer thread (TapWriter), which keeps the receiving namespace's network
//   stack off the simulator thread.
// * Work-arounds for ns-3 3.37: QbApWifiMac (uplink A-MSDUs to the DS), a longer ADDBA
//   response timeout, a start-up wait for stable associations, resets of block-ack
//   agreements stuck pending, and counting of silent MAC queue drops.
// * Wired links are SimpleNetDevice pairs on a per-direction channel: rate (counting the
//   14-byte Ethernet header, like tbf), delay, jitter, drop-tail queue, Bernoulli or
//   Gilbert-Elliott loss; or, instead of the rate, a delivery trace (TraceGate).
// * An access point may acknowledge TCP data for its stations (FastAck, "fastack" on the
//   switch node).
// * Real time: PacedSimulatorImpl (pacer.h; "realtime": "ns3" gives ns-3's
//   RealtimeSimulatorImpl, best effort, instead). A probe event every lag_interval
//   measures RealtimeNow() - Now(): how late events run. quicbed runs this program under
//   SCHED_FIFO.
// * Start-up: wait until every STA is associated, then send warm-up frames (a protocol
//   number that is never forwarded to a namespace) on every radio link until every
//   block-ack agreement exists, print "QUICBED-NS3 READY {...}" and reset statistics.
// * Statistics: SIGUSR1 writes a snapshot, SIGUSR2 resets counters (and writes a
//   snapshot), SIGTERM/SIGINT stop the simulation and write the final statistics.
//
// Files:
//   qbchannel.cc  this overview; Program's building and running, signals, main
//   program.h     Program, the simulation: what it owns and what it does
//   startup.cc    Program's start-up: associations, block-ack agreements, READY
//   stats.cc      Program's statistics files and the clocks they use
//   common.h      the qbchannel namespace, the ethertypes of our own frames, Say and Die
//   json.h        the JSON reader for CONFIG.json and helpers to write JSON
//   tap.h/.cc     TAP devices inside namespaces (open, set MAC) and TapWriter, their writer
//   loss.h/.cc    QbLossModel (wired links) and QbFrameErrorModel (radios)
//   wifi.h/.cc    WifiPort, the channel of each band, building radios, QbApWifiMac
//   wired.h/.cc   QbWireChannel and Wire (wired links) and building them
//   trace.h/.cc   TraceGate: a wired direction that replays a delivery trace (Mahimahi's format)
//   pacer.h/.cc   PacedSimulatorImpl, the real-time simulator (how it waits for events)
//   lag.h/.cc     LagMeter (real-time lag) and TxCounters (transmit statistics)
//   ports.h/.cc   TapPort, WirePort, Port; Switch (learning bridge), StationRelay (station)
//   forward_up.h/.cc  how the relays receive what a radio's MAC forwards up
//   fastack.h/.cc FastAck: TCP ACK acceleration at an access point's bridge
//   mesh.h/.cc    MeshRelay and QbMeshHeader (mesh points)

#include "ledger.h"
#include "loss.h"
#include "program.h"

#include "ns3/config.h"
#include "ns3/constant-position-mobility-model.h"
#include "ns3/waypoint-mobility-model.h"
#include "ns3/global-value.h"
#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/packet.h"
#include "ns3/realtime-simulator-impl.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"
#include "ns3/vector.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <vector>

namespace qbchannel
{

const char* const VERSION = "quicbed-ns3-channel 1";

namespace
{

volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_dump = 0;
volatile sig_atomic_t g_reset = 0;

void
OnSignal(int sig)
{
    if (sig == SIGUSR1)
    {
        g_dump = 1;
    }
    else if (sig == SIGUSR2)
    {
        g_reset = 1;
    }
    else
    {
        g_stop = 1;
    }
}

} // namespace

WifiPort*
Program::BuildRadio(Ptr<Node> node, const std::string& nodeName, const Value& spec)
{
    std::unique_ptr<WifiPort> port = BuildWifiPort(node, nodeName, spec, m_channels);
    WifiPort* raw = port.get();
    m_radioById[raw->id] = raw;
    m_radios.push_back(std::move(port));
    return raw;
}

TapPort*
Program::BuildTap(Ptr<Node> node, const Value& spec)
{
    auto tap = std::make_unique<TapPort>();
    tap->id = spec.At("id").AsStr();
    tap->ns = spec.At("namespace").AsStr();
    tap->ifname = spec.At("ifname").AsStr();
    if (spec.Has("mac"))
    {
        tap->mac = Mac48Address(spec.At("mac").AsStr().c_str());
    }
    tap->fd = m_dryRun ? -1 : OpenTap(tap->ns, tap->ifname);
    tap->dev = CreateObject<QbTapDevice>();
    tap->dev->pendingLimit = uint32_t(m_config.Num("tap_pending_limit", 1000));
    tap->dev->readerAbove = m_config.Bool("tap_readers_above_simulator", false);
    tap->dev->SetAttribute("RxQueueSize", UintegerValue(tap->dev->pendingLimit + 64));
    if (tap->fd >= 0)
    {
        tap->dev->SetFileDescriptor(tap->fd);
    }
    node->AddDevice(tap->dev);
    TapPort* raw = tap.get();
    m_taps.push_back(std::move(tap));
    return raw;
}

void
Program::BuildWires()
{
    for (const auto& spec : m_config["wires"].Arr())
    {
        m_wires.push_back(BuildWire(spec));
    }
}


void
Program::Build()
{
    // ns-3 3.37: if an ADDBA response comes later than AddBaResponseTimeout (1 ms by default;
    // it does when dozens of stations set up agreements at once), the originator sends its
    // next MPDU with a normal ACK, the recipient (whose agreement already exists) delivers
    // it outside its reorder window, the window never advances and every later MPDU of that
    // link is held forever. Waiting longer for the response avoids that race.
    Config::SetDefault("ns3::QosTxop::AddBaResponseTimeout",
                       TimeValue(MilliSeconds(int64_t(m_config.Num("addba_timeout_ms", 500)))));
    RngSeedManager::SetSeed(uint32_t(m_config.Num("seed", 1)));
    RngSeedManager::SetRun(uint64_t(m_config.Num("run", 1)));
    m_probeInterval = MicroSeconds(int64_t(m_config.Num("lag_interval_us", 1000)));
    m_liveInterval = MilliSeconds(int64_t(m_config.Num("live_interval_ms", 1000)));
    m_statsFile = m_config.Str("stats_file", "");
    m_snapshotFile = m_config.Str("snapshot_file", "");
    m_liveFile = m_config.Str("live_file", "");

    BuildWires();
    std::map<std::string, Wire*> wireByName;
    for (auto& wire : m_wires)
    {
        wireByName[wire->name] = wire.get();
    }

    // moving or roaming stations, followed once their peers are known
    std::vector<std::tuple<WifiPort*, Ptr<Node>, const Value*>> tracked;
    for (const auto& nodeSpec : m_config["nodes"].Arr())
    {
        std::string name = nodeSpec.At("name").AsStr();
        std::string kind = nodeSpec.At("kind").AsStr();
        Ptr<Node> node = CreateObject<Node>();
        std::vector<Port> ports;
        bool hasRadio = false;
        for (const auto& portSpec : nodeSpec["ports"].Arr())
        {
            std::string portKind = portSpec.At("kind").AsStr();
            Port port;
            if (portKind == "tap")
            {
                port.tap = BuildTap(node, portSpec);
            }
            else if (portKind == "wifi")
            {
                hasRadio = true;
                port.wifi = BuildRadio(node, name, portSpec);
            }
            else if (portKind == "wire")
            {
                auto it = wireByName.find(portSpec.At("wire").AsStr());
                if (it == wireByName.end())
                {
                    Die("node " + name + ": unknown wire " + portSpec.At("wire").AsStr());
                }
                int end = int(portSpec.At("end").AsNum());
                port.wire = WirePort{it->second, end};
                node->AddDevice(it->second->dev[end]);
            }
            else
            {
                Die("node " + name + ": unknown port kind " + portKind);
            }
            ports.push_back(port);
        }
        if (hasRadio)
        {
            // a moving station stands at its first waypoint until Motion::Start
            Ptr<MobilityModel> mobility;
            if (nodeSpec.Has("trajectory"))
            {
                mobility = CreateObject<WaypointMobilityModel>();
            }
            else
            {
                mobility = CreateObject<ConstantPositionMobilityModel>();
            }
            const auto& pos = nodeSpec["position"].Arr();
            mobility->SetPosition(Vector(pos.size() > 0 ? pos[0].AsNum() : 0,
                                         pos.size() > 1 ? pos[1].AsNum() : 0,
                                         pos.size() > 2 ? pos[2].AsNum() : 0));
            node->AggregateObject(mobility);
        }
        if (kind == "switch")
        {
            auto sw = std::make_unique<Switch>();
            sw->name = name;
            sw->ports = ports;
            sw->announceAssociations = nodeSpec.Bool("announce_associations", false);
            if (nodeSpec.Bool("fastack", false))
            {
                sw->EnableFastAck();
            }
            m_switches.push_back(std::move(sw));
        }
        else if (kind == "station")
        {
            auto relay = std::make_unique<StationRelay>();
            relay->name = name;
            for (auto& port : ports)
            {
                if (port.tap)
                {
                    relay->tap = port.tap;
                }
                if (port.wifi)
                {
                    relay->radio = port.wifi;
                }
            }
            if (!relay->tap || !relay->radio || ports.size() != 2)
            {
                Die("station node " + name + " needs one TAP and one radio");
            }
            relay->tap->mac = relay->radio->addr; // the namespace's interface IS the station
            relay->tap->macFromRadio = true;
            if (nodeSpec.Has("trajectory") || relay->radio->peerIds.size() > 1)
            {
                tracked.push_back({relay->radio, node, &nodeSpec["trajectory"]});
            }
            m_stations.push_back(std::move(relay));
        }
        else if (kind == "mesh")
        {
            auto relay = std::make_unique<MeshRelay>();
            relay->name = name;
            for (auto& port : ports)
            {
                if (port.tap)
                {
                    relay->tap = port.tap;
                }
                if (port.wifi)
                {
                    relay->radios.push_back(port.wifi);
                }
            }
            if (!relay->tap || relay->radios.empty())
            {
                Die("mesh node " + name + " needs one TAP and at least one radio");
            }
            m_tapByNode[name] = relay->tap;
            m_meshes.push_back(std::move(relay));
        }
        else
        {
            Die("node " + name + ": unknown kind " + kind);
        }
    }
    ResolvePeers();
    m_motion.interval = MilliSeconds(int64_t(m_config.Num("timeline_interval_ms", 250)));
    for (auto& [radio, node, trajectory] : tracked)
    {
        std::map<Mac48Address, std::string> apIds;
        for (size_t i = 0; i < radio->peers.size(); i++)
        {
            apIds[radio->peers[i]] = radio->peerIds[i];
        }
        m_motion.Track(radio, node, *trajectory, apIds);
    }

    // Mesh routes: identity of the destination mesh node -> (local radio, next-hop radio).
    size_t meshIndex = 0;
    for (const auto& nodeSpec : m_config["nodes"].Arr())
    {
        if (nodeSpec.At("kind").AsStr() != "mesh")
        {
            continue;
        }
        MeshRelay* relay = m_meshes[meshIndex++].get();
        const Value& routes = nodeSpec["routes"];
        if (routes.kind != Value::OBJECT)
        {
            continue;
        }
        for (auto& [destination, hop] : routes.o)
        {
            auto dst = m_tapByNode.find(destination);
            auto local = m_radioById.find(hop.At("radio").AsStr());
            auto next = m_radioById.find(hop.At("next_hop").AsStr());
            if (dst == m_tapByNode.end() || local == m_radioById.end() || next == m_radioById.end())
            {
                Die("mesh node " + relay->name + ": bad route to " + destination);
            }
            size_t index = std::find(relay->radios.begin(), relay->radios.end(), local->second) -
                           relay->radios.begin();
            if (index == relay->radios.size())
            {
                Die("mesh node " + relay->name + ": route via a radio of another node");
            }
            relay->routes[dst->second->mac] = {index, next->second->addr};
        }
    }

    for (auto& sw : m_switches)
    {
        sw->Attach();
    }
    for (auto& relay : m_stations)
    {
        relay->Attach();
    }
    for (auto& relay : m_meshes)
    {
        relay->Attach();
    }
    for (auto& tap : m_taps)
    {
        if (tap->mac == Mac48Address())
        {
            tap->mac = Mac48Address::Allocate();
        }
        tap->dev->SetAddress(tap->mac);
        if (!m_dryRun)
        {
            SetTapMac(tap->ns, tap->ifname, tap->mac);
        }
    }
}

void
Program::ResolvePeers()
{
    for (auto& radio : m_radios)
    {
        for (const auto& peerId : radio->peerIds)
        {
            auto it = m_radioById.find(peerId);
            if (it == m_radioById.end())
            {
                Die("radio " + radio->id + ": unknown peer " + peerId);
            }
            radio->peers.push_back(it->second->addr);
        }
        if (!radio->frameErrorById.empty())
        {
            radio->frameErrors = CreateObject<QbFrameErrorModel>();
            for (auto& [peerId, rate] : radio->frameErrorById)
            {
                auto it = m_radioById.find(peerId);
                if (it == m_radioById.end())
                {
                    Die("radio " + radio->id + ": unknown frame_error peer " + peerId);
                }
                radio->frameErrors->rates[it->second->addr] = rate;
            }
            if (auto skimming = DynamicCast<QbYansWifiPhy>(radio->phy))
            {
                skimming->SetPostReceptionErrorModel(radio->frameErrors); // judges every MPDU then
            }
            else
            {
                radio->phy->SetPostReceptionErrorModel(radio->frameErrors);
            }
        }
    }
}

void
Program::Probe()
{
    if (m_realtimeNow)
    {
        m_lag.Add((m_realtimeNow() - Simulator::Now()).GetMicroSeconds(),
                  (Simulator::Now() - m_simStart).GetMicroSeconds());
    }
    if (g_stop)
    {
        Simulator::Stop();
        return;
    }
    if (g_reset)
    {
        g_reset = 0;
        m_resets++;
        ResetStats();
        m_motion.Start(); // (the first run's transfer starts now)
        g_dump = 1;
    }
    if (g_dump)
    {
        g_dump = 0;
        m_snapshots++;
        WriteFile(m_snapshotFile, StatsJson(false));
    }
    Simulator::Schedule(m_probeInterval, &Program::Probe, this);
}

void
Program::Live()
{
    std::ostringstream o;
    o << "{\"t\": " << Num(Simulator::Now().GetSeconds()) << ", \"ready\": "
      << (m_ready ? "true" : "false") << ", \"lag_max_ms\": " << Num(m_lag.MaxMs())
      << ", \"lag_mean_ms\": " << Num(m_lag.MeanMs())
      << ", \"cpu_s\": " << Num(CpuSeconds() - m_cpuStart)
      << ", \"wall_s\": " << Num(NowWallSeconds() - m_wallStart) << "}\n";
    WriteFile(m_liveFile, o.str());
    Simulator::Schedule(m_liveInterval, &Program::Live, this);
}

void
Program::Run()
{
    std::ostringstream taps;
    taps << "TAPS {";
    for (size_t i = 0; i < m_taps.size(); i++)
    {
        taps << (i ? ", " : "") << Quote(m_taps[i]->id) << ": " << Quote(MacStr(m_taps[i]->mac));
    }
    taps << "}";
    Say(taps.str());
    if (m_dryRun)
    {
        std::ostringstream radios;
        radios << "RADIOS {";
        for (size_t i = 0; i < m_radios.size(); i++)
        {
            radios << (i ? ", " : "") << Quote(m_radios[i]->id) << ": "
                   << Quote(MacStr(m_radios[i]->addr));
        }
        radios << "}";
        Say(radios.str());
        Say("DRY-RUN OK");
        return;
    }
    m_paced = DynamicCast<PacedSimulatorImpl>(Simulator::GetImplementation());
    if (m_paced)
    {
        m_realtimeNow = [this] { return m_paced->RealtimeNow(); };
    }
    else if (auto ns3 = DynamicCast<RealtimeSimulatorImpl>(Simulator::GetImplementation()))
    {
        m_realtimeNow = [ns3] { return ns3->RealtimeNow(); };
    }
    m_wallStart = NowWallSeconds();
    m_cpuStart = CpuSeconds();
    Simulator::ScheduleNow(&Program::Probe, this);
    Simulator::ScheduleNow(&Program::Live, this);
    Simulator::Schedule(MilliSeconds(10), &Program::ReadyCheck, this);
    g_writer.maxQueue = size_t(m_config.Num("tap_writer_queue_limit", 4096));
    g_writer.above = m_config.Bool("tap_writer_above_simulator", false);
    g_ledger.enabled = m_config.Bool("frame_ledger", true);
    g_ledger.settle = MilliSeconds(int64_t(m_config.Num("frame_ledger_settle_ms", 2000)));
    g_writer.Start();
    Simulator::Run();
    g_writer.Stop();
    WriteFile(m_statsFile, StatsJson(true));
    Say("STOPPED");
    Simulator::Destroy();
}

} // namespace qbchannel

int
main(int argc, char** argv)
{
    using namespace qbchannel;

    bool dryRun = false;
    std::string path;
    for (int i = 1; i < argc; i++)
    {
        std::string arg = argv[i];
        if (arg == "--version")
        {
            std::cout << VERSION << std::endl;
            return 0;
        }
        if (arg == "--dry-run")
        {
            dryRun = true;
        }
        else
        {
            path = arg;
        }
    }
    if (path.empty())
    {
        std::cerr << "usage: quicbed-ns3-channel [--dry-run] CONFIG.json" << std::endl;
        return 2;
    }
    std::ifstream in(path);
    if (!in)
    {
        Die("cannot read " + path);
    }
    std::stringstream text;
    text << in.rdbuf();
    Value config;
    try
    {
        config = qbjson::Parse(text.str());
    }
    catch (const std::exception& error)
    {
        Die(std::string("bad configuration: ") + error.what());
    }

    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2})
    {
        sigaction(sig, &action, nullptr);
    }

    if (!dryRun)
    {
        // Real-time practice: no page faults in the event loop (best effort; may be refused).
        mlockall(MCL_CURRENT | MCL_FUTURE);
        std::string realtime = config.Str("realtime", "paced");
        if (realtime != "paced" && realtime != "ns3")
        {
            Die("bad configuration: realtime must be \"paced\" or \"ns3\", not " + realtime);
        }
        PacedSimulatorImpl::spinNs = int64_t(config.Num("realtime_spin_us", 0)) * 1000;
        GlobalValue::Bind("SimulatorImplementationType",
                          StringValue(realtime == "paced" ? "qbchannel::PacedSimulatorImpl"
                                                          : "ns3::RealtimeSimulatorImpl"));
    }
    try
    {
        Program program(config, dryRun);
        program.Build();
        program.Run();
    }
    catch (const std::exception& error)
    {
        Die(std::string("bad configuration: ") + error.what());
    }
    return 0;
}
