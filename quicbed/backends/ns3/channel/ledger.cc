// The frame ledger (see ledger.h).

#include "ledger.h"

#include "packet_view.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <vector>

namespace qbchannel
{

FrameLedger g_ledger;

namespace
{

constexpr size_t LLC_BYTES = 8;
constexpr size_t MESH_BYTES = 18;     // QbMeshHeader, its inner ethertype first
constexpr size_t TRANSPORT_BYTES = 24; // of the transport header, in the key: ports, TCP's
                                       // sequence and ACK numbers, UDP's length and checksum
constexpr size_t VANISHED_KEPT = 20;

/// Where the IPv4 header starts in buf (-1: not an IPv4 packet).
long
IpOffset(const uint8_t* buf, size_t n, uint16_t proto, Framing framing)
{
    size_t at = 0;
    if (framing == Framing::ETHERNET)
    {
        if (n < 14)
        {
            return -1;
        }
        proto = Be16(buf + 12);
        at = 14;
    }
    else if (framing == Framing::LLC)
    {
        if (n < LLC_BYTES)
        {
            return -1;
        }
        proto = Be16(buf + 6);
        at = LLC_BYTES;
    }
    if (proto == PROTO_MESH)
    {
        if (n < at + MESH_BYTES)
        {
            return -1;
        }
        proto = Be16(buf + at);
        at += MESH_BYTES;
    }
    return proto == PROTO_IPV4 ? long(at) : -1;
}

struct Identity
{
    uint64_t key;
    uint32_t src, dst;
    uint16_t sport = 0, dport = 0, size;
    uint8_t proto;
};

/// The frame's identity from its IPv4 header on (false: too short, or not IPv4).
bool
Identify(const uint8_t* bytes, size_t n, Identity& id)
{
    std::optional<Ipv4View> ip = Ipv4View::Parse(bytes, n); // (only the packet's first bytes, maybe)
    if (!ip)
    {
        return false;
    }
    const uint8_t* header = ip->Bytes();
    const uint8_t* transport = ip->Payload();
    size_t length = std::min(TRANSPORT_BYTES, ip->PayloadBytes());
    // FNV-1a over what no hop inside the channel changes (not the TTL, not the checksum)
    uint64_t hash = 1469598103934665603ULL;
    auto mix = [&hash](const uint8_t* b, size_t len) {
        for (size_t i = 0; i < len; i++)
        {
            hash = (hash ^ b[i]) * 1099511628211ULL;
        }
    };
    mix(header + 2, 4);  // total length, identification
    mix(header + 9, 1);  // protocol
    mix(header + 12, 8); // addresses
    if (ip->Protocol() == Ipv4View::TCP && length >= 18)
    {
        mix(transport, 16); // not TCP's checksum: FastACK resends with the sender's latest TSval
        mix(transport + 18, length - 18);
    }
    else
    {
        mix(transport, length);
    }
    id.key = hash;
    id.src = ip->Src();
    id.dst = ip->Dst();
    id.size = ip->TotalLength();
    id.proto = ip->Protocol();
    // a TCP or UDP header's ports (a later fragment's first bytes, too: only shown, not the key)
    if ((id.proto == Ipv4View::TCP || id.proto == Ipv4View::UDP) && length >= 4)
    {
        id.sport = Be16(transport);
        id.dport = Be16(transport + 2);
    }
    return true;
}

bool
IdentifyPacket(Ptr<const Packet> p, uint16_t proto, Framing framing, Identity& id)
{
    // the headers up to the transport's first bytes: Ethernet or LLC, a mesh header, IPv4
    // with options, TRANSPORT_BYTES
    uint8_t buf[14 + MESH_BYTES + 60 + TRANSPORT_BYTES];
    size_t n = p->CopyData(buf, sizeof(buf));
    long at = IpOffset(buf, n, proto, framing);
    return at >= 0 && Identify(buf + at, n - at, id);
}

std::string
Dotted(uint32_t a)
{
    std::ostringstream o;
    o << (a >> 24) << "." << ((a >> 16) & 0xff) << "." << ((a >> 8) & 0xff) << "." << (a & 0xff);
    return o.str();
}

const char*
StageName(FrameLedger::Stage stage)
{
    switch (stage)
    {
    case FrameLedger::AT_ACCELERATOR:
        return "at_accelerator";
    case FrameLedger::QUEUED:
        return "queued";
    case FrameLedger::ACKED:
        return "acked";
    default:
        return "entered";
    }
}

} // namespace

std::vector<Ptr<const Packet>>
Msdus(Ptr<const WifiMpdu> mpdu)
{
    std::vector<Ptr<const Packet>> msdus;
    const WifiMacHeader& header = mpdu->GetHeader();
    if (!header.IsData())
    {
        return msdus;
    }
    if (header.IsQosData() && header.IsQosAmsdu())
    {
        for (auto msdu = mpdu->begin(); msdu != mpdu->end(); ++msdu)
        {
            msdus.push_back(msdu->first);
        }
    }
    else
    {
        msdus.push_back(mpdu->GetPacket());
    }
    return msdus;
}

FrameLedger::Entry*
FrameLedger::Find(Ptr<const Packet> p, uint16_t proto, Framing framing, uint64_t* key)
{
    Identity id;
    if (!enabled || !IdentifyPacket(p, proto, framing, id))
    {
        *key = 0;
        return nullptr;
    }
    *key = id.key;
    auto it = m_entries.find(id.key);
    return it == m_entries.end() ? nullptr : &it->second;
}

void
FrameLedger::Release(uint64_t key, Entry* entry)
{
    if (--entry->copies == 0)
    {
        m_entries.erase(key);
    }
}

void
FrameLedger::Enter(Ptr<const Packet> p, uint16_t proto, const Mac48Address& dst)
{
    Identity id;
    if (!enabled || dst.IsGroup() || !IdentifyPacket(p, proto, Framing::IP, id))
    {
        return;
    }
    m_entered++;
    auto [it, added] = m_entries.try_emplace(id.key);
    Entry& entry = it->second;
    if (!added)
    {
        entry.copies++; // the same bytes again while the first is in flight (a retransmission
        return;         // that kept its IP ID): they leave the same way
    }
    entry = Entry{Simulator::Now().GetNanoSeconds(), id.src, id.dst, id.sport, id.dport,
                  id.size, id.proto, ENTERED, 1, Mac48Address(), Mac48Address(), nullptr};
}

void
FrameLedger::Copied(Ptr<const Packet> p, uint16_t proto, Framing framing, uint32_t extra)
{
    uint64_t key;
    if (Entry* entry = Find(p, proto, framing, &key))
    {
        entry->copies += extra;
        m_copiesMade += extra;
    }
}

void
FrameLedger::Left(Ptr<const Packet> p, uint16_t proto)
{
    uint64_t key;
    if (Entry* entry = Find(p, proto, Framing::IP, &key))
    {
        m_left++;
        Release(key, entry);
    }
    else if (key)
    {
        m_leftUnentered++; // entered before the reset, made by the channel (FastACK), or
                           // already dropped and sent again (FastACK after a MAC drop)
    }
}

void
FrameLedger::Dropped(Ptr<const Packet> p, uint16_t proto, Framing framing, const std::string& reason)
{
    uint64_t key;
    if (Entry* entry = Find(p, proto, framing, &key))
    {
        m_dropped[reason]++;
        Release(key, entry);
    }
}

void
FrameLedger::Dropped(Ptr<const WifiMpdu> mpdu, const std::string& reason)
{
    if (!enabled)
    {
        return; // (not even the MSDUs' list)
    }
    for (const auto& msdu : Msdus(mpdu))
    {
        Dropped(msdu, 0, Framing::LLC, reason);
    }
}

void
FrameLedger::Reached(Ptr<const Packet> p, uint16_t proto, Framing framing, Stage stage)
{
    uint64_t key;
    if (Entry* entry = Find(p, proto, framing, &key))
    {
        entry->stage = stage;
        entry->holder = nullptr;
    }
}

void
FrameLedger::Reached(Ptr<const WifiMpdu> mpdu, Stage stage)
{
    if (!enabled)
    {
        return; // (not even the MSDUs' list)
    }
    for (const auto& msdu : Msdus(mpdu))
    {
        uint64_t key;
        if (Entry* entry = Find(msdu, 0, Framing::LLC, &key))
        {
            entry->stage = stage;
            entry->holder = nullptr;
            entry->receiver = mpdu->GetHeader().GetAddr1();
            entry->transmitter = mpdu->GetHeader().GetAddr2();
        }
    }
}

void
FrameLedger::Queued(Ptr<const Packet> p, uint16_t proto, Framing framing, const FrameHolder* holder)
{
    uint64_t key;
    if (Entry* entry = Find(p, proto, framing, &key))
    {
        entry->stage = QUEUED;
        entry->holder = holder;
    }
}

void
FrameLedger::StationLeft(const Mac48Address& station)
{
    for (auto it = m_entries.begin(); it != m_entries.end();)
    {
        const Entry& entry = it->second;
        if (entry.stage == ACKED && (entry.receiver == station || entry.transmitter == station))
        {
            m_dropped["reorder_buffer_at_disassociation"] += entry.copies;
            it = m_entries.erase(it);
        }
        else
        {
            ++it;
        }
    }
}

void
FrameLedger::DroppedIfAt(Ptr<const Packet> p, uint16_t proto, Stage stage, const std::string& reason)
{
    uint64_t key;
    Entry* entry = Find(p, proto, Framing::IP, &key);
    if (entry && entry->stage == stage)
    {
        m_dropped[reason]++;
        Release(key, entry);
    }
}

void
FrameLedger::Reset()
{
    m_entries.clear();
    m_startNs = Simulator::Now().GetNanoSeconds();
    m_entered = m_left = m_leftUnentered = m_copiesMade = 0;
    m_dropped.clear();
}

std::string
FrameLedger::Json() const
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    std::vector<const Entry*> vanished;
    uint64_t inFlight = 0, held = 0, vanishedCopies = 0;
    for (const auto& [key, entry] : m_entries)
    {
        if (now - entry.enteredNs > settle.GetNanoSeconds() && entry.stage == QUEUED && entry.holder &&
            entry.holder->Held() > 0)
        {
            held += entry.copies;
            inFlight += entry.copies;
        }
        else if (now - entry.enteredNs > settle.GetNanoSeconds())
        {
            vanished.push_back(&entry);
            vanishedCopies += entry.copies;
        }
        else
        {
            inFlight += entry.copies;
        }
    }
    std::sort(vanished.begin(), vanished.end(),
              [](const Entry* a, const Entry* b) { return a->enteredNs < b->enteredNs; });
    std::ostringstream o;
    o << "{\"enabled\": " << (enabled ? "true" : "false") << ", \"settle_s\": " << Num(settle.GetSeconds())
      << ", \"entered\": " << m_entered << ", \"copies_made\": " << m_copiesMade << ", \"left\": " << m_left
      << ", \"left_unentered\": " << m_leftUnentered << ", \"dropped\": {";
    bool first = true;
    for (const auto& [reason, count] : m_dropped)
    {
        o << (first ? "" : ", ") << Quote(reason) << ": " << count;
        first = false;
    }
    o << "}, \"in_flight\": " << inFlight << ", \"held\": " << held << ", \"vanished\": " << vanishedCopies
      << ", \"vanished_frames\": [";
    for (size_t i = 0; i < std::min(vanished.size(), VANISHED_KEPT); i++)
    {
        const Entry& e = *vanished[i];
        o << (i ? ", " : "") << "{\"entered_s\": " << Num((e.enteredNs - m_startNs) * 1e-9)
          << ", \"stage\": " << Quote(StageName(e.stage)) << ", \"protocol\": " << int(e.proto)
          << ", \"src\": " << Quote(Dotted(e.src) + ":" + std::to_string(e.sport))
          << ", \"dst\": " << Quote(Dotted(e.dst) + ":" + std::to_string(e.dport))
          << ", \"ip_bytes\": " << e.size << ", \"copies\": " << e.copies << "}";
    }
    o << "]}";
    return o.str();
}

} // namespace qbchannel
