// Statistics' building blocks: TxCounters (a radio's transmitted PSDUs, MPDUs, bytes and
// aggregation histogram) and LagMeter (how late the real-time simulator runs its events).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace qbchannel
{

struct TxCounters
{
    uint64_t psdus = 0;
    uint64_t mpdus = 0;
    uint64_t bytes = 0;
    uint64_t retries = 0;
    double airtime = 0; // s, the PSDUs' transmit time
    std::map<uint32_t, uint64_t> hist; // MPDUs per PSDU -> count
    /// data MPDUs by the time from entering the radio queue to the receiver's MAC
    /// acknowledgement, in 100 us buckets -> count
    std::map<uint32_t, uint64_t> delay;

    void Add(uint32_t nMpdus, uint32_t size, uint32_t nRetries, double seconds);
    void AddDelay(int64_t us);
    std::string Json() const;
};

/// How late the real-time simulator runs its events: a histogram of every probe's lag and,
/// for validity over a part of the run (a transfer), each probe late by LATE_US or more
/// with its simulated time, so that any window of the run can be judged afterwards.
class LagMeter
{
  public:
    /// probes at least this late are kept one by one (1 ms: the smaller validity threshold)
    static const int64_t LATE_US = 1000;
    /// at most this many are kept (a run that far behind is invalid long before)
    static const size_t MAX_LATE = 2000000;

    void Reset();
    /// lagUs: how late the probe scheduled for simUs (simulated time since the reset) fired
    void Add(int64_t lagUs, int64_t simUs);
    /// Upper bound (ms) of the bucket holding quantile q.
    double QuantileMs(double q) const;
    uint64_t Over(int64_t us) const;
    std::string Json(double intervalMs) const;
    double MaxMs() const;
    double MeanMs() const;

  private:
    static const int NBUCKETS = 24;
    uint64_t m_samples = 0;
    double m_sum = 0;
    int64_t m_max = 0;
    uint64_t m_buckets[NBUCKETS] = {};
    std::vector<int64_t> m_lateSimUs;
    std::vector<int32_t> m_lateUs;
    uint64_t m_lateDropped = 0;
};

} // namespace qbchannel
