// Delivery traces (Mahimahi's format) on wired links: TraceGate holds one direction's packets
// until the trace's delivery opportunities let them out.
#pragma once

#include "common.h"

#include "ns3/event-id.h"
#include "ns3/mac48-address.h"
#include "ns3/nstime.h"
#include "ns3/packet.h"
#include "ns3/queue.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace qbchannel
{

/// One direction of a trace-driven link, as Mahimahi's mm-link: packets wait in a drop-tail
/// queue; each delivery opportunity of the trace (one line: a time in ms) lets 1500 bytes of
/// them out, a packet larger than what is left of an opportunity finishing at the next one.
/// An opportunity that finds the queue empty is lost. The trace repeats with the period of
/// its last time, and starts again (time 0 = now) on Restart, i.e. at each run's start.
class TraceGate
{
  public:
    static constexpr uint32_t BYTES_PER_OPPORTUNITY = 1500;
    /// frames on wires carry an Ethernet header (ports.cc); an opportunity counts IP bytes, as
    /// Mahimahi's does, so that one lets one full-size packet through
    static constexpr uint32_t ETHERNET_HEADER = 14;

    struct Frame
    {
        Ptr<Packet> packet;
        uint16_t protocol;
        Mac48Address to, from;
    };

    using Deliver = std::function<void(const Frame&)>;

    /// Reads the trace file (one non-negative integer per line, non-decreasing, last > 0).
    TraceGate(const std::string& path, Ptr<Queue<Packet>> queue, Deliver deliver);

    void Arrive(const Frame& frame);
    void Restart();

    uint64_t opportunities = 0; // used or lost since the start
    uint64_t used = 0;          // that carried bytes

  private:
    int64_t OpportunityUs(uint64_t k) const;
    void ScheduleNext();
    void Serve();

    std::vector<int64_t> m_offsetsUs; // sorted, within one period
    int64_t m_periodUs = 0;
    int64_t m_epochUs = 0;
    uint64_t m_next = 0; // index of the next opportunity not yet used or lost
    Ptr<Queue<Packet>> m_queue;
    std::deque<Frame> m_waiting; // the queue's packets' addresses, in the same order
    Frame m_inTransit;
    uint32_t m_inTransitLeft = 0;
    EventId m_serve;
    Deliver m_deliver;
};

} // namespace qbchannel
