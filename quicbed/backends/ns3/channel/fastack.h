// AP-side TCP ACK acceleration as Meraki published it (FastACK, IMC 2017; docs/ns3-backend.md,
// "ACK acceleration"): an access point answers a TCP sender on behalf of its station once the
// station's MAC has acknowledged the data.
#pragma once

#include "common.h"
#include "packet_view.h"

#include "ns3/event-id.h"
#include "ns3/mac48-address.h"
#include "ns3/nstime.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace qbchannel
{

/// The fields of an IPv4 TCP segment this model reads, from the packet's bytes (its flags:
/// TcpView's).
struct TcpSegment
{
    uint32_t srcIp = 0, dstIp = 0;
    uint16_t srcPort = 0, dstPort = 0;
    uint32_t seq = 0, ack = 0;
    uint8_t flags = 0;
    uint16_t window = 0; // as sent (scaled by the window scale the two ends agreed)
    uint32_t payload = 0;
    bool hasTimestamp = false;
    uint32_t tsVal = 0, tsEcr = 0;
    size_t tsValAt = 0; // where TSval is in the packet (0: no timestamps)
    int windowScale = -1; // from a SYN's option (-1: none)
    bool sackPermitted = false;

    /// False for anything that is not a whole IPv4 TCP segment (fragments included).
    bool Parse(const std::vector<uint8_t>& ip);
    bool PureAck() const
    {
        return payload == 0 && (flags & (TcpView::FIN | TcpView::SYN | TcpView::RST)) == 0 && (flags & TcpView::ACK);
    }
    /// The sequence number after the segment (its data and FIN).
    uint32_t End() const { return seq + payload + ((flags & TcpView::FIN) ? 1 : 0); }
};

/// The accelerator of one access point, for IPv4 TCP connections whose handshake (both SYNs)
/// it saw, data flowing from the wired side to a station:
/// - It keeps a copy of every data segment the radio queue took (the cache) until the
///   station's TCP ACK covers it, and follows each copy through the station's MAC: confirmed
///   (block ACK or ACK), dropped, and delivered, which is confirmed with nothing queued before
///   it still pending (the station's block-ack reorder buffer delivers in order).
/// - It acknowledges data to the sender once every byte up to it was delivered to the station
///   (or its TCP acknowledged it), from the station's address, with the station's sequence
///   number, timestamps per RFC 7323 (echoing the earliest segment newly acknowledged, or the
///   duplicate it answers), ECE while the station's ACKs carry it, and a window that is the
///   station's own less what the station has not yet acknowledged of what the AP did.
/// - The station's pure ACKs are consumed: they free the cache, a window update is passed on
///   when the AP's last window was closed (or the window at least doubles), three duplicates
///   (RFC 5681) resend the segment the station lacks. An ACK ahead of the AP's passes.
/// - A segment lost before the AP leaves a hole: each later segment delivered to the station
///   gets a duplicate ACK (with SACK blocks when both ends offered SACK), after the ACK for
///   what came before it, and the sender repairs the hole. A segment or window probe at or
///   below what the AP acknowledged gets the AP's ACK again (its last one was lost).
/// - The AP resends a cached segment when the MAC gives up on it, and when the station's TCP
///   has been silent about delivered data for a while (a fallback timer, 300 ms doubling to
///   2 s), with the sender's latest TSval (the station's PAWS check drops the old one). The
///   sender freed what the AP acknowledged, so the AP keeps it until the station has it: after
///   MAX_RESENDS failures on the air a segment is left to the timer's backoff, not given up.
///   Only a station whose TCP stays silent through MAX_SILENT_EXPIRIES timer resends (about two
///   minutes: a station that leaves its AP is refused with FastACK, so it crashed or was
///   removed) has its connection given up, counted in flows_abandoned (the run is invalid).
/// - A connection ends on RST either way, when both FINs are acknowledged, or when given up.
class FastAck
{
  public:
    /// Hand an IP packet to the radio for a station; false when the radio queue refused it.
    using ToStation = std::function<bool(const std::vector<uint8_t>& ip, Mac48Address src, Mac48Address dst)>;
    /// Send an IP packet out of the port the connection's data came in by.
    using ToSender =
        std::function<void(size_t port, const std::vector<uint8_t>& ip, Mac48Address src, Mac48Address dst)>;

    FastAck(ToStation toStation, ToSender toSender);

    /// A downlink IPv4 packet for the radio (from: the sender's MAC, in: its port); true when
    /// the accelerator took care of it (queued it for the radio, or answered it).
    bool FromSender(const std::vector<uint8_t>& ip, Mac48Address from, Mac48Address to, size_t in);
    /// An uplink IPv4 packet from a station; true when the AP consumes it.
    bool FromStation(const std::vector<uint8_t>& ip);
    /// A downlink IPv4 packet the radio's MAC gave up on: its retries failed, or (``expired``) it
    /// waited in the queue past its lifetime, which says the cell is slow, not the station gone.
    void Dropped(const std::vector<uint8_t>& ip, bool expired = false);
    /// A downlink IPv4 packet the station's MAC acknowledged.
    void Delivered(const std::vector<uint8_t>& ip);

    uint64_t accelerated = 0, deliveredOverAir = 0, acksSent = 0, stationAcksSwallowed = 0, stationAcksPassed = 0,
             stationAcksHeld = 0, stationDuplicates = 0, localRetransmissions = 0, macDropsRepaired = 0,
             timerResends = 0, partialAckResends = 0, outOfOrder = 0, queueRefused = 0, duplicateAcksSent = 0,
             windowUpdates = 0, acksRepeated = 0, eceEchoed = 0, flowsStarted = 0, flowsEnded = 0, flowsAbandoned = 0;
    int mostResends = 0; // the most local resends of one segment since the statistics were reset
    std::string Json() const;
    void ResetStats();

    /// Resends of one segment after failures on the air, after which only the timer resends it.
    static constexpr int MAX_RESENDS = 4;
    /// Timer expiries without the station's TCP progressing after which the AP gives the
    /// connection up (300 ms doubling to 2 s: about two minutes).
    static constexpr int MAX_SILENT_EXPIRIES = 64;

  private:
    using Key = std::tuple<uint32_t, uint16_t, uint32_t, uint16_t>; // sender ip, port, station ip, port

    enum class Copy : uint8_t
    {
        Queued,  // in the radio queue or the MAC's retries
        Aired,   // the station's MAC confirmed it
        Dropped, // the MAC gave up on it
    };

    struct Held
    {
        std::vector<uint8_t> ip; // the copy forwarded last
        uint32_t end;            // the sequence number after its data and FIN
        uint32_t tsVal;          // of the sender's latest copy: echoed when the AP acknowledges it
        size_t tsValAt = 0;      // where the copy's TSval is (0: none)
        Copy copy = Copy::Queued;
        uint64_t copyId = 0; // of the copy in the radio queue last
        bool atStation = false; // the station's MAC delivered a copy (aired, nothing queued before it pending)
        int resends = 0;         // local resends after the air failed (toward MAX_RESENDS)
        bool expired = false;    // the last copy's drop was a queue lifetime's, not the air's
    };

    /// What one end's SYN offered.
    struct Offer
    {
        bool seen = false;
        uint32_t isn = 0;
        uint16_t window = 0; // never scaled in a SYN
        int windowScale = -1;
        bool sackPermitted = false, timestamps = false;

        void Take(const TcpSegment& syn)
        {
            seen = true;
            isn = syn.seq;
            window = syn.window;
            windowScale = syn.windowScale;
            sackPermitted = syn.sackPermitted;
            timestamps = syn.hasTimestamp;
        }
    };

    struct Flow
    {
        Key key;
        uint64_t id = 0;
        Offer stationOffer, senderOffer;
        uint32_t base = 0;          // the sender's first data byte: held segments are keyed by their offset from it
        uint32_t next = 0;          // the sender's bytes the AP holds (or the station has) contiguously
        uint32_t deliveredTo = 0;   // ... of which the station got all up to here (its MAC delivered it, or its TCP)
        uint32_t highest = 0;       // the end of the highest segment from the sender
        uint32_t acked = 0;         // the last ACK the sender got from this end (Last.ACK.sent)
        uint16_t lastWindow = 0;    // its window, as sent
        uint32_t stationAcked = 0;  // the station's highest ACK
        uint16_t stationWindow = 0; // and its window, as sent
        uint32_t stationSeq = 0;    // the station's next sequence number
        uint32_t stationTsVal = 0;
        uint32_t senderTsVal = 0; // the sender's latest TSval
        uint32_t tsRecent = 0; // RFC 7323 TS.Recent of this end
        bool ece = false;      // the station's last ACK asked for ECN echo
        bool cwrPending = false; // the sender said CWR, and no station ACK covered that segment yet
        uint32_t cwrEnd = 0;     // the end of the sender's last segment with CWR
        int duplicates = 0;    // consecutive duplicate ACKs from the station (RFC 5681)
        int silentExpiries = 0; // of the timer since the station's TCP last progressed
        // after a timer resend: the station's TCP lacked what its MAC had got, up to here; each
        // ACK below it brings the next lacking segment at once (NewReno's partial ACK, RFC 6582)
        bool recovering = false;
        uint32_t recoverTo = 0;
        bool ackScheduled = false;
        bool senderFin = false, stationFin = false, senderFinAcked = false, stationFinAcked = false;
        uint32_t senderFinSeq = 0, stationFinSeq = 0;
        Mac48Address sender, station;
        size_t senderPort = 0;
        std::map<uint32_t, Held> held; // by offset from base
        // the copies in the radio queue (offset, copy id) in the order the station's MAC delivers
        // them: its block-ack reorder buffer holds a frame until those before it arrived or were dropped
        std::deque<std::pair<uint32_t, uint64_t>> order;
        uint64_t copies = 0;
        // RFC 2018's SACK blocks: what the station's MAC delivered above the ACK, the most
        // recently changed first, as Linux keeps them
        std::vector<std::pair<uint32_t, uint32_t>> sacks;
        int64_t heldBytes = 0, queuedBytes = 0;
        EventId timer;
        Time timeout;

        bool Accelerated() const { return stationOffer.seen && senderOffer.seen; }
        /// The station's window shift: only when both SYNs carried the option (RFC 7323).
        int Scale() const
        {
            return stationOffer.windowScale >= 0 && senderOffer.windowScale >= 0 ? stationOffer.windowScale : 0;
        }
        bool Timestamps() const { return stationOffer.timestamps && senderOffer.timestamps; }
        bool Sack() const { return stationOffer.sackPermitted && senderOffer.sackPermitted; }
    };

    using HeldAt = std::map<uint32_t, Held>::iterator;

    Flow& Open(const Key& key);
    void Handshaken(Flow& flow);
    /// Ends a connection: its timer, its cache and its state go.
    void End(Flow& flow, bool abandoned);
    void EndIfClosed(Flow& flow);
    /// The accelerated connection of a segment other than a SYN, or null; a reset ends it.
    Flow* Established(std::map<Key, Flow>::iterator it, const TcpSegment& seg);
    /// A data segment of an accelerated connection from the sender.
    bool SenderData(Flow& flow, const TcpSegment& seg, const std::vector<uint8_t>& ip);
    /// Whether the AP's ACKs echo ECE after this ACK of the station (RFC 3168 6.1.3).
    static bool StationEce(Flow& flow, const TcpSegment& seg);
    /// The AP's ACK again: its last one was lost between the AP and the sender.
    void Repeat(Flow& flow, const TcpSegment& seg);
    /// The held segment covering sequence number at (held.end() if none).
    HeldAt Covering(Flow& flow, uint32_t at, bool atStationOnly);
    /// A held segment the station lacks for all the AP knows: the MAC gave up on it, or its
    /// TCP lost it after its MAC delivered it.
    static bool Missing(const Held& held)
    {
        return held.copy == Copy::Dropped || (held.copy == Copy::Aired && held.atStation);
    }
    /// The AP resends the first byte the station lacks itself: the sender need not hear of it.
    bool Repairing(Flow& flow);
    /// The AP's reports wait for a copy it queued again itself (after a MAC drop, or the
    /// station's duplicate ACKs or silence).
    bool AwaitingRepair(Flow& flow);
    /// A station's ACK the AP neither passes nor reads while it awaits its repair.
    bool HeldForRepair(Flow& flow, const TcpSegment& seg);
    void Advance(Flow& flow);
    void Release(Flow& flow, uint32_t ack);
    void SetCopy(Flow& flow, HeldAt held, Copy copy);
    /// Adds (sign 1) or removes (-1) a held segment's bytes from its flow's counts.
    void Account(Flow& flow, HeldAt held, int sign);
    /// Adds [start, end) to the SACK blocks, in front.
    static void NoteSack(Flow& flow, uint32_t start, uint32_t end);
    /// Hands a held segment to the radio; false when its queue refused it.
    bool Enqueue(Flow& flow, HeldAt held);
    /// The held segment an entry of the delivery order stands for, or null (no longer held,
    /// or a copy since replaced by one the station got).
    static Held* InPlace(Flow& flow, uint32_t offset, uint64_t copyId);
    /// A segment the station's reorder buffer waits for: the MAC still tries it, or the AP is
    /// about to queue it again.
    static bool Waits(const Held& held)
    {
        return held.copy == Copy::Queued || (held.copy == Copy::Dropped && held.copyId != 0);
    }
    /// Marks what the station's MAC delivered in order since the last call, with a duplicate
    /// ACK for each segment above a hole.
    void DeliverInOrder(Flow& flow);
    /// The ACKs due at the end of this instant: one for everything newly confirmed, then the
    /// duplicates owed for a hole.
    void ScheduleAcks(Flow& flow);
    void SendDue(Key key, uint64_t id);
    /// The ACK for what the station newly got in order, if any.
    void AcknowledgeNew(Flow& flow);
    void SendAck(Flow& flow, uint16_t window);
    uint16_t Window(const Flow& flow) const;
    void WindowUpdate(Flow& flow);
    enum class Resent
    {
        Sent,
        Refused,  // the radio queue was full: the timer tries again
        Deferred, // the air failed it MAX_RESENDS times: the timer's backoff resends it
    };
    /// Sends a held segment again; a deferrable resend (after the air failed it, or three
    /// duplicates) is left to the timer once the air failed it MAX_RESENDS times.
    Resent Resend(Flow& flow, HeldAt held, bool deferrable);
    void ResendDropped(Key key, uint64_t id, uint32_t seq);
    void Arm(Flow& flow);
    void OnTimer(Key key, uint64_t id);
    Flow* Find(Key key, uint64_t id);
    /// The accelerated flow of a downlink segment the MAC reports on, with its held copy in
    /// held, when that copy is the one in the radio queue; null otherwise.
    Flow* QueuedCopy(const std::vector<uint8_t>& ip, HeldAt& held);

    ToStation m_toStation;
    ToSender m_toSender;
    std::map<Key, Flow> m_flows;
    uint64_t m_nextId = 1;
};

} // namespace qbchannel
