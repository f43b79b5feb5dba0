// TxCounters and LagMeter (see lag.h).

#include "lag.h"

#include "json.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <sstream>

namespace qbchannel
{

using qbjson::Counts;
using qbjson::Num;

void
TxCounters::Add(uint32_t nMpdus, uint32_t size, uint32_t nRetries, double seconds)
{
    airtime += seconds;
    psdus++;
    mpdus += nMpdus;
    bytes += size;
    retries += nRetries;
    hist[nMpdus]++;
}

void
TxCounters::AddDelay(int64_t us)
{
    delay[uint32_t(us / 100)]++;
}

std::string
TxCounters::Json() const
{
    std::ostringstream o;
    o << "{\"psdus\": " << psdus << ", \"mpdus\": " << mpdus << ", \"bytes\": " << bytes
      << ", \"retries\": " << retries << ", \"airtime_s\": " << Num(airtime)
      << ", \"mean_mpdus_per_psdu\": " << Num(psdus ? double(mpdus) / psdus : 0)
      << ", \"mpdus_per_psdu\": " << Counts(hist) << ", \"mac_delay_100us\": " << Counts(delay) << "}";
    return o.str();
}

void
LagMeter::Reset()
{
    m_samples = 0;
    m_sum = 0;
    m_max = 0;
    std::fill(std::begin(m_buckets), std::end(m_buckets), 0);
    m_lateSimUs.clear();
    m_lateUs.clear();
    m_lateDropped = 0;
}

void
LagMeter::Add(int64_t lagUs, int64_t simUs)
{
    if (lagUs < 0)
    {
        lagUs = 0;
    }
    if (lagUs >= LATE_US)
    {
        if (m_lateUs.size() < MAX_LATE)
        {
            m_lateSimUs.push_back(simUs);
            m_lateUs.push_back(int32_t(std::min<int64_t>(lagUs, INT32_MAX)));
        }
        else
        {
            m_lateDropped++;
        }
    }
    m_samples++;
    m_sum += lagUs;
    m_max = std::max(m_max, lagUs);
    int bucket = 0;
    while (bucket < NBUCKETS - 1 && (int64_t(1) << bucket) <= lagUs)
    {
        bucket++;
    }
    m_buckets[bucket]++;
}

double
LagMeter::QuantileMs(double q) const
{
    if (!m_samples)
    {
        return 0;
    }
    uint64_t need = uint64_t(std::ceil(q * m_samples));
    uint64_t seen = 0;
    for (int b = 0; b < NBUCKETS; b++)
    {
        seen += m_buckets[b];
        if (seen >= need)
        {
            return std::min<double>(double(int64_t(1) << b), double(m_max)) / 1000.0;
        }
    }
    return m_max / 1000.0;
}

uint64_t
LagMeter::Over(int64_t us) const
{
    // counted from the histogram: buckets whose lower bound is >= us
    uint64_t n = 0;
    for (int b = 1; b < NBUCKETS; b++)
    {
        if ((int64_t(1) << (b - 1)) >= us)
        {
            n += m_buckets[b];
        }
    }
    return n;
}

std::string
LagMeter::Json(double intervalMs) const
{
    std::ostringstream o;
    o << "{\"samples\": " << m_samples << ", \"probe_interval_ms\": " << Num(intervalMs)
      << ", \"mean_ms\": " << Num(m_samples ? m_sum / 1000.0 / m_samples : 0)
      << ", \"max_ms\": " << Num(m_max / 1000.0) << ", \"p50_ms\": " << Num(QuantileMs(0.5))
      << ", \"p99_ms\": " << Num(QuantileMs(0.99))
      << ", \"p999_ms\": " << Num(QuantileMs(0.999)) << ", \"over_1ms\": " << Over(1024)
      << ", \"over_4ms\": " << Over(4096) << ", \"over_16ms\": " << Over(16384)
      << ", \"late_min_us\": " << LATE_US << ", \"late_not_kept\": " << m_lateDropped
      << ", \"late_sim_us\": [";
    for (size_t i = 0; i < m_lateSimUs.size(); i++)
    {
        o << (i ? "," : "") << m_lateSimUs[i];
    }
    o << "], \"late_us\": [";
    for (size_t i = 0; i < m_lateUs.size(); i++)
    {
        o << (i ? "," : "") << m_lateUs[i];
    }
    o << "]}";
    return o.str();
}

double
LagMeter::MaxMs() const
{
    return m_max / 1000.0;
}

double
LagMeter::MeanMs() const
{
    return m_samples ? m_sum / 1000.0 / m_samples : 0;
}

} // namespace qbchannel
