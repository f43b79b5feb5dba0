// PacedSimulatorImpl: the channel's real-time simulator. It runs the same events in the same
// order as ns-3's RealtimeSimulatorImpl (one scheduler, events due when the wall clock
// reaches their time, best effort when behind); what differs is what keeping time costs:
// * ns-3 takes a mutex and reads the clock three times per event, and its TAP readers signal
//   the simulator thread for every frame; this one reads the clock only when the next event
//   is later than its last reading, and events scheduled by other threads (the TAP readers)
//   go to a side queue that the simulator thread drains, waking it only when it sleeps.
// * ns-3's synchroniser sleeps on a condition variable (clock in microseconds) before every
//   event not yet due, however close; this one sleeps until the event's nanosecond. It can
//   instead spin on the clock for gaps up to spinNs (yielding the core at every turn, for a
//   TAP thread pinned to it at the same priority); that gained nothing measurable here, so
//   spinNs is 0 by default (bench/README.md).
// The channel selects it with "realtime": "paced" (default) and ns-3's with "ns3" (an A/B
// switch; bench/channel.py --realtime both).
#pragma once

#include "ns3/event-impl.h"
#include "ns3/nstime.h"
#include "ns3/scheduler.h"
#include "ns3/simulator-impl.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace qbchannel
{

using namespace ns3;

class PacedSimulatorImpl : public SimulatorImpl
{
  public:
    static TypeId GetTypeId();

    PacedSimulatorImpl();
    ~PacedSimulatorImpl() override;

    /// gaps to the next event up to this long are spun on the clock, longer ones slept
    /// until this long before the event (0, the default: always sleep)
    static int64_t spinNs;

    /// Wall-clock time since the simulation's origin, in simulated time.
    Time RealtimeNow() const;
    /// {"sleeps", "spin_s", "wakeups"} since the last reset
    std::string WaitJson() const;
    void ResetWaitStats();

    void Destroy() override;
    bool IsFinished() const override;
    void Stop() override;
    void Stop(const Time& delay) override;
    EventId Schedule(const Time& delay, EventImpl* event) override;
    void ScheduleWithContext(uint32_t context, const Time& delay, EventImpl* event) override;
    EventId ScheduleNow(EventImpl* event) override;
    EventId ScheduleDestroy(EventImpl* event) override;
    void Remove(const EventId& id) override;
    void Cancel(const EventId& id) override;
    bool IsExpired(const EventId& id) const override;
    void Run() override;
    Time Now() const override;
    Time GetDelayLeft(const EventId& id) const override;
    Time GetMaximumSimulationTime() const override;
    void SetScheduler(ObjectFactory schedulerFactory) override;
    uint32_t GetSystemId() const override;
    uint32_t GetContext() const override;
    uint64_t GetEventCount() const override;

  private:
    struct Foreign
    {
        uint64_t ts;
        uint32_t context;
        EventImpl* event;
    };

    void DoDispose() override;
    Scheduler::Event Insert(uint64_t ts, uint32_t context, EventImpl* event);
    /// moves the events other threads scheduled into the scheduler
    void TakeForeign();
    /// returns when the wall clock reached ts or another thread scheduled an event
    void WaitUntil(uint64_t ts);
    /// the wall clock in time steps since the origin
    uint64_t Wall() const;
    bool OnMainThread() const;

    Ptr<Scheduler> m_events;
    std::list<EventId> m_destroyEvents;
    uint64_t m_currentTs = 0;
    uint32_t m_currentUid = 0;
    uint32_t m_currentContext = 0xffffffff;
    uint32_t m_uid = 4; // 0: invalid, 1: now, 2: destroy events (ns-3's convention)
    int m_unscheduledEvents = 0;
    uint64_t m_eventCount = 0;
    bool m_stop = false;
    std::atomic<bool> m_running{false};
    std::thread::id m_main;
    int64_t m_originNs = 0; // CLOCK_MONOTONIC ns at which simulated time zero was (is) due
    uint64_t m_lastWall = 0; // the latest reading of Wall(), simulator thread only

    std::mutex m_mutex; // guards m_foreign and m_sleeping
    std::condition_variable m_wake;
    std::vector<Foreign> m_foreign;
    std::atomic<bool> m_foreignWaiting{false};
    bool m_sleeping = false;

    uint64_t m_sleeps = 0, m_wakeups = 0;
    int64_t m_spinNsTotal = 0;
};

} // namespace qbchannel
