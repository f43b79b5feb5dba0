// One simulated 802.11n/ac cell (no real time, no TAPs) for tests/unit/test_skimming_receivers.py:
// the AP sends bursts to every station and every station to the AP, on the channel program's
// QbYansWifiPhy with skimming on or off, and a frame error model on each station. It prints
// one JSON line: a digest of every PHY state change of every radio (start, duration, state:
// receptions, CCA, transmissions and so every backoff and IFS) and of every frame the MACs
// delivered up (when, where, how long), with the counts behind it. FRAME_ERRORS 0 leaves the
// stations without the error model (skimming radios then judge another radio's MPDUs only up
// to the first received: skim.h).
//
//   skim_cell SKIM STANDARD MANAGER STATIONS SECONDS FRAME_ERRORS   e.g. skim_cell 1 802.11ac constant 8 2 1

#include "loss.h"
#include "skim.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/mobility-helper.h"
#include "ns3/node-container.h"
#include "ns3/packet.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"
#include "ns3/ssid.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"
#include "ns3/wifi-helper.h"
#include "ns3/wifi-mac-helper.h"
#include "ns3/wifi-net-device.h"
#include "ns3/wifi-phy-state-helper.h"
#include "ns3/yans-wifi-helper.h"

#include <iostream>
#include <string>

using namespace qbchannel;

namespace
{

uint64_t digest = 1469598103934665603ULL; // FNV-1a
uint64_t stateChanges = 0, delivered = 0;

void
Mix(uint64_t value)
{
    digest = (digest ^ value) * 1099511628211ULL;
}

void
OnState(uint32_t radio, Time start, Time duration, WifiPhyState state)
{
    stateChanges++;
    Mix(radio);
    Mix(start.GetTimeStep());
    Mix(duration.GetTimeStep());
    Mix(uint64_t(state));
}

bool
OnReceive(Ptr<NetDevice> device, Ptr<const Packet> packet, uint16_t, const Address&)
{
    delivered++;
    Mix(device->GetNode()->GetId());
    Mix(Simulator::Now().GetTimeStep());
    Mix(packet->GetSize());
    return true;
}

/// count frames of 1400 bytes from one device to another at once (the MAC aggregates them)
void
Burst(Ptr<WifiNetDevice> from, Address to, int count)
{
    for (int i = 0; i < count; i++)
    {
        from->Send(Create<Packet>(1400), to, 0x0800);
    }
}

} // namespace

int
main(int argc, char** argv)
{
    if (argc != 7)
    {
        std::cerr << "usage: skim_cell SKIM STANDARD MANAGER STATIONS SECONDS FRAME_ERRORS" << std::endl;
        return 2;
    }
    bool skim = std::string(argv[1]) == "1";
    std::string standard = argv[2], manager = argv[3];
    int stations = std::stoi(argv[4]);
    double seconds = std::stod(argv[5]);
    bool frameErrors = std::string(argv[6]) == "1";
    RngSeedManager::SetSeed(3);
    RngSeedManager::SetRun(7);

    NodeContainer ap(1), sta(stations);
    WifiHelper wifi;
    bool ac = standard == "802.11ac";
    wifi.SetStandard(ac ? WIFI_STANDARD_80211ac : WIFI_STANDARD_80211n);
    if (manager == "minstrel")
    {
        wifi.SetRemoteStationManager("ns3::MinstrelHtWifiManager");
    }
    else
    {
        wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager", "DataMode",
                                     StringValue(ac ? "VhtMcs7" : "HtMcs7"), "ControlMode",
                                     StringValue("OfdmRate6Mbps"));
    }
    YansWifiChannelHelper channel = YansWifiChannelHelper::Default();
    QbYansWifiPhyHelper phy;
    phy.SetChannel(channel.Create());
    phy.Set("SkimOthers", BooleanValue(skim));
    phy.Set("ChannelSettings", StringValue(ac ? "{42, 80, BAND_5GHZ, 0}" : "{36, 20, BAND_5GHZ, 0}"));
    WifiMacHelper mac;
    Ssid ssid("skim");
    mac.SetType("ns3::StaWifiMac", "Ssid", SsidValue(ssid));
    NetDeviceContainer staDevices = wifi.Install(phy, mac, sta);
    mac.SetType("ns3::ApWifiMac", "Ssid", SsidValue(ssid));
    NetDeviceContainer apDevices = wifi.Install(phy, mac, ap);
    wifi.AssignStreams(apDevices, 10);
    wifi.AssignStreams(staDevices, 100);

    MobilityHelper mobility; // stations on a line: the far ones hear the near ones weakly
    mobility.SetPositionAllocator("ns3::GridPositionAllocator", "MinX", DoubleValue(1.0), "DeltaX",
                                  DoubleValue(4.0), "GridWidth", UintegerValue(64));
    mobility.Install(NodeContainer(ap, sta));

    NetDeviceContainer all(apDevices, staDevices);
    for (uint32_t i = 0; i < all.GetN(); i++)
    {
        Ptr<WifiNetDevice> device = DynamicCast<WifiNetDevice>(all.Get(i));
        device->SetReceiveCallback(MakeCallback(&OnReceive));
        device->GetPhy()->GetState()->TraceConnectWithoutContext("State", MakeBoundCallback(&OnState, i));
        if (i > 0 && frameErrors) // every station loses 10 % of the AP's data frames on top of the channel's own errors
        {
            Ptr<QbFrameErrorModel> errors = CreateObject<QbFrameErrorModel>();
            errors->rates[Mac48Address::ConvertFrom(apDevices.Get(0)->GetAddress())] = 0.1;
            DynamicCast<QbYansWifiPhy>(device->GetPhy())->SetPostReceptionErrorModel(errors);
        }
    }
    Ptr<WifiNetDevice> apDevice = DynamicCast<WifiNetDevice>(apDevices.Get(0));
    for (Time at = MilliSeconds(300); at < Seconds(seconds); at += MilliSeconds(20))
    {
        for (int i = 0; i < stations; i++)
        {
            Ptr<WifiNetDevice> station = DynamicCast<WifiNetDevice>(staDevices.Get(i));
            Simulator::Schedule(at + MicroSeconds(37 * i), &Burst, apDevice, station->GetAddress(), 24);
            Simulator::Schedule(at + MicroSeconds(53 * i), &Burst, station, apDevice->GetAddress(), 2);
        }
    }
    Simulator::Stop(Seconds(seconds));
    Simulator::Run();

    uint64_t received = 0, skimmed = 0, judged = 0, drawn = 0;
    for (uint32_t i = 0; i < all.GetN(); i++)
    {
        Ptr<QbYansWifiPhy> radio = DynamicCast<QbYansWifiPhy>(DynamicCast<WifiNetDevice>(all.Get(i))->GetPhy());
        received += radio->counters.received;
        skimmed += radio->counters.skimmed;
        judged += radio->counters.mpdusJudged;
        drawn += radio->counters.mpdusDrawn;
    }
    std::cout << "{\"digest\": \"" << std::hex << digest << std::dec << "\", \"state_changes\": " << stateChanges
              << ", \"delivered\": " << delivered << ", \"psdus_received\": " << received
              << ", \"psdus_skimmed\": " << skimmed << ", \"mpdus_judged\": " << judged
              << ", \"mpdus_drawn_only\": " << drawn << "}" << std::endl;
    Simulator::Destroy();
    return 0;
}
