// Mesh nodes: MeshRelay joins a mesh point's TAP to its ad-hoc radios and carries frames hop
// by hop under QbMeshHeader (final destination, origin, TTL, sequence number).
#pragma once

#include "common.h"
#include "ports.h"

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace qbchannel
{

class QbMeshHeader; // mesh.cc

/// A mesh point: its TAP (the node's identity) and its radios, one per channel.
class MeshRelay
{
  public:
    std::string name;
    TapPort* tap = nullptr;
    std::vector<WifiPort*> radios;
    // final destination (identity MAC) -> (radio index, next hop radio MAC)
    std::map<Mac48Address, std::pair<size_t, Mac48Address>> routes;
    uint64_t delivered = 0, forwarded = 0, noRoute = 0, ttlDrops = 0, duplicates = 0,
             notPeer = 0, broadcasts = 0;

    void Attach();
    void ResetStats();

  private:
    uint32_t m_seq = 0;
    std::map<Mac48Address, std::deque<uint32_t>> m_seen;

    void Flood(Ptr<const Packet> inner, const QbMeshHeader& header);

    bool FromTap(Ptr<NetDevice>,
                 Ptr<const Packet> packet,
                 uint16_t proto,
                 const Address& fromAddr,
                 const Address& toAddr,
                 NetDevice::PacketType);

    void Route(Ptr<Packet> inner, const QbMeshHeader& header);
    bool Seen(const QbMeshHeader& header);

    bool FromRadio(Ptr<NetDevice> dev,
                   Ptr<const Packet> packet,
                   uint16_t proto,
                   const Address& fromAddr,
                   const Address& toAddr,
                   NetDevice::PacketType type);
};

} // namespace qbchannel
