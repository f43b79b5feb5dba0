// One simulated 802.11n cell (no real time, no TAPs) for tests/unit/test_forward_up.py: an AP
// sends FRAMES frames of one MPDU to each of two stations, to sta2 then to sta1 1 ms later, so
// the AP numbers both stations' frames alike. sta1 loses the first copy of its frame with
// sequence number 5 (a post-reception error model), so the AP sends it again with the Retry
// bit, just after sta2's frame with the same number. The stations' frames are received as the
// channel's relays receive them (HOW: "forward-up", the channel's SetForwardUpCallback, or
// "promiscuous", ns-3's SetPromiscReceiveCallback alone), counting the frames for the station
// and ignoring those for other hosts. It prints one JSON line: per station the frames the AP's
// MAC saw acknowledged and the frames delivered, and how many copies the error model spoiled.
//
//   forward_up_cell HOW FRAMES        e.g. forward_up_cell forward-up 20

#include "forward_up.h"

#include "ns3/double.h"
#include "ns3/error-model.h"
#include "ns3/mobility-helper.h"
#include "ns3/node-container.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"
#include "ns3/ssid.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"
#include "ns3/wifi-helper.h"
#include "ns3/wifi-mac-header.h"
#include "ns3/wifi-mac.h"
#include "ns3/wifi-mpdu.h"
#include "ns3/yans-wifi-helper.h"

#include <iostream>
#include <map>
#include <string>

using namespace qbchannel;

namespace
{

constexpr uint16_t SPOILED_SEQUENCE = 5;

/// Spoils the first copy of one data frame for one station (its sequence number, no Retry bit).
class FirstCopyLost : public ErrorModel
{
  public:
    Mac48Address station;
    uint32_t spoiled = 0;

  private:
    bool DoCorrupt(Ptr<Packet> packet) override
    {
        WifiMacHeader header;
        packet->PeekHeader(header);
        bool hit = header.IsQosData() && header.GetAddr1() == station && !header.IsRetry() &&
                   header.GetSequenceNumber() == SPOILED_SEQUENCE;
        spoiled += hit;
        return hit;
    }

    void DoReset() override
    {
    }
};

std::map<Mac48Address, uint32_t> acked, delivered;

void
OnAcked(Ptr<const WifiMpdu> mpdu)
{
    if (mpdu->GetHeader().IsQosData())
    {
        acked[mpdu->GetHeader().GetAddr1()]++;
    }
}

/// what a relay does (ports.cc): frames for other hosts are ignored
bool
OnForwardedUp(Ptr<NetDevice> device, Ptr<const Packet>, uint16_t, const Address&, const Address&,
              NetDevice::PacketType type)
{
    if (type != NetDevice::NS3_PACKET_OTHERHOST)
    {
        delivered[Mac48Address::ConvertFrom(device->GetAddress())]++;
    }
    return true;
}

bool
IgnoreRx(Ptr<NetDevice>, Ptr<const Packet>, uint16_t, const Address&)
{
    return true;
}

void
SendOne(Ptr<WifiNetDevice> ap, Address to)
{
    ap->Send(Create<Packet>(1000), to, 0x0800);
}

} // namespace

int
main(int argc, char** argv)
{
    if (argc != 3)
    {
        std::cerr << "usage: forward_up_cell forward-up|promiscuous FRAMES" << std::endl;
        return 2;
    }
    bool forwardUp = std::string(argv[1]) == "forward-up";
    int frames = std::stoi(argv[2]);
    RngSeedManager::SetSeed(3);
    RngSeedManager::SetRun(7);

    NodeContainer ap(1), sta(2);
    WifiHelper wifi;
    wifi.SetStandard(WIFI_STANDARD_80211n);
    wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager", "DataMode", StringValue("HtMcs7"),
                                 "ControlMode", StringValue("OfdmRate6Mbps"));
    YansWifiChannelHelper channel = YansWifiChannelHelper::Default();
    YansWifiPhyHelper phy;
    phy.SetChannel(channel.Create());
    phy.Set("ChannelSettings", StringValue("{36, 20, BAND_5GHZ, 0}"));
    WifiMacHelper mac;
    Ssid ssid("forward-up");
    mac.SetType("ns3::StaWifiMac", "Ssid", SsidValue(ssid));
    NetDeviceContainer staDevices = wifi.Install(phy, mac, sta);
    mac.SetType("ns3::ApWifiMac", "Ssid", SsidValue(ssid));
    NetDeviceContainer apDevices = wifi.Install(phy, mac, ap);
    wifi.AssignStreams(apDevices, 10);
    wifi.AssignStreams(staDevices, 100);
    MobilityHelper mobility;
    mobility.SetPositionAllocator("ns3::GridPositionAllocator", "MinX", DoubleValue(1.0), "DeltaX",
                                  DoubleValue(3.0), "GridWidth", UintegerValue(8));
    mobility.Install(NodeContainer(ap, sta));

    Ptr<WifiNetDevice> apDevice = DynamicCast<WifiNetDevice>(apDevices.Get(0));
    apDevice->GetMac()->TraceConnectWithoutContext("AckedMpdu", MakeCallback(&OnAcked));
    Ptr<WifiNetDevice> sta1 = DynamicCast<WifiNetDevice>(staDevices.Get(0));
    Ptr<WifiNetDevice> sta2 = DynamicCast<WifiNetDevice>(staDevices.Get(1));
    for (Ptr<WifiNetDevice> station : {sta1, sta2})
    {
        station->SetReceiveCallback(MakeCallback(&IgnoreRx));
        if (forwardUp)
        {
            SetForwardUpCallback(station, MakeCallback(&OnForwardedUp));
        }
        else
        {
            station->SetPromiscReceiveCallback(MakeCallback(&OnForwardedUp));
        }
    }
    Ptr<FirstCopyLost> errors = CreateObject<FirstCopyLost>();
    errors->station = Mac48Address::ConvertFrom(sta1->GetAddress());
    sta1->GetPhy()->SetPostReceptionErrorModel(errors);

    // one frame at a time, so the AP neither aggregates nor sets up a block-ack agreement
    for (int i = 0; i < frames; i++)
    {
        Time at = MilliSeconds(500 + 2 * i);
        Simulator::Schedule(at, &SendOne, apDevice, sta2->GetAddress());
        Simulator::Schedule(at + MilliSeconds(1), &SendOne, apDevice, sta1->GetAddress());
    }
    Simulator::Stop(MilliSeconds(600 + 2 * frames));
    Simulator::Run();

    std::cout << "{\"spoiled\": " << errors->spoiled;
    for (auto [name, device] : {std::make_pair("sta1", sta1), std::make_pair("sta2", sta2)})
    {
        Mac48Address address = Mac48Address::ConvertFrom(device->GetAddress());
        std::cout << ", \"" << name << "\": {\"acked\": " << acked[address] << ", \"delivered\": " << delivered[address]
                  << "}";
    }
    std::cout << "}" << std::endl;
    Simulator::Destroy();
    return 0;
}
