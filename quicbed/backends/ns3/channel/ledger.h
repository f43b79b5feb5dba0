// FrameLedger: every unicast IPv4 frame that enters the channel from a TAP is entered in a
// ledger and leaves it once, either written to a TAP or dropped at a counted place (a full
// queue, a MAC's retry limit, a wire's loss, ...). A frame still in the ledger long after it
// entered vanished inside the channel without a counted reason: a fault of the emulator,
// which no other counter shows. Frames are known by their content (addresses, IP ID, the
// first bytes of the transport header), so a frame keeps its identity when the channel copies
// it into a new packet (FastACK's queue, a mesh header, a wire's Ethernet header).
#pragma once

#include "common.h"

#include "ns3/nstime.h"
#include "ns3/packet.h"
#include "ns3/wifi-mpdu.h"

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace qbchannel
{

/// Where the IPv4 header of a packet starts, given how the channel carries it.
enum class Framing
{
    IP,       // the IPv4 packet itself (proto says whether it is one)
    ETHERNET, // behind the Ethernet header a wire adds
    LLC,      // behind an 802.11 MSDU's LLC/SNAP header
};

/// A queue frames wait in (a radio's, a cable's): the ledger does not call a frame it took
/// vanished while it still holds frames, since a deep queue may hold one longer than the
/// settle time (an unresponsive flood fills mac80211's 8192 frames).
class FrameHolder
{
  public:
    virtual ~FrameHolder() = default;
    /// frames it holds now
    virtual uint32_t Held() const = 0;
};

/// The MSDUs a data MPDU carries (one, or an A-MSDU's), each with its LLC/SNAP header; none
/// for other frames.
std::vector<Ptr<const Packet>> Msdus(Ptr<const WifiMpdu> mpdu);

class FrameLedger
{
  public:
    /// how far a frame got before it vanished
    enum Stage : uint8_t
    {
        ENTERED,        // read from a TAP
        AT_ACCELERATOR, // offered to an AP's FastACK
        QUEUED,         // in a queue: a radio's (its discipline or its MAC's), a cable's
        ACKED,          // acknowledged by the receiving radio's MAC
    };

    /// a frame not written out this long after it entered is counted as vanished
    Time settle = Seconds(2);
    bool enabled = true;

    /// A frame read from a TAP (only unicast IPv4 frames are kept).
    void Enter(Ptr<const Packet> p, uint16_t proto, const Mac48Address& dst);
    /// The channel made `extra` more copies of the frame (a bridge flooding it).
    void Copied(Ptr<const Packet> p, uint16_t proto, Framing framing, uint32_t extra);
    /// A copy was written to a TAP.
    void Left(Ptr<const Packet> p, uint16_t proto);
    /// A copy was dropped for a counted reason.
    void Dropped(Ptr<const Packet> p, uint16_t proto, Framing framing, const std::string& reason);
    void Dropped(Ptr<const WifiMpdu> mpdu, const std::string& reason);
    /// A copy entered a queue (a radio's discipline and MAC queue, a cable's).
    void Queued(Ptr<const Packet> p, uint16_t proto, Framing framing, const FrameHolder* holder);
    /// A copy that is still at `stage` was dropped (FastACK answered a segment, or had a copy).
    void DroppedIfAt(Ptr<const Packet> p, uint16_t proto, Stage stage, const std::string& reason);
    /// A copy reached a stage: offered to FastACK, acknowledged by the receiver's MAC (the
    /// stage a vanished frame reached says where to look).
    void Reached(Ptr<const Packet> p, uint16_t proto, Framing framing, Stage stage);
    void Reached(Ptr<const WifiMpdu> mpdu, Stage stage);
    /// A station lost its AP: the frames acknowledged by its MAC or by its AP's from it, and
    /// not passed on since, are in a block-ack reorder buffer behind a missing MPDU, and
    /// ns-3 3.37 never releases them (no reorder timeout, no flush at disassociation).
    void StationLeft(const Mac48Address& station);

    void Reset();
    /// "entered", "copies_made", "left", "left_unentered", "dropped" (by reason), "in_flight"
    /// (of which "held": older than settle, in a queue that still holds frames), "vanished"
    /// (entered + copies_made = left + dropped + in_flight + vanished) and up to 20 of the
    /// vanished frames, the oldest first (entered_s: in simulated seconds since the reset, as
    /// the lag record's times)
    std::string Json() const;

  private:
    struct Entry
    {
        int64_t enteredNs;
        uint32_t src, dst;
        uint16_t sport, dport, size;
        uint8_t proto;
        Stage stage;
        uint32_t copies;
        Mac48Address receiver, transmitter; // of the MPDU that was acknowledged (ACKED)
        const FrameHolder* holder;          // the queue it entered last (QUEUED)
    };

    /// the entry of a packet's frame, or null (not IPv4, or not in the ledger)
    Entry* Find(Ptr<const Packet> p, uint16_t proto, Framing framing, uint64_t* key);
    void Release(uint64_t key, Entry* entry);

    std::unordered_map<uint64_t, Entry> m_entries;
    int64_t m_startNs = 0; // the interval's start (Reset), which vanished frames' times count from
    uint64_t m_entered = 0, m_copiesMade = 0, m_left = 0, m_leftUnentered = 0;
    std::map<std::string, uint64_t> m_dropped;
};

extern FrameLedger g_ledger;

} // namespace qbchannel
