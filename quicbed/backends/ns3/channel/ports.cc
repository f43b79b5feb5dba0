// Ports, bridges and stations (see ports.h).

#include "ports.h"

#include "forward_up.h"
#include "ledger.h"
#include "tap.h"
#include "wifi.h"
#include "wired.h"

#include "ns3/ethernet-header.h"
#include "ns3/llc-snap-header.h"
#include "ns3/simulator.h"

#include <cstdlib>
#include <vector>

namespace qbchannel
{

Ptr<NetDevice>
Port::Device() const
{
    if (tap)
    {
        return tap->dev;
    }
    if (wifi)
    {
        return wifi->dev;
    }
    return wire.wire->dev[wire.end];
}

bool
Port::Send(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto) const
{
    if (tap)
    {
        if (tap->fd < 0)
        {
            g_ledger.Dropped(p, proto, Framing::IP, "tap_closed");
            return false;
        }
        std::vector<uint8_t> frame(14 + p->GetSize());
        dst.CopyTo(frame.data());
        src.CopyTo(frame.data() + 6);
        frame[12] = proto >> 8;
        frame[13] = proto & 0xff;
        p->CopyData(frame.data() + 14, p->GetSize());
        tap->toNs++;
        g_ledger.Left(p, proto);
        g_writer.Write(tap->fd, std::move(frame), &tap->writeErrors);
        return true;
    }
    if (wifi)
    {
        return wifi->Enqueue(p, src, dst, proto);
    }
    {
        // account for the Ethernet header on the wire, as tbf/netem do
        EthernetHeader eth(false);
        eth.SetSource(src);
        eth.SetDestination(dst);
        eth.SetLengthType(proto);
        p->AddHeader(eth);
        g_ledger.Queued(p, proto, Framing::ETHERNET, &wire.wire->held[wire.end]);
        return wire.wire->dev[wire.end]->SendFrom(p, src, dst, proto);
    }
}

bool
IgnoreRx(Ptr<NetDevice>, Ptr<const Packet>, uint16_t, const Address&)
{
    return true;
}

std::vector<uint8_t>
Bytes(Ptr<const Packet> packet)
{
    std::vector<uint8_t> bytes(packet->GetSize());
    packet->CopyData(bytes.data(), bytes.size());
    return bytes;
}

Ptr<Packet>
Unwrap(const Port& port, Ptr<const Packet> packet)
{
    Ptr<Packet> copy = packet->Copy();
    if (port.wire.wire)
    {
        EthernetHeader eth(false);
        copy->RemoveHeader(eth);
    }
    return copy;
}

void
Switch::Attach()
{
    for (auto& port : ports)
    {
        Ptr<NetDevice> dev = port.Device();
        dev->SetReceiveCallback(MakeCallback(&IgnoreRx));
        if (port.wifi)
        {
            SetForwardUpCallback(port.wifi->dev, MakeCallback(&Switch::Receive, this));
        }
        else
        {
            dev->SetPromiscReceiveCallback(MakeCallback(&Switch::Receive, this)); // TAPs and cables
        }
    }
    for (size_t i = 0; announceAssociations && i < ports.size(); i++)
    {
        if (ports[i].wifi && ports[i].wifi->role == "ap")
        {
            ports[i].wifi->mac->TraceConnectWithoutContext(
                "AssociatedSta",
                MakeCallback(&Switch::OnAssociated, this).Bind(i));
        }
    }
}

void
Switch::OnAssociated(size_t radio, uint16_t /*aid*/, Mac48Address station)
{
    m_table[station] = radio;
    // hostapd's Layer 2 Update frame (IEEE 802.2 XID, as in 802.11F): broadcast, from the
    // station, an 802.3 length of 6
    static const uint8_t xid[6] = {0x00, 0x01, 0xaf, 0x81, 0x01, 0x00};
    for (size_t i = 0; i < ports.size(); i++)
    {
        if (!ports[i].wifi)
        {
            ports[i].Send(Create<Packet>(xid, sizeof(xid)), station, Mac48Address::GetBroadcast(), sizeof(xid));
        }
    }
}

void
Switch::EnableFastAck()
{
    size_t radio = 0;
    while (radio < ports.size() && !(ports[radio].wifi && ports[radio].wifi->role == "ap"))
    {
        radio++;
    }
    if (radio == ports.size())
    {
        Die("fastack on " + name + ", which has no access-point radio");
    }
    m_fastAckRadio = radio;
    auto packet = [](const std::vector<uint8_t>& ip) { return Create<Packet>(ip.data(), ip.size()); };
    fastAck = std::make_unique<FastAck>(
        [this, radio, packet](const std::vector<uint8_t>& ip, Mac48Address src, Mac48Address dst) {
            return ports[radio].Send(packet(ip), src, dst, PROTO_IPV4);
        },
        [this, packet](size_t port, const std::vector<uint8_t>& ip, Mac48Address src, Mac48Address dst) {
            ports[port].Send(packet(ip), src, dst, PROTO_IPV4);
        });
    ports[radio].wifi->mac->TraceConnectWithoutContext("DroppedMpdu", MakeCallback(&Switch::OnRadioDrop, this));
    ports[radio].wifi->mac->TraceConnectWithoutContext("AckedMpdu", MakeCallback(&Switch::OnRadioAcked, this));
}

namespace
{

/// The IPv4 packet behind an LLC/SNAP header (false for anything else).
bool
LlcIp(Ptr<const Packet> msdu, std::vector<uint8_t>& ip)
{
    Ptr<Packet> packet = msdu->Copy();
    LlcSnapHeader llc;
    packet->RemoveHeader(llc);
    if (llc.GetType() != PROTO_IPV4)
    {
        return false;
    }
    ip = Bytes(packet);
    return true;
}

/// The IPv4 packets one data MPDU carries: one, or those of an A-MSDU's subframes.
std::vector<std::vector<uint8_t>>
MpduIps(Ptr<const WifiMpdu> mpdu)
{
    std::vector<std::vector<uint8_t>> ips;
    std::vector<uint8_t> ip;
    for (const auto& msdu : Msdus(mpdu))
    {
        if (LlcIp(msdu, ip))
        {
            ips.push_back(std::move(ip));
        }
    }
    return ips;
}

} // namespace

void
Switch::OnRadioDrop(WifiMacDropReason reason, Ptr<const WifiMpdu> mpdu)
{
    if (reason == WIFI_MAC_DROP_FAILED_ENQUEUE)
    {
        return; // never queued: the accelerator saw the radio refuse it
    }
    for (const auto& ip : MpduIps(mpdu))
    {
        fastAck->Dropped(ip, reason == WIFI_MAC_DROP_EXPIRED_LIFETIME);
    }
}

void
Switch::OnRadioAcked(Ptr<const WifiMpdu> mpdu)
{
    for (const auto& ip : MpduIps(mpdu))
    {
        fastAck->Delivered(ip);
    }
}

bool
Switch::Receive(Ptr<NetDevice> dev,
                Ptr<const Packet> packet,
                uint16_t proto,
                const Address& fromAddr,
                const Address& toAddr,
                NetDevice::PacketType type)
{
    if (proto == PROTO_WARMUP)
    {
        return true;
    }
    size_t in = 0;
    while (in < ports.size() && ports[in].Device() != dev)
    {
        in++;
    }
    Mac48Address from = Mac48Address::ConvertFrom(fromAddr);
    Mac48Address to = Mac48Address::ConvertFrom(toAddr);
    if (ports[in].tap)
    {
        ports[in].tap->fromNs++;
        g_ledger.Enter(packet, proto, to);
    }
    received++;
    if (ports[in].wifi)
    {
        ports[in].wifi->rxUp++;
    }
    static const bool debug = getenv("QUICBED_NS3_DEBUG") != nullptr;
    if (debug) // one line per bridged frame on stderr (channel.err)
    {
        std::cerr << Simulator::Now().GetSeconds() << " " << name << " in=" << in << " " << from
                  << " -> " << to << " proto=" << proto << " type=" << type << std::endl;
    }
    m_table[from] = in;
    bool tcpCandidate = fastAck && proto == PROTO_IPV4;
    if (tcpCandidate && in == m_fastAckRadio && fastAck->FromStation(Bytes(packet)))
    {
        g_ledger.Dropped(packet, proto, Framing::IP, "fastack_consumed");
        return true; // a station's ACK the accelerator consumed
    }
    Framing framing = ports[in].wire.wire ? Framing::ETHERNET : Framing::IP;
    if (!to.IsGroup())
    {
        auto it = m_table.find(to);
        if (it != m_table.end())
        {
            if (it->second != in)
            {
                Ptr<Packet> frame = Unwrap(ports[in], packet);
                if (tcpCandidate && it->second == m_fastAckRadio)
                {
                    g_ledger.Reached(frame, proto, Framing::IP, FrameLedger::AT_ACCELERATOR);
                    if (fastAck->FromSender(Bytes(frame), from, to, in))
                    {
                        // queued for the radio by the accelerator, or answered by it
                        g_ledger.DroppedIfAt(frame, proto, FrameLedger::AT_ACCELERATOR, "fastack_answered");
                        return true;
                    }
                }
                ports[it->second].Send(frame, from, to, proto);
            }
            else
            {
                sameSegment++;
                g_ledger.Dropped(packet, proto, framing, "same_segment");
            }
            return true;
        }
        flooded++;
        if (ports.size() > 2)
        {
            g_ledger.Copied(packet, proto, framing, ports.size() - 2);
        }
        else if (ports.size() < 2)
        {
            g_ledger.Dropped(packet, proto, framing, "no_port");
        }
    }
    for (size_t i = 0; i < ports.size(); i++)
    {
        if (i != in)
        {
            ports[i].Send(Unwrap(ports[in], packet), from, to, proto);
        }
    }
    return true;
}

void
StationRelay::Attach()
{
    tap->dev->SetReceiveCallback(MakeCallback(&IgnoreRx));
    tap->dev->SetPromiscReceiveCallback(MakeCallback(&StationRelay::FromTap, this));
    radio->dev->SetReceiveCallback(MakeCallback(&IgnoreRx));
    SetForwardUpCallback(radio->dev, MakeCallback(&StationRelay::FromRadio, this));
}

bool
StationRelay::FromTap(Ptr<NetDevice>,
                      Ptr<const Packet> packet,
                      uint16_t proto,
                      const Address& fromAddr,
                      const Address& toAddr,
                      NetDevice::PacketType)
{
    tap->fromNs++;
    if (Mac48Address::ConvertFrom(fromAddr) != radio->addr)
    {
        tap->foreignSource++; // a 3-address station sends its own frames only
        return true;
    }
    g_ledger.Enter(packet, proto, Mac48Address::ConvertFrom(toAddr));
    radio->Enqueue(packet->Copy(), radio->addr, Mac48Address::ConvertFrom(toAddr), proto);
    return true;
}

bool
StationRelay::FromRadio(Ptr<NetDevice>,
                        Ptr<const Packet> packet,
                        uint16_t proto,
                        const Address& fromAddr,
                        const Address& toAddr,
                        NetDevice::PacketType type)
{
    if (proto == PROTO_WARMUP || type == NetDevice::NS3_PACKET_OTHERHOST)
    {
        return true;
    }
    radio->rxUp++;
    if (radio->delivered)
    {
        radio->delivered(packet->GetSize());
    }
    Port out;
    out.tap = tap;
    out.Send(packet->Copy(),
             Mac48Address::ConvertFrom(fromAddr),
             Mac48Address::ConvertFrom(toAddr),
             proto);
    return true;
}

} // namespace qbchannel
