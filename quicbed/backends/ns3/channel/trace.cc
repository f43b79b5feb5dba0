// Delivery traces (see trace.h).

#include "trace.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <fstream>

namespace qbchannel
{

TraceGate::TraceGate(const std::string& path, Ptr<Queue<Packet>> queue, Deliver deliver)
    : m_queue(queue),
      m_deliver(std::move(deliver))
{
    std::ifstream in(path);
    if (!in)
    {
        Die("cannot read the delivery trace " + path);
    }
    std::string line;
    while (std::getline(in, line))
    {
        if (line.find_first_not_of(" \t\r") == std::string::npos)
        {
            continue;
        }
        int64_t ms = std::stoll(line); // quicbed checked the file's format before
        m_offsetsUs.push_back(ms * 1000);
    }
    if (m_offsetsUs.empty() || m_offsetsUs.back() <= 0)
    {
        Die("the delivery trace " + path + " has no opportunity after time 0");
    }
    m_periodUs = m_offsetsUs.back();
    m_epochUs = Simulator::Now().GetMicroSeconds();
}

int64_t
TraceGate::OpportunityUs(uint64_t k) const
{
    uint64_t n = m_offsetsUs.size();
    return m_epochUs + int64_t(k / n) * m_periodUs + m_offsetsUs[k % n];
}

void
TraceGate::Arrive(const Frame& frame)
{
    if (!m_queue->Enqueue(frame.packet))
    {
        return; // counted as a drop by the queue
    }
    m_waiting.push_back(frame);
    if (!m_serve.IsRunning())
    {
        ScheduleNext();
    }
}

void
TraceGate::ScheduleNext()
{
    int64_t now = Simulator::Now().GetMicroSeconds();
    if (OpportunityUs(m_next) < now)
    {
        // the opportunities passed while the queue was empty are lost: skip to the first at or
        // after now
        uint64_t n = m_offsetsUs.size();
        int64_t since = now - m_epochUs;
        uint64_t cycle = uint64_t(since / m_periodUs);
        int64_t within = since % m_periodUs;
        uint64_t i = std::lower_bound(m_offsetsUs.begin(), m_offsetsUs.end(), within) -
                     m_offsetsUs.begin();
        uint64_t k = cycle * n + i; // i == n is the next cycle's first
        opportunities += k - m_next;
        m_next = k;
    }
    m_serve = Simulator::Schedule(MicroSeconds(OpportunityUs(m_next) - now), &TraceGate::Serve, this);
}

void
TraceGate::Serve()
{
    m_next++;
    opportunities++;
    used++;
    uint32_t budget = BYTES_PER_OPPORTUNITY;
    while (budget > 0)
    {
        if (m_inTransitLeft == 0)
        {
            Ptr<Packet> packet = m_queue->Dequeue();
            if (!packet)
            {
                break;
            }
            m_inTransit = m_waiting.front();
            m_waiting.pop_front();
            uint32_t size = packet->GetSize();
            m_inTransitLeft = size > ETHERNET_HEADER ? size - ETHERNET_HEADER : 1;
        }
        uint32_t amount = std::min(budget, m_inTransitLeft);
        m_inTransitLeft -= amount;
        budget -= amount;
        if (m_inTransitLeft == 0)
        {
            m_deliver(m_inTransit);
            m_inTransit = Frame();
        }
    }
    if (m_inTransitLeft > 0 || !m_waiting.empty())
    {
        ScheduleNext();
    }
}

void
TraceGate::Restart()
{
    m_serve.Cancel();
    m_epochUs = Simulator::Now().GetMicroSeconds();
    m_next = 0;
    opportunities = used = 0;
    if (m_inTransitLeft > 0 || !m_waiting.empty())
    {
        ScheduleNext();
    }
}

} // namespace qbchannel
