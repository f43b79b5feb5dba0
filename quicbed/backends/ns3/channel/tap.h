// TAP devices inside network namespaces: opening them (setns + TUNSETIFF), setting their
// MAC, QbTapDevice (ns-3's FdNetDevice with its receive path measured) and TapWriter, the
// thread that writes frames into them.
#pragma once

#include "common.h"

#include "ns3/fd-net-device.h"
#include "ns3/mac48-address.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace qbchannel
{

/// Opens TAP ifname inside namespace ns (IFF_TAP | IFF_NO_PI); dies on failure.
int OpenTap(const std::string& ns, const std::string& ifname);

void SetTapMac(const std::string& ns, const std::string& ifname, const Mac48Address& mac);

/// CLOCK_MONOTONIC in microseconds.
int64_t MonoUs();

/// Moves the calling thread one SCHED_FIFO priority above the one it inherited (the
/// simulator's), so that it is not held back while the simulator thread runs on its core;
/// nothing when the process does not run under SCHED_FIFO. False if refused.
bool RaiseAboveSimulator();

/// A histogram of delays in 100 us buckets (bucket -> count), and the largest delay.
struct DelayCounts
{
    std::map<uint32_t, uint64_t> buckets;
    int64_t maxUs = 0;

    void Add(int64_t us);
    void Merge(const DelayCounts& other);
    std::string Json() const;
};

/// ns-3's FdNetDevice with the path from the TAP to the simulator measured. Its own reader
/// thread stamps each frame when read() returns and drops (counting it) a frame that finds
/// more than `pendingLimit` frames waiting for the simulator, instead of FdNetDevice's
/// silent drop followed by a 100 ms sleep of the reader. The stamp travels in front of the
/// frame's buffer; when the simulator thread takes the frame up (FreeBuffer), the time since
/// the stamp is recorded: how long a frame that arrived waited to enter the simulation.
class QbTapDevice : public FdNetDevice
{
  public:
    /// frames waiting for the simulator before the reader drops (FdNetDevice's RxQueueSize
    /// is set above it, so FdNetDevice itself never drops)
    uint32_t pendingLimit = 1000;
    /// the reader thread runs one SCHED_FIFO priority above the simulator
    bool readerAbove = false;

    std::atomic<uint64_t> rxFrames{0}, rxDrops{0};
    std::atomic<uint64_t> pendingMax{0};
    DelayCounts rxDelay; // simulator thread only

    /// frames read but not yet taken up by the simulator
    size_t Pending();
    void ResetStats();

  protected:
    uint8_t* AllocateBuffer(size_t len) override;
    void FreeBuffer(uint8_t* buf) override;

  private:
    Ptr<FdReader> DoCreateFdReader() override;
};

/// Writes frames to the TAPs from its own thread. A write into a TAP runs the receiving
/// namespace's network stack (IP, TCP, the ACK it sends, wake-ups of the app) in the
/// writer's context; on the simulator thread that cost ~25 % of its time at 50 Mbit/s.
/// Its queue is bounded (a frame beyond maxQueue is dropped and counted), and it records
/// each frame's time from Write to the end of its write() and the deepest queue.
class TapWriter
{
  public:
    /// frames waiting to be written before Write drops (a starved writer, not a model)
    size_t maxQueue = 4096;
    /// the writer thread runs one SCHED_FIFO priority above the simulator
    bool above = false;

    void Start();
    void Stop();
    /// Queue one Ethernet frame for fd (called on the simulator thread).
    void Write(int fd, std::vector<uint8_t>&& frame, uint64_t* errors);
    /// "drops", "queue_max", "delay_100us", "delay_max_us" since the last reset
    std::string StatsJson();
    void ResetStats();

  private:
    struct Item
    {
        int fd;
        std::vector<uint8_t> frame;
        uint64_t* errors;
        int64_t queuedUs;
    };

    void Loop();

    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::vector<Item> m_queue;
    bool m_sleeping = false;
    bool m_stop = false;
    uint64_t m_drops = 0;
    size_t m_queueMax = 0;
    DelayCounts m_delay;
    std::thread m_thread;
};

extern TapWriter g_writer;

} // namespace qbchannel
