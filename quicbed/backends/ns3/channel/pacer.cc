// The channel's real-time simulator (see pacer.h).

#include "pacer.h"

#include "common.h"

#include "ns3/simulator.h"

#include <chrono>
#include <ctime>
#include <sched.h>
#include <sstream>

namespace qbchannel
{

NS_OBJECT_ENSURE_REGISTERED(PacedSimulatorImpl);

int64_t PacedSimulatorImpl::spinNs = 0;

namespace
{

int64_t
MonoNs()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

} // namespace

TypeId
PacedSimulatorImpl::GetTypeId()
{
    static TypeId tid = TypeId("qbchannel::PacedSimulatorImpl")
                            .SetParent<SimulatorImpl>()
                            .SetGroupName("Core")
                            .AddConstructor<PacedSimulatorImpl>();
    return tid;
}

PacedSimulatorImpl::PacedSimulatorImpl()
{
    if (Time::GetResolution() != Time::NS)
    {
        Die("the paced simulator keeps time in nanoseconds; ns-3's resolution was changed");
    }
    m_main = std::this_thread::get_id();
}

PacedSimulatorImpl::~PacedSimulatorImpl() = default;

void
PacedSimulatorImpl::DoDispose()
{
    TakeForeign();
    while (m_events && !m_events->IsEmpty())
    {
        m_events->RemoveNext().impl->Unref();
    }
    m_events = nullptr;
    SimulatorImpl::DoDispose();
}

void
PacedSimulatorImpl::Destroy()
{
    while (!m_destroyEvents.empty())
    {
        Ptr<EventImpl> event = m_destroyEvents.front().PeekEventImpl();
        m_destroyEvents.pop_front();
        if (!event->IsCancelled())
        {
            event->Invoke();
        }
    }
}

void
PacedSimulatorImpl::SetScheduler(ObjectFactory schedulerFactory)
{
    Ptr<Scheduler> scheduler = schedulerFactory.Create<Scheduler>();
    while (m_events && !m_events->IsEmpty())
    {
        scheduler->Insert(m_events->RemoveNext());
    }
    m_events = scheduler;
}

bool
PacedSimulatorImpl::OnMainThread() const
{
    return std::this_thread::get_id() == m_main;
}

uint64_t
PacedSimulatorImpl::Wall() const
{
    int64_t ns = MonoNs() - m_originNs;
    return ns > 0 ? uint64_t(ns) : 0;
}

Time
PacedSimulatorImpl::RealtimeNow() const
{
    return TimeStep(m_running ? Wall() : m_currentTs);
}

Scheduler::Event
PacedSimulatorImpl::Insert(uint64_t ts, uint32_t context, EventImpl* event)
{
    Scheduler::Event ev;
    ev.impl = event;
    ev.key.m_ts = ts;
    ev.key.m_context = context;
    ev.key.m_uid = m_uid++;
    m_unscheduledEvents++;
    m_events->Insert(ev);
    return ev;
}

EventId
PacedSimulatorImpl::Schedule(const Time& delay, EventImpl* event)
{
    NS_ASSERT_MSG(OnMainThread(), "Simulator::Schedule from another thread");
    NS_ASSERT_MSG(delay.IsPositive(), "Simulator::Schedule with a negative delay");
    Scheduler::Event ev = Insert(m_currentTs + delay.GetTimeStep(), m_currentContext, event);
    return EventId(event, ev.key.m_ts, ev.key.m_context, ev.key.m_uid);
}

void
PacedSimulatorImpl::ScheduleWithContext(uint32_t context, const Time& delay, EventImpl* event)
{
    if (OnMainThread())
    {
        Insert(m_currentTs + delay.GetTimeStep(), context, event);
        return;
    }
    // Another thread (a TAP reader): the event is due at the wall clock's time plus delay,
    // as in ns-3's real-time simulator; the simulator thread inserts it (TakeForeign).
    uint64_t ts = (m_running ? Wall() : 0) + delay.GetTimeStep();
    bool wake;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_foreign.push_back(Foreign{ts, context, event});
        m_foreignWaiting.store(true, std::memory_order_release);
        wake = m_sleeping;
        m_sleeping = false;
    }
    if (wake)
    {
        m_wake.notify_one();
    }
}

void
PacedSimulatorImpl::TakeForeign()
{
    std::vector<Foreign> taken;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        taken.swap(m_foreign);
        m_foreignWaiting.store(false, std::memory_order_relaxed);
    }
    for (auto& foreign : taken)
    {
        // the wall clock was read before the simulator ran an event a little later than it
        Insert(std::max(foreign.ts, m_currentTs), foreign.context, foreign.event);
    }
}

EventId
PacedSimulatorImpl::ScheduleNow(EventImpl* event)
{
    NS_ASSERT_MSG(OnMainThread(), "Simulator::ScheduleNow from another thread");
    Scheduler::Event ev = Insert(m_currentTs, m_currentContext, event);
    return EventId(event, ev.key.m_ts, ev.key.m_context, ev.key.m_uid);
}

EventId
PacedSimulatorImpl::ScheduleDestroy(EventImpl* event)
{
    NS_ASSERT_MSG(OnMainThread(), "Simulator::ScheduleDestroy from another thread");
    EventId id(Ptr<EventImpl>(event, false), m_currentTs, 0xffffffff, 2);
    m_destroyEvents.push_back(id);
    m_uid++;
    return id;
}

void
PacedSimulatorImpl::WaitUntil(uint64_t ts)
{
    int64_t gap = int64_t(ts - m_lastWall);
    if (gap > spinNs)
    {
        std::unique_lock<std::mutex> lock(m_mutex);
        if (m_foreign.empty())
        {
            m_sleeping = true;
            m_sleeps++;
            auto deadline = std::chrono::steady_clock::time_point(
                std::chrono::nanoseconds(m_originNs + int64_t(ts) - spinNs));
            m_wake.wait_until(lock, deadline, [this] { return !m_sleeping; });
            if (!m_sleeping)
            {
                m_wakeups++;
            }
            m_sleeping = false;
        }
        m_lastWall = Wall();
        return;
    }
    int64_t start = MonoNs();
    for (;;)
    {
        m_lastWall = Wall();
        if (m_lastWall >= ts || m_foreignWaiting.load(std::memory_order_acquire))
        {
            break;
        }
        // let a TAP reader or the writer pinned to this core at the same priority run
        sched_yield();
    }
    m_spinNsTotal += MonoNs() - start;
}

void
PacedSimulatorImpl::Run()
{
    m_main = std::this_thread::get_id();
    m_stop = false;
    // simulated time m_currentTs is due now
    m_originNs = MonoNs() - int64_t(m_currentTs);
    m_lastWall = m_currentTs;
    m_running = true;
    while (!m_stop)
    {
        if (m_foreignWaiting.load(std::memory_order_acquire))
        {
            TakeForeign();
        }
        if (m_events->IsEmpty())
        {
            WaitUntil(m_lastWall + 1000000000); // nothing to do: until something arrives
            continue;
        }
        uint64_t next = m_events->PeekNext().key.m_ts;
        if (next > m_lastWall)
        {
            m_lastWall = Wall();
            if (next > m_lastWall)
            {
                WaitUntil(next);
                continue; // an event may have arrived, or the clock moved: look again
            }
        }
        Scheduler::Event ev = m_events->RemoveNext();
        m_unscheduledEvents--;
        m_eventCount++;
        m_currentTs = ev.key.m_ts;
        m_currentContext = ev.key.m_context;
        m_currentUid = ev.key.m_uid;
        ev.impl->Invoke();
        ev.impl->Unref();
    }
    m_running = false;
}

bool
PacedSimulatorImpl::IsFinished() const
{
    return m_events->IsEmpty() || m_stop;
}

void
PacedSimulatorImpl::Stop()
{
    m_stop = true;
}

void
PacedSimulatorImpl::Stop(const Time& delay)
{
    Simulator::Schedule(delay, &Simulator::Stop);
}

Time
PacedSimulatorImpl::Now() const
{
    return TimeStep(m_currentTs);
}

Time
PacedSimulatorImpl::GetDelayLeft(const EventId& id) const
{
    return IsExpired(id) ? TimeStep(0) : TimeStep(id.GetTs() - m_currentTs);
}

void
PacedSimulatorImpl::Remove(const EventId& id)
{
    if (id.GetUid() == 2)
    {
        m_destroyEvents.remove(id);
        return;
    }
    if (IsExpired(id))
    {
        return;
    }
    Scheduler::Event ev;
    ev.impl = id.PeekEventImpl();
    ev.key.m_ts = id.GetTs();
    ev.key.m_context = id.GetContext();
    ev.key.m_uid = id.GetUid();
    m_events->Remove(ev);
    ev.impl->Cancel();
    ev.impl->Unref(); // the scheduler's reference
    m_unscheduledEvents--;
}

void
PacedSimulatorImpl::Cancel(const EventId& id)
{
    if (!IsExpired(id))
    {
        id.PeekEventImpl()->Cancel();
    }
}

bool
PacedSimulatorImpl::IsExpired(const EventId& id) const
{
    if (!id.PeekEventImpl() || id.PeekEventImpl()->IsCancelled())
    {
        return true;
    }
    if (id.GetUid() == 2)
    {
        for (auto& destroy : m_destroyEvents)
        {
            if (destroy == id)
            {
                return false;
            }
        }
        return true;
    }
    return id.GetTs() < m_currentTs || (id.GetTs() == m_currentTs && id.GetUid() <= m_currentUid);
}

Time
PacedSimulatorImpl::GetMaximumSimulationTime() const
{
    return TimeStep(0x7fffffffffffffffLL);
}

uint32_t
PacedSimulatorImpl::GetSystemId() const
{
    return 0;
}

uint32_t
PacedSimulatorImpl::GetContext() const
{
    return m_currentContext;
}

uint64_t
PacedSimulatorImpl::GetEventCount() const
{
    return m_eventCount;
}

std::string
PacedSimulatorImpl::WaitJson() const
{
    std::ostringstream o;
    o << "{\"spin_us\": " << spinNs / 1000 << ", \"sleeps\": " << m_sleeps
      << ", \"wakeups\": " << m_wakeups << ", \"spin_s\": " << double(m_spinNsTotal) / 1e9 << "}";
    return o.str();
}

void
PacedSimulatorImpl::ResetWaitStats()
{
    m_sleeps = 0;
    m_wakeups = 0;
    m_spinNsTotal = 0;
}

} // namespace qbchannel
