// One AP, N stations, a saturated UDP download to each, in simulated time (bench/ns3_versions.py).
// Written against ns-3's public API only, so that one source builds with every release compared.
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/wifi-module.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>

using namespace ns3;

static uint64_t g_ppdus = 0, g_mpdus = 0;

static void
OnMpdu(Ptr<const Packet>, double)
{
    g_mpdus++; // every MPDU sent, control frames too
}

static void
OnPpdu(WifiConstPsduMap, WifiTxVector, double)
{
    g_ppdus++;
}

int
main(int argc, char** argv)
{
    uint32_t stations = 10;
    double seconds = 5;
    std::string phyName = "ac20";
    uint32_t run = 1;
    CommandLine cmd;
    cmd.AddValue("stations", "stations in the cell", stations);
    cmd.AddValue("seconds", "simulated seconds measured (after 2 s of start-up)", seconds);
    cmd.AddValue("phy", "n20, ac20 or ac80", phyName);
    cmd.AddValue("run", "ns-3 run number", run);
    cmd.Parse(argc, argv);
    RngSeedManager::SetRun(run);
    bool ht = phyName == "n20";
    bool wide = phyName == "ac80";
    double phyMbps = ht ? 65 : (wide ? 390 : 78);

    NodeContainer ap, sta;
    ap.Create(1);
    sta.Create(stations);
    YansWifiChannelHelper channel = YansWifiChannelHelper::Default();
    YansWifiPhyHelper phy;
    phy.SetChannel(channel.Create());
    phy.Set("ChannelSettings", StringValue(wide ? "{42, 80, BAND_5GHZ, 0}" : "{36, 20, BAND_5GHZ, 0}"));
    WifiHelper wifi;
    wifi.SetStandard(ht ? WIFI_STANDARD_80211n : WIFI_STANDARD_80211ac);
    wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager",
                                 "DataMode", StringValue(ht ? "HtMcs7" : (wide ? "VhtMcs9" : "VhtMcs7")),
                                 "ControlMode", StringValue(ht ? "HtMcs0" : "VhtMcs0"));
    WifiMacHelper mac;
    Ssid ssid("bench");
    mac.SetType("ns3::StaWifiMac", "Ssid", SsidValue(ssid));
    NetDeviceContainer staDevices = wifi.Install(phy, mac, sta);
    mac.SetType("ns3::ApWifiMac", "Ssid", SsidValue(ssid));
    NetDeviceContainer apDevice = wifi.Install(phy, mac, ap);

    MobilityHelper mobility;
    Ptr<ListPositionAllocator> positions = CreateObject<ListPositionAllocator>();
    positions->Add(Vector(0, 0, 0));
    for (uint32_t i = 0; i < stations; i++)
    {
        double angle = 2 * M_PI * i / stations;
        positions->Add(Vector(5 * std::cos(angle), 5 * std::sin(angle), 0));
    }
    mobility.SetPositionAllocator(positions);
    mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel");
    mobility.Install(ap);
    mobility.Install(sta);

    InternetStackHelper internet;
    internet.Install(ap);
    internet.Install(sta);
    Ipv4AddressHelper addresses;
    addresses.SetBase("10.1.0.0", "255.255.0.0");
    addresses.Assign(apDevice);
    Ipv4InterfaceContainer staAddresses = addresses.Assign(staDevices);

    std::vector<Ptr<PacketSink>> sinks;
    for (uint32_t i = 0; i < stations; i++)
    {
        PacketSinkHelper sink("ns3::UdpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), 9));
        ApplicationContainer sinkApp = sink.Install(sta.Get(i));
        sinkApp.Start(Seconds(0.5));
        sinks.push_back(DynamicCast<PacketSink>(sinkApp.Get(0)));
        OnOffHelper source("ns3::UdpSocketFactory", InetSocketAddress(staAddresses.GetAddress(i), 9));
        source.SetConstantRate(DataRate(uint64_t(phyMbps * 1.2e6 / stations)), 1472);
        ApplicationContainer sourceApp = source.Install(ap.Get(0));
        sourceApp.Start(Seconds(1.0 + 0.001 * i));
    }
    Config::ConnectWithoutContext("/NodeList/*/DeviceList/*/$ns3::WifiNetDevice/Phy/PhyTxBegin", MakeCallback(&OnMpdu));
    Config::ConnectWithoutContext("/NodeList/*/DeviceList/*/$ns3::WifiNetDevice/Phy/PhyTxPsduBegin",
                                  MakeCallback(&OnPpdu));

    const double start = 2.0;
    uint64_t events0 = 0, bytes0 = 0, ppdus0 = 0, mpdus0 = 0;
    std::chrono::steady_clock::time_point wall0;
    std::clock_t cpu0 = 0;
    Simulator::Schedule(Seconds(start), [&]() {
        events0 = Simulator::GetEventCount();
        ppdus0 = g_ppdus;
        mpdus0 = g_mpdus;
        for (auto& s : sinks)
        {
            bytes0 += s->GetTotalRx();
        }
        wall0 = std::chrono::steady_clock::now();
        cpu0 = std::clock();
    });
    Simulator::Stop(Seconds(start + seconds));
    Simulator::Run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    double cpu = double(std::clock() - cpu0) / CLOCKS_PER_SEC; // the process's CPU time: not what the hypervisor took
    uint64_t bytes = 0;
    for (auto& s : sinks)
    {
        bytes += s->GetTotalRx();
    }
    std::cout << "{\"stations\": " << stations << ", \"phy\": \"" << phyName << "\", \"run\": " << run
              << ", \"simulated_s\": " << seconds << ", \"wall_s\": " << wall << ", \"cpu_s\": " << cpu
              << ", \"events\": " << Simulator::GetEventCount() - events0
              << ", \"ppdus\": " << g_ppdus - ppdus0 << ", \"mpdus\": " << g_mpdus - mpdus0
              << ", \"goodput_mbps\": " << (bytes - bytes0) * 8 / seconds / 1e6 << "}" << std::endl;
    Simulator::Destroy();
    return 0;
}
