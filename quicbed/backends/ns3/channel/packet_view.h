// Read-only views of the IPv4 and TCP headers in a packet's bytes, for the parts of the channel
// that read them (FastACK, a queue discipline's flow hash, the frame ledger). A view points
// into bytes it does not own: it must not outlive them. Each view is made by a Parse that
// checks the bounds its accessors rely on, and is empty (std::nullopt) when they fail.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace qbchannel
{

/// The big-endian (network order) 16- and 32-bit values at b.
inline uint16_t
Be16(const uint8_t* b)
{
    return uint16_t(b[0] << 8 | b[1]);
}

inline uint32_t
Be32(const uint8_t* b)
{
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
}

/// The IPv4 header at the start of a packet's bytes: all of them, or only the first ones (the
/// frame ledger copies no more than it reads).
class Ipv4View
{
  public:
    static constexpr size_t MIN_HEADER = 20; // without options
    static constexpr uint8_t TCP = 6, UDP = 17;

    /// The header, or nothing: fewer than 20 bytes, not version 4, an IHL under 5, or a header
    /// longer than the bytes or than the packet's total length. The bytes may stop before the
    /// total length, or go on after it (a frame's padding).
    static std::optional<Ipv4View> Parse(const uint8_t* bytes, size_t size)
    {
        if (size < MIN_HEADER || bytes[0] >> 4 != 4)
        {
            return std::nullopt;
        }
        Ipv4View ip(bytes, size);
        if (ip.HeaderLength() < MIN_HEADER || ip.HeaderLength() > ip.End())
        {
            return std::nullopt;
        }
        return ip;
    }

    static std::optional<Ipv4View> Parse(const std::vector<uint8_t>& ip)
    {
        return Parse(ip.data(), ip.size());
    }

    /// The fixed header's 20 bytes whatever they say (nothing if fewer): no version, IHL or
    /// length check, for a reader that takes the ethertype's word for it (the queue
    /// discipline's flow hash, as it always did). HeaderLength() is then anything up to 60,
    /// and End() may be short of it: bound reads past the fixed header by Size().
    static std::optional<Ipv4View> Unchecked(const uint8_t* bytes, size_t size)
    {
        return size < MIN_HEADER ? std::nullopt : std::optional<Ipv4View>(Ipv4View(bytes, size));
    }

    /// the header's length with its options (the IHL, in bytes)
    size_t HeaderLength() const { return size_t(m_b[0] & 0x0f) * 4; }
    /// the packet's length, as its header says
    uint16_t TotalLength() const { return Be16(m_b + 2); }
    uint8_t Protocol() const { return m_b[9]; }
    uint32_t Src() const { return Be32(m_b + 12); }
    uint32_t Dst() const { return Be32(m_b + 16); }
    /// in 8-byte units; only the first fragment (offset 0) has the transport header
    uint16_t FragmentOffset() const { return Be16(m_b + 6) & 0x1fff; }
    /// a part of a packet split on the way: more fragments follow, or an offset
    bool Fragment() const { return (Be16(m_b + 6) & 0x3fff) != 0; }

    /// the bytes hold the whole packet (TotalLength() of them, or more)
    bool Whole() const { return TotalLength() <= m_size; }
    /// where the packet ends in the bytes: its total length, or the bytes' end if that is first
    size_t End() const { return std::min<size_t>(TotalLength(), m_size); }
    /// the bytes after the header (the transport header first), up to End(); PayloadBytes()
    /// only of a view from Parse (an unchecked header may end past End())
    const uint8_t* Payload() const { return m_b + HeaderLength(); }
    size_t PayloadBytes() const { return End() - HeaderLength(); }

    /// the bytes viewed, from the header's first
    const uint8_t* Bytes() const { return m_b; }
    size_t Size() const { return m_size; }

  private:
    Ipv4View(const uint8_t* bytes, size_t size)
        : m_b(bytes),
          m_size(size)
    {
    }

    const uint8_t* m_b;
    size_t m_size;
};

/// The TCP header of a whole IPv4 packet.
class TcpView
{
  public:
    static constexpr size_t MIN_HEADER = 20; // without options
    static constexpr uint8_t FIN = 0x01, SYN = 0x02, RST = 0x04, PSH = 0x08, ACK = 0x10, ECE = 0x40, CWR = 0x80;

    /// The TCP header behind ip, or nothing: not TCP, a fragment, bytes that stop before the
    /// total length, or a header (a data offset under 5, or its options) that does not fit in
    /// the packet.
    static std::optional<TcpView> Parse(const Ipv4View& ip)
    {
        size_t at = ip.HeaderLength(), total = ip.TotalLength();
        if (ip.Protocol() != Ipv4View::TCP || ip.Fragment() || !ip.Whole() || total < at + MIN_HEADER)
        {
            return std::nullopt;
        }
        TcpView tcp(ip.Bytes(), at, total);
        if (tcp.HeaderLength() < MIN_HEADER || at + tcp.HeaderLength() > total)
        {
            return std::nullopt;
        }
        return tcp;
    }

    uint16_t SrcPort() const { return Be16(m_b + m_at); }
    uint16_t DstPort() const { return Be16(m_b + m_at + 2); }
    uint32_t Seq() const { return Be32(m_b + m_at + 4); }
    uint32_t Ack() const { return Be32(m_b + m_at + 8); }
    /// the header's length with its options (the data offset, in bytes)
    size_t HeaderLength() const { return size_t(m_b[m_at + 12] >> 4) * 4; }
    uint8_t Flags() const { return m_b[m_at + 13]; }
    /// as sent (scaled by the window scale the two ends agreed)
    uint16_t Window() const { return Be16(m_b + m_at + 14); }
    /// the segment's data bytes (up to the IPv4 total length)
    uint32_t PayloadLength() const { return uint32_t(m_total - m_at - HeaderLength()); }

    /// where the header starts in the packet's bytes: its options are from At() + MIN_HEADER
    /// to At() + HeaderLength()
    size_t At() const { return m_at; }

  private:
    TcpView(const uint8_t* packet, size_t at, size_t total)
        : m_b(packet),
          m_at(at),
          m_total(total)
    {
    }

    const uint8_t* m_b; // the IPv4 packet's first byte
    size_t m_at, m_total;
};

} // namespace qbchannel
