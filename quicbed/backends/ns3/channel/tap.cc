// TAP devices inside network namespaces (see tap.h).

#include "tap.h"

#include "json.h"

#include <algorithm>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_arp.h>
#include <linux/if_tun.h>
#include <pthread.h>
#include <sched.h>
#include <sstream>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace qbchannel
{

namespace
{

class NetnsGuard
{
  public:
    explicit NetnsGuard(const std::string& ns)
    {
        m_self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        std::string path = "/var/run/netns/" + ns;
        int target = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (m_self < 0 || target < 0)
        {
            Die("cannot open network namespace " + path + ": " + strerror(errno));
        }
        if (setns(target, CLONE_NEWNET) != 0)
        {
            Die("setns into " + ns + " failed: " + strerror(errno));
        }
        close(target);
    }

    ~NetnsGuard()
    {
        if (setns(m_self, CLONE_NEWNET) != 0)
        {
            Die(std::string("setns back failed: ") + strerror(errno));
        }
        close(m_self);
    }

  private:
    int m_self;
};

} // namespace

int64_t
MonoUs()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

bool
RaiseAboveSimulator()
{
    int policy;
    struct sched_param param;
    if (pthread_getschedparam(pthread_self(), &policy, &param) != 0 || policy != SCHED_FIFO)
    {
        return true; // not real-time: nothing to be above
    }
    param.sched_priority = std::min(param.sched_priority + 1, sched_get_priority_max(SCHED_FIFO));
    return pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
}

void
DelayCounts::Add(int64_t us)
{
    us = std::max<int64_t>(us, 0);
    buckets[uint32_t(us / 100)]++;
    maxUs = std::max(maxUs, us);
}

void
DelayCounts::Merge(const DelayCounts& other)
{
    for (auto& [bucket, count] : other.buckets)
    {
        buckets[bucket] += count;
    }
    maxUs = std::max(maxUs, other.maxUs);
}

std::string
DelayCounts::Json() const
{
    return "\"delay_100us\": " + qbjson::Counts(buckets) + ", \"delay_max_us\": " + std::to_string(maxUs);
}

namespace
{

// A received frame's buffer is preceded by its read time (16 bytes keep the frame aligned).
const size_t STAMP_BYTES = 16;

uint8_t*
NewStampedBuffer(size_t len, int64_t stampUs)
{
    auto* block = static_cast<uint8_t*>(malloc(STAMP_BYTES + len));
    if (!block)
    {
        Die("out of memory for a TAP frame");
    }
    memcpy(block, &stampUs, sizeof(stampUs));
    return block + STAMP_BYTES;
}

int64_t
StampOf(const uint8_t* buf)
{
    int64_t stampUs;
    memcpy(&stampUs, buf - STAMP_BYTES, sizeof(stampUs));
    return stampUs;
}

class QbTapReader : public FdReader
{
  public:
    QbTapReader(QbTapDevice* device, uint32_t bufferSize)
        : m_device(device),
          m_bufferSize(bufferSize)
    {
    }

  private:
    QbTapDevice* m_device;
    uint32_t m_bufferSize;
    bool m_placed = false;

    FdReader::Data DoRead() override
    {
        if (!m_placed)
        {
            m_placed = true;
            if (m_device->readerAbove && !RaiseAboveSimulator())
            {
                Say("warning: a TAP reader could not be raised above the simulator's priority");
            }
        }
        uint8_t* buf = NewStampedBuffer(m_bufferSize, 0);
        ssize_t len = read(m_fd, buf, m_bufferSize);
        int64_t now = MonoUs();
        if (len <= 0)
        {
            free(buf - STAMP_BYTES);
            bool again = len < 0 && (errno == EINTR || errno == EAGAIN);
            return FdReader::Data(nullptr, again ? -1 : 0); // -1: ignored; 0: the reader stops
        }
        memcpy(buf - STAMP_BYTES, &now, sizeof(now));
        m_device->rxFrames++;
        size_t pending = m_device->Pending();
        if (pending >= m_device->pendingLimit)
        {
            m_device->rxDrops++;
            free(buf - STAMP_BYTES);
            return FdReader::Data(nullptr, -1);
        }
        uint64_t seen = m_device->pendingMax.load();
        while (pending + 1 > seen && !m_device->pendingMax.compare_exchange_weak(seen, pending + 1))
        {
        }
        return FdReader::Data(buf, len);
    }
};

} // namespace

size_t
QbTapDevice::Pending()
{
    std::lock_guard<std::mutex> lock(m_pendingReadMutex);
    return m_pendingQueue.size();
}

void
QbTapDevice::ResetStats()
{
    rxFrames = 0;
    rxDrops = 0;
    pendingMax = 0;
    rxDelay = DelayCounts();
}

uint8_t*
QbTapDevice::AllocateBuffer(size_t len)
{
    return NewStampedBuffer(len, 0);
}

void
QbTapDevice::FreeBuffer(uint8_t* buf)
{
    if (!buf)
    {
        return;
    }
    if (int64_t stamp = StampOf(buf))
    {
        rxDelay.Add(MonoUs() - stamp);
    }
    free(buf - STAMP_BYTES);
}

Ptr<FdReader>
QbTapDevice::DoCreateFdReader()
{
    // room for the largest frame the namespace may write: MTU plus Ethernet and VLAN headers
    return Create<QbTapReader>(this, uint32_t(GetMtu()) + 22);
}

int
OpenTap(const std::string& ns, const std::string& ifname)
{
    NetnsGuard guard(ns);
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0)
    {
        Die(std::string("cannot open /dev/net/tun: ") + strerror(errno));
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &ifr) != 0)
    {
        Die("TUNSETIFF " + ifname + " in " + ns + " failed: " + strerror(errno));
    }
    return fd;
}

void
SetTapMac(const std::string& ns, const std::string& ifname, const Mac48Address& mac)
{
    NetnsGuard guard(ns);
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
    {
        Die(std::string("socket: ") + strerror(errno));
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    mac.CopyTo(reinterpret_cast<uint8_t*>(ifr.ifr_hwaddr.sa_data));
    if (ioctl(sock, SIOCSIFHWADDR, &ifr) != 0)
    {
        Die("setting the MAC of " + ifname + " in " + ns + " failed: " + strerror(errno));
    }
    close(sock);
}

void
TapWriter::Start()
{
    m_thread = std::thread(&TapWriter::Loop, this);
}

void
TapWriter::Stop()
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_one();
    if (m_thread.joinable())
    {
        m_thread.join();
    }
}

void
TapWriter::Write(int fd, std::vector<uint8_t>&& frame, uint64_t* errors)
{
    bool wake;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_queue.size() >= maxQueue)
        {
            m_drops++;
            return;
        }
        m_queue.push_back(Item{fd, std::move(frame), errors, MonoUs()});
        m_queueMax = std::max(m_queueMax, m_queue.size());
        wake = m_sleeping;
        m_sleeping = false;
    }
    if (wake)
    {
        m_wake.notify_one();
    }
}

std::string
TapWriter::StatsJson()
{
    std::lock_guard<std::mutex> lock(m_mutex);
    std::ostringstream o;
    o << "{\"drops\": " << m_drops << ", \"queue_max\": " << m_queueMax << ", " << m_delay.Json()
      << ", \"above_simulator\": " << (above ? "true" : "false") << "}";
    return o.str();
}

void
TapWriter::ResetStats()
{
    std::lock_guard<std::mutex> lock(m_mutex);
    m_drops = 0;
    m_queueMax = m_queue.size();
    m_delay = DelayCounts();
}

void
TapWriter::Loop()
{
    if (above && !RaiseAboveSimulator())
    {
        Say("warning: the TAP writer could not be raised above the simulator's priority");
    }
    std::vector<Item> batch;
    DelayCounts delays;
    for (;;)
    {
        // While traffic flows, poll every 50 us instead of being woken per frame: a
        // wake-up costs the simulator thread a futex call and an IPI (VM exit in a VM).
        for (int idle = 0; idle < 8; idle++)
        {
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                if (!m_queue.empty() || m_stop)
                {
                    break;
                }
            }
            struct timespec pause = {0, 50000};
            nanosleep(&pause, nullptr);
        }
        {
            std::unique_lock<std::mutex> lock(m_mutex);
            while (m_queue.empty() && !m_stop)
            {
                m_sleeping = true;
                m_wake.wait(lock);
            }
            if (m_queue.empty() && m_stop)
            {
                return;
            }
            batch.swap(m_queue);
        }
        for (auto& item : batch)
        {
            ssize_t n = write(item.fd, item.frame.data(), item.frame.size());
            if (n != ssize_t(item.frame.size()))
            {
                __atomic_add_fetch(item.errors, 1, __ATOMIC_RELAXED);
            }
            delays.Add(MonoUs() - item.queuedUs);
        }
        batch.clear();
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_delay.Merge(delays);
        }
        delays = DelayCounts();
    }
}

TapWriter g_writer;

} // namespace qbchannel
