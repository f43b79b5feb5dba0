// Statistics' building blocks: TxCounters (a radio's transmitted PSDUs, MPDUs, bytes and
// aggregation histogram) and LagMeter (how late the real-time simulator runs its events).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace qbchannel
{

struct TxCounters
{
    uint64_t psdus = 0;
    uint64_t mpdus = 0;
    uint64_t bytes = 0;
    uint64_t retries = 0;
    std::map<uint32_t, uint64_t> hist; // MPDUs per PSDU -> count
    /// data MPDUs by the time from entering the radio queue to the receiver's MAC
    /// acknowledgement, in 100 us buckets -> count
    std::map<uint32_t, uint64_t> delay;

    void Add(uint32_t nMpdus, uint32_t size, uint32_t nRetries);
    void AddDelay(int64_t us);
    std::string Json() const;
};

class LagMeter
{
  public:
    void Reset();
    void Add(int64_t lagUs);
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
};

} // namespace qbchannel
