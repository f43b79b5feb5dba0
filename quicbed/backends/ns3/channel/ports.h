// Ports and the nodes that forward between them: TapPort, WirePort, Port (a TAP, radio or
// wire end, with the send path to each), Switch (a learning bridge: access point, Ethernet
// switch, a host's wired interface) and StationRelay (a station). Mesh nodes are in mesh.h.
#pragma once

#include "common.h"
#include "fastack.h"
#include "tap.h"

#include "ns3/address.h"
#include "ns3/fd-net-device.h"
#include "ns3/mac48-address.h"
#include "ns3/net-device.h"
#include "ns3/packet.h"
#include "ns3/wifi-mac.h"
#include "ns3/wifi-mpdu.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace qbchannel
{

struct Wire;
struct WifiPort;

struct TapPort
{
    std::string id;
    std::string ns;
    std::string ifname;
    int fd = -1;
    Mac48Address mac;
    bool macFromRadio = false;
    Ptr<QbTapDevice> dev;
    uint64_t fromNs = 0, toNs = 0, writeErrors = 0, foreignSource = 0;
};

struct WirePort
{
    Wire* wire;
    int end; // 0 = node1 side, 1 = node2 side
};

// A port of a forwarding node: exactly one of tap, wifi, wire is set.
struct Port
{
    TapPort* tap = nullptr;
    WifiPort* wifi = nullptr;
    WirePort wire{nullptr, 0};

    Ptr<NetDevice> Device() const;
    /// False when the frame was not taken (a full radio queue, a closed TAP).
    bool Send(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto) const;
};

/// The plain receive callback of every port device: frames are handled by the promiscuous one.
bool IgnoreRx(Ptr<NetDevice>, Ptr<const Packet>, uint16_t, const Address&);

/// The packet's bytes.
std::vector<uint8_t> Bytes(Ptr<const Packet> packet);

/// Strips what Port::Send added on a wire; returns a private copy of the packet.
Ptr<Packet> Unwrap(const Port& port, Ptr<const Packet> packet);

/// A learning bridge (access point, switch, a host's wired interface).
class Switch
{
  public:
    std::string name;
    std::vector<Port> ports;
    uint64_t flooded = 0, sameSegment = 0, received = 0;
    /// an access point's TCP ACK acceleration (null: off)
    std::unique_ptr<FastAck> fastAck;
    /// an access point whose stations roam: on each association it learns the station on its
    /// radio and sends a Layer 2 Update frame from it to its cables, as hostapd does, so that
    /// the bridges behind it learn where the station is now
    bool announceAssociations = false;

    void Attach();
    /// Turns on TCP ACK acceleration on the switch's access-point radio (fastack.h).
    void EnableFastAck();

  private:
    std::map<Mac48Address, size_t> m_table;
    size_t m_fastAckRadio = 0; // the port of the radio the accelerator serves

    /// The AP radio's MAC gave up on a frame: the accelerator sends it again if it holds it.
    void OnRadioDrop(WifiMacDropReason reason, Ptr<const WifiMpdu> mpdu);
    /// A station's MAC acknowledged a frame: the accelerator may acknowledge it to the sender.
    void OnRadioAcked(Ptr<const WifiMpdu> mpdu);
    /// A station associated with the AP radio of port radio (announceAssociations).
    void OnAssociated(size_t radio, uint16_t aid, Mac48Address station);

    bool Receive(Ptr<NetDevice> dev,
                 Ptr<const Packet> packet,
                 uint16_t proto,
                 const Address& fromAddr,
                 const Address& toAddr,
                 NetDevice::PacketType type);
};

/// A station: the namespace's TAP is the STA radio (same MAC).
class StationRelay
{
  public:
    std::string name;
    TapPort* tap = nullptr;
    WifiPort* radio = nullptr;

    void Attach();

  private:
    bool FromTap(Ptr<NetDevice>,
                 Ptr<const Packet> packet,
                 uint16_t proto,
                 const Address& fromAddr,
                 const Address& toAddr,
                 NetDevice::PacketType);

    bool FromRadio(Ptr<NetDevice>,
                   Ptr<const Packet> packet,
                   uint16_t proto,
                   const Address& fromAddr,
                   const Address& toAddr,
                   NetDevice::PacketType type);
};

} // namespace qbchannel
