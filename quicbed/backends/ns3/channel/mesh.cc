// Mesh nodes (see mesh.h).

#include "mesh.h"

#include "forward_up.h"
#include "ledger.h"

#include "wifi.h"

#include "ns3/address-utils.h"
#include "ns3/buffer.h"
#include "ns3/header.h"

#include <algorithm>

namespace qbchannel
{

/// Mesh header: final destination, origin, TTL, sequence number, inner protocol.
class QbMeshHeader : public Header
{
  public:
    Mac48Address dst, src;
    uint8_t ttl = 32;
    uint32_t seq = 0; // 24 bits used
    uint16_t proto = 0;

    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::QbMeshHeader")
                                .SetParent<Header>()
                                .SetGroupName("Quicbed")
                                .AddConstructor<QbMeshHeader>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }

    uint32_t GetSerializedSize() const override
    {
        return 18;
    }

    void Serialize(Buffer::Iterator it) const override
    {
        it.WriteHtonU16(proto);
        WriteTo(it, dst);
        WriteTo(it, src);
        it.WriteU8(ttl);
        it.WriteU8((seq >> 16) & 0xff);
        it.WriteHtonU16(seq & 0xffff);
    }

    uint32_t Deserialize(Buffer::Iterator it) override
    {
        proto = it.ReadNtohU16();
        ReadFrom(it, dst);
        ReadFrom(it, src);
        ttl = it.ReadU8();
        seq = uint32_t(it.ReadU8()) << 16;
        seq |= it.ReadNtohU16();
        return 18;
    }

    void Print(std::ostream& os) const override
    {
        os << "mesh dst=" << dst << " src=" << src << " ttl=" << +ttl << " seq=" << seq;
    }
};

NS_OBJECT_ENSURE_REGISTERED(QbMeshHeader);

void
MeshRelay::Attach()
{
    tap->dev->SetReceiveCallback(MakeCallback(&IgnoreRx));
    tap->dev->SetPromiscReceiveCallback(MakeCallback(&MeshRelay::FromTap, this));
    for (auto radio : radios)
    {
        radio->dev->SetReceiveCallback(MakeCallback(&IgnoreRx));
        SetForwardUpCallback(radio->dev, MakeCallback(&MeshRelay::FromRadio, this));
    }
}

void
MeshRelay::ResetStats()
{
    delivered = forwarded = noRoute = ttlDrops = duplicates = notPeer = broadcasts = 0;
}

void
MeshRelay::Flood(Ptr<const Packet> inner, const QbMeshHeader& header)
{
    for (auto radio : radios)
    {
        Ptr<Packet> p = inner->Copy();
        p->AddHeader(header);
        radio->Enqueue(p, radio->addr, Mac48Address::GetBroadcast(), PROTO_MESH);
    }
}

bool
MeshRelay::FromTap(Ptr<NetDevice>,
                   Ptr<const Packet> packet,
                   uint16_t proto,
                   const Address& fromAddr,
                   const Address& toAddr,
                   NetDevice::PacketType)
{
    tap->fromNs++;
    QbMeshHeader header;
    header.src = Mac48Address::ConvertFrom(fromAddr);
    header.dst = Mac48Address::ConvertFrom(toAddr);
    header.proto = proto;
    if (header.src != tap->mac)
    {
        tap->foreignSource++;
        return true;
    }
    g_ledger.Enter(packet, proto, header.dst);
    if (header.dst.IsGroup())
    {
        header.seq = (++m_seq) & 0xffffff;
        broadcasts++;
        Flood(packet, header);
        return true;
    }
    Route(packet->Copy(), header);
    return true;
}

void
MeshRelay::Route(Ptr<Packet> inner, const QbMeshHeader& header)
{
    auto it = routes.find(header.dst);
    if (it == routes.end())
    {
        noRoute++;
        g_ledger.Dropped(inner, header.proto, Framing::IP, "mesh_no_route");
        return;
    }
    inner->AddHeader(header);
    WifiPort* radio = radios[it->second.first];
    radio->Enqueue(inner, radio->addr, it->second.second, PROTO_MESH);
}

bool
MeshRelay::Seen(const QbMeshHeader& header)
{
    auto& recent = m_seen[header.src];
    if (std::find(recent.begin(), recent.end(), header.seq) != recent.end())
    {
        return true;
    }
    recent.push_back(header.seq);
    if (recent.size() > 64)
    {
        recent.pop_front();
    }
    return false;
}

bool
MeshRelay::FromRadio(Ptr<NetDevice> dev,
                     Ptr<const Packet> packet,
                     uint16_t proto,
                     const Address& fromAddr,
                     const Address& toAddr,
                     NetDevice::PacketType type)
{
    if (proto != PROTO_MESH || type == NetDevice::NS3_PACKET_OTHERHOST)
    {
        return true;
    }
    WifiPort* radio = nullptr;
    for (auto r : radios)
    {
        if (r->dev == dev)
        {
            radio = r;
        }
    }
    Mac48Address from = Mac48Address::ConvertFrom(fromAddr);
    if (std::find(radio->peers.begin(), radio->peers.end(), from) == radio->peers.end())
    {
        notPeer++; // heard, but not a peer link of ours (like an unpeered 802.11s neighbour)
        g_ledger.Dropped(packet, proto, Framing::IP, "mesh_not_peer");
        return true;
    }
    radio->rxUp++;
    Ptr<Packet> inner = packet->Copy();
    QbMeshHeader header;
    inner->RemoveHeader(header);
    Port out;
    out.tap = tap;
    if (header.dst.IsGroup())
    {
        if (header.src == tap->mac || Seen(header))
        {
            duplicates++;
            return true;
        }
        delivered++;
        out.Send(inner->Copy(), header.src, header.dst, header.proto);
        if (header.ttl > 1)
        {
            header.ttl--;
            Flood(inner, header);
        }
        return true;
    }
    if (header.dst == tap->mac)
    {
        delivered++;
        out.Send(inner, header.src, header.dst, header.proto);
        return true;
    }
    if (header.ttl <= 1)
    {
        ttlDrops++;
        g_ledger.Dropped(inner, header.proto, Framing::IP, "mesh_ttl");
        return true;
    }
    header.ttl--;
    forwarded++;
    Route(inner, header);
    return true;
}

} // namespace qbchannel
