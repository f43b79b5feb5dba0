// AP-side TCP ACK acceleration, the idea of Meraki's FastACK (docs/ns3-backend.md, "ACK
// acceleration"): an access point answers a TCP sender on behalf of its station.
#pragma once

#include "common.h"

#include "ns3/event-id.h"
#include "ns3/mac48-address.h"
#include "ns3/nstime.h"
#include "ns3/packet.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace qbchannel
{

/// The fields of an IPv4 TCP segment this model reads, from the packet's bytes.
struct TcpView
{
    uint32_t srcIp = 0, dstIp = 0;
    uint16_t srcPort = 0, dstPort = 0;
    uint32_t seq = 0, ack = 0;
    uint8_t flags = 0;
    uint16_t window = 0; // as sent (scaled by the window scale the two ends agreed)
    uint32_t payload = 0;
    bool hasTimestamp = false;
    uint32_t tsVal = 0, tsEcr = 0;
    int windowScale = -1; // from a SYN's option (-1: none)

    static constexpr uint8_t FIN = 0x01, SYN = 0x02, RST = 0x04, PSH = 0x08, ACK = 0x10;

    /// False for anything that is not a whole IPv4 TCP segment (fragments included).
    bool Parse(const std::vector<uint8_t>& ip);
    bool PureAck() const { return payload == 0 && (flags & (FIN | SYN | RST)) == 0 && (flags & ACK); }
};

/// The accelerator of one access point. Downlink data segments of a connection whose start
/// (the station's SYN) the AP saw are acknowledged to the sender as soon as the radio queue
/// took them, in order: the AP's ACK carries the next byte it expects, timestamps echoing the
/// segment when the connection uses them, and a window that is the station's last one cut to
/// what the AP is still willing to hold for this connection (its share of half the radio
/// queue, in full-size segments, less what it holds): the AP is the sender's receiver now, and
/// its buffer is the radio queue: what it holds counts until the station's MAC confirms it
/// (block ACK or ACK). When that frees room after the AP advertised less than a segment, it
/// sends a window update. The window never reaches past the station's own (its last ACK plus
/// its window). The AP keeps every segment it acknowledged until the station's TCP ACK covers
/// it, and sends it again when the MAC gives up on its frame (retry limit, lifetime), on three
/// duplicate ACKs from the station, or when the flow made no progress for a while (a fallback
/// timer, 300 ms doubling to 2 s: longer than the radio queue's delay). A
/// segment the AP acknowledged, or a window probe, arriving again gets the AP's ACK again. The
/// station's pure ACKs at or below what the AP acknowledged are swallowed; the others (data,
/// SYN, FIN, RST, an ACK above the AP's) pass, and so do all of them while a downlink segment
/// arrived out of order (a loss before the AP is the sender's to repair, with the station's
/// duplicate ACKs and SACKs). SACK blocks are not generated.
class FastAck
{
  public:
    using Send = std::function<bool(const std::vector<uint8_t>& ip, Mac48Address src, Mac48Address dst)>;

    /// toStation: hand an IP packet to the radio for a station; toSender: send an IP packet
    /// out of the port the connection's data came in by (given with each segment).
    FastAck(Send toStation, std::function<void(size_t port, const std::vector<uint8_t>&, Mac48Address,
                                               Mac48Address)> toSender, uint32_t queuePackets);

    /// A downlink IPv4 packet the radio queue has just taken (from: the sender's MAC, in: its port).
    void Queued(const std::vector<uint8_t>& ip, Mac48Address from, Mac48Address to, size_t in);
    /// An uplink IPv4 packet from a station; true when the AP swallows it.
    bool FromStation(const std::vector<uint8_t>& ip, Mac48Address from, Mac48Address to);
    /// A downlink IPv4 packet the radio's MAC gave up on.
    void Dropped(const std::vector<uint8_t>& ip);
    /// A downlink IPv4 packet the station's MAC acknowledged.
    void Delivered(const std::vector<uint8_t>& ip);

    uint64_t accelerated = 0, acksSent = 0, stationAcksSwallowed = 0, stationAcksPassed = 0,
             localRetransmissions = 0, macDropsRepaired = 0, outOfOrder = 0, windowUpdates = 0, acksRepeated = 0,
             deliveredOverAir = 0;
    std::string Json() const;
    void ResetStats();

  private:
    using Key = std::tuple<uint32_t, uint16_t, uint32_t, uint16_t>; // sender ip, port, station ip, port

    struct Held
    {
        std::vector<uint8_t> ip;
        uint32_t end;
        bool aired = false; // the station's MAC confirmed it (it left the radio queue)
    };

    struct Flow
    {
        Key key;
        bool stationSeen = false, started = false;
        uint32_t base = 0;          // the first data byte: held segments are keyed by their offset from it
        uint32_t next = 0;          // the next in-order byte from the sender
        uint32_t apAcked = 0;       // what the AP acknowledged to the sender
        uint32_t stationAcked = 0;  // what the station acknowledged
        uint32_t stationSeq = 0;    // the station's next sequence number (the AP's ACKs carry it)
        uint32_t highest = 0;       // the end of the highest segment seen from the sender
        uint16_t window = 0;        // the station's, as sent
        int scale = 0;              // the station's window scale
        uint32_t queuedBytes = 0;   // held and not yet confirmed by the station's MAC
        bool windowClosed = false;  // the AP's last ACK offered less than a segment
        uint32_t lastTsEcr = 0;     // what the AP's ACKs echo
        bool timestamps = false;
        uint32_t stationTsVal = 0;
        int duplicates = 0;
        Mac48Address sender, station;
        size_t senderPort = 0;
        std::map<uint32_t, Held> held; // every segment forwarded and not yet confirmed by the station
        EventId timer;
        Time timeout;
    };

    void Acknowledge(Flow& flow);
    /// The AP's ACK again, for a segment it acknowledged or a window probe: its ACK was lost
    /// between the AP and the sender, and the station's answer would be swallowed.
    void Repeat(Flow& flow);
    uint16_t Window(const Flow& flow) const;
    /// The flow of an accelerated downlink segment, or null.
    Flow* Accelerated(const TcpView& seg);
    void Release(Flow& flow, uint32_t ack);
    /// Marks a held segment as confirmed by the station's MAC (aired) or as back in the queue.
    void SetAired(Flow& flow, Held& held, uint32_t seq, bool aired);
    /// Room freed or the station heard from: restart the timer, reopen a closed window.
    void Progressed(Flow& flow);
    /// Sends the held segment starting at from again; true when the radio queue took it.
    bool Resend(Flow& flow, uint32_t from);
    void ResendLater(Key key, uint32_t from);
    void Arm(Flow& flow);
    void OnTimer(Key key);

    Send m_toStation;
    std::function<void(size_t, const std::vector<uint8_t>&, Mac48Address, Mac48Address)> m_toSender;
    std::map<Key, Flow> m_flows;
    uint64_t m_budgetBytes; // half the radio queue, in full-size segments
};

} // namespace qbchannel
