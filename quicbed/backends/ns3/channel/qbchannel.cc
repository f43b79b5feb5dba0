// quicbed-ns3-channel: an ns-3 real-time 802.11 channel that real network namespaces plug into.
//
// Usage:  quicbed-ns3-channel CONFIG.json          run (needs root: opens TAPs in namespaces)
//         quicbed-ns3-channel --dry-run CONFIG.json build the simulation without TAPs, print
//                                                   the summary line, exit
//         quicbed-ns3-channel --version
//
// CONFIG.json is written by quicbed.backends.ns3.description (see its docstring for the
// schema). Design, in short (the Python module docstring has the long version):
//
// * Every ns-3 node forwards at layer 2; there is no ns-3 IP stack. Namespaces keep the
//   addresses quicbed resolved, ARP runs end to end over the simulated media.
//   - "switch" nodes (access points, Ethernet switches, a host's wired interface) are
//     learning bridges over their ports (TAP, wired link, AP radio). ns-3's AP MAC can
//     send frames on behalf of other addresses (SendFrom), and relays frames between its
//     own stations itself.
//   - "station" nodes join one TAP to one STA radio. The TAP's MAC is set to the STA
//     radio's MAC, so every frame the namespace sends is the station's own frame: the
//     station never has to bridge (which ns-3's STA MAC, like a real 3-address STA,
//     cannot do).
//   - "mesh" nodes join one TAP (the mesh point's identity) to one ad-hoc HT/VHT radio
//     per channel. Frames travel hop by hop with a mesh header (final destination,
//     origin, TTL, sequence number), like 802.11s's mesh control + address extension,
//     along static shortest paths computed by quicbed (what HWMP converges to).
// * TAP devices are opened inside the namespaces (setns + TUNSETIFF IFF_TAP|IFF_NO_PI)
//   and handed to FdNetDevice for reading; frames to the namespaces are written by a
//   separate writer thread (TapWriter), which keeps the receiving namespace's network
//   stack off the simulator thread.
// * Work-arounds for ns-3 3.37: QbApWifiMac (uplink A-MSDUs to the DS), a longer ADDBA
//   response timeout, a start-up wait for stable associations, resets of block-ack
//   agreements stuck pending, and counting of silent MAC queue drops.
// * Wired links are SimpleNetDevice pairs on a per-direction channel: rate (counting the
//   14-byte Ethernet header, like tbf), delay, jitter, drop-tail queue, Bernoulli or
//   Gilbert-Elliott loss.
// * Real time: RealtimeSimulatorImpl (best effort). A probe event every lag_interval
//   measures RealtimeNow() - Now(): how late events run. quicbed runs this program under
//   SCHED_FIFO.
// * Start-up: wait until every STA is associated, then send warm-up frames (a protocol
//   number that is never forwarded to a namespace) on every radio link until every
//   block-ack agreement exists, print "QUICBED-NS3 READY {...}" and reset statistics.
// * Statistics: SIGUSR1 writes a snapshot, SIGUSR2 resets counters (and writes a
//   snapshot), SIGTERM/SIGINT stop the simulation and write the final statistics.

#include "json.h"

#include "ns3/core-module.h"
#include "ns3/fd-net-device-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/propagation-module.h"
#include "ns3/wifi-module.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <linux/if.h>
#include <linux/if_arp.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <set>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace ns3;
using qbjson::Num;
using qbjson::Quote;
using qbjson::Value;

static const char* VERSION = "quicbed-ns3-channel 1";
static const uint16_t PROTO_MESH = 0x88B5;   // IEEE local experimental ethertype 1
static const uint16_t PROTO_WARMUP = 0x88B6; // IEEE local experimental ethertype 2

static volatile sig_atomic_t g_stop = 0;
static volatile sig_atomic_t g_dump = 0;
static volatile sig_atomic_t g_reset = 0;

static void
OnSignal(int sig)
{
    if (sig == SIGUSR1)
    {
        g_dump = 1;
    }
    else if (sig == SIGUSR2)
    {
        g_reset = 1;
    }
    else
    {
        g_stop = 1;
    }
}

static void
Say(const std::string& line)
{
    std::cout << "QUICBED-NS3 " << line << std::endl;
}

[[noreturn]] static void
Die(const std::string& message)
{
    std::cout << "QUICBED-NS3 ERROR " << message << std::endl;
    std::cerr << "quicbed-ns3-channel: " << message << std::endl;
    _exit(2);
}

static std::string
MacStr(const Mac48Address& mac)
{
    std::ostringstream out;
    out << mac;
    return out.str();
}

static double
NowWallSeconds()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double
CpuSeconds()
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec +
           usage.ru_stime.tv_usec * 1e-6;
}

// ---------------------------------------------------------------------------------------
// TAP devices inside network namespaces
// ---------------------------------------------------------------------------------------

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

static int
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

static void
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

/// Writes frames to the TAPs from its own thread. A write into a TAP runs the receiving
/// namespace's network stack (IP, TCP, the ACK it sends, wake-ups of the app) in the
/// writer's context; on the simulator thread that cost ~25 % of its time at 50 Mbit/s.
class TapWriter
{
  public:
    void Start()
    {
        m_thread = std::thread(&TapWriter::Loop, this);
    }

    void Stop()
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

    /// Queue one Ethernet frame for fd (called on the simulator thread).
    void Write(int fd, std::vector<uint8_t>&& frame, uint64_t* errors)
    {
        bool wake;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_queue.push_back(Item{fd, std::move(frame), errors});
            wake = m_sleeping;
            m_sleeping = false;
        }
        if (wake)
        {
            m_wake.notify_one();
        }
    }

  private:
    struct Item
    {
        int fd;
        std::vector<uint8_t> frame;
        uint64_t* errors;
    };

    void Loop()
    {
        std::vector<Item> batch;
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
            }
            batch.clear();
        }
    }

    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::vector<Item> m_queue;
    bool m_sleeping = false;
    bool m_stop = false;
    std::thread m_thread;
};

static TapWriter g_writer;

// ---------------------------------------------------------------------------------------
// Loss models
// ---------------------------------------------------------------------------------------

/// Bernoulli or Gilbert-Elliott packet loss (netem semantics), plus independent corruption.
class QbLossModel : public ErrorModel
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::QbLossModel").SetParent<ErrorModel>().SetGroupName("Quicbed");
        return tid;
    }

    QbLossModel()
    {
        m_random = CreateObject<UniformRandomVariable>();
    }

    void Configure(const Value& loss, double corrupt)
    {
        m_corrupt = corrupt;
        if (loss.kind == Value::OBJECT)
        {
            std::string model = loss.Str("model", "bernoulli");
            if (model == "bernoulli")
            {
                m_lossGood = loss.Num("probability", 0);
            }
            else if (model == "gilbert_elliott")
            {
                m_ge = true;
                m_p = loss.Num("p", 0);
                m_r = loss.Num("r", 1);
                m_lossBad = loss.Num("loss_bad", 1);
                m_lossGood = loss.Num("loss_good", 0);
            }
            else
            {
                Die("unknown loss model " + model);
            }
        }
    }

    uint64_t drops = 0;

  private:
    bool DoCorrupt(Ptr<Packet> p) override
    {
        bool lost;
        if (m_ge)
        {
            // netem gemodel: the loss probability of the current state, then the transition
            lost = m_random->GetValue() < (m_bad ? m_lossBad : m_lossGood);
            if (m_bad ? m_random->GetValue() < m_r : m_random->GetValue() < m_p)
            {
                m_bad = !m_bad;
            }
        }
        else
        {
            lost = m_lossGood > 0 && m_random->GetValue() < m_lossGood;
        }
        if (!lost && m_corrupt > 0 && m_random->GetValue() < m_corrupt)
        {
            lost = true; // a corrupted frame fails its checksum at the receiver
        }
        drops += lost;
        return lost;
    }

    void DoReset() override
    {
        m_bad = false;
    }

    Ptr<UniformRandomVariable> m_random;
    bool m_ge = false;
    bool m_bad = false;
    double m_p = 0, m_r = 1, m_lossBad = 1, m_lossGood = 0, m_corrupt = 0;
};

NS_OBJECT_ENSURE_REGISTERED(QbLossModel);

/// A fixed frame error rate per transmitter, applied to data MPDUs after the PHY's own
/// SNR-based decision (WifiPhy::PostReceptionErrorModel).
class QbFrameErrorModel : public ErrorModel
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid =
            TypeId("ns3::QbFrameErrorModel").SetParent<ErrorModel>().SetGroupName("Quicbed");
        return tid;
    }

    QbFrameErrorModel()
    {
        m_random = CreateObject<UniformRandomVariable>();
    }

    std::map<Mac48Address, double> rates;
    uint64_t drops = 0;

  private:
    bool DoCorrupt(Ptr<Packet> p) override
    {
        uint8_t buf[20];
        if (p->GetSize() < sizeof(buf))
        {
            return false;
        }
        p->CopyData(buf, sizeof(buf));
        size_t offset = 0;
        if (buf[3] == 0x4e) // A-MPDU subframe delimiter signature: the MAC header follows it
        {
            offset = 4;
        }
        uint8_t type = (buf[offset] >> 2) & 0x3;
        if (type != 2) // only data frames
        {
            return false;
        }
        Mac48Address ta;
        ta.CopyFrom(buf + offset + 10);
        auto it = rates.find(ta);
        if (it == rates.end() || it->second <= 0)
        {
            return false;
        }
        bool lost = m_random->GetValue() < it->second;
        drops += lost;
        return lost;
    }

    void DoReset() override
    {
    }

    Ptr<UniformRandomVariable> m_random;
};

NS_OBJECT_ENSURE_REGISTERED(QbFrameErrorModel);

/// ns-3 3.37's AP forwards every subframe of an uplink A-MSDU back into the BSS, even when
/// its destination is behind the AP (the DS): with A-MSDU on, a station's packets to the
/// wired side were lost. This AP delivers such subframes up to the bridge instead.
class QbApWifiMac : public ApWifiMac
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::QbApWifiMac")
                                .SetParent<ApWifiMac>()
                                .SetGroupName("Quicbed")
                                .AddConstructor<QbApWifiMac>();
        return tid;
    }

  protected:
    void DeaggregateAmsduAndForward(Ptr<const WifiMpdu> mpdu) override
    {
        for (auto& i : *PeekPointer(mpdu))
        {
            Mac48Address from = i.second.GetSourceAddr();
            Mac48Address to = i.second.GetDestinationAddr();
            bool inBss = to.IsGroup() || GetWifiRemoteStationManager()->IsAssociated(to);
            if (to != GetAddress() && inBss)
            {
                Enqueue(i.first->Copy(), to, from); // (the TID falls back to 0, as for all our traffic)
            }
            if (to == GetAddress() || !inBss || to.IsGroup())
            {
                ForwardUp(i.first, from, to);
            }
        }
    }
};

NS_OBJECT_ENSURE_REGISTERED(QbApWifiMac);

// ---------------------------------------------------------------------------------------
// Wired links
// ---------------------------------------------------------------------------------------

/// A full-duplex cable: per-direction delay and jitter between two SimpleNetDevices.
class QbWireChannel : public SimpleChannel
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid =
            TypeId("ns3::QbWireChannel").SetParent<SimpleChannel>().SetGroupName("Quicbed");
        return tid;
    }

    QbWireChannel()
    {
        m_uniform = CreateObject<UniformRandomVariable>();
        m_normal = CreateObject<NormalRandomVariable>();
    }

    Ptr<SimpleNetDevice> ends[2];
    Time delay[2];
    Time jitter[2];
    bool normalJitter[2] = {false, false};
    uint64_t packets[2] = {0, 0};
    uint64_t bytes[2] = {0, 0};

    void Send(Ptr<Packet> p,
              uint16_t protocol,
              Mac48Address to,
              Mac48Address from,
              Ptr<SimpleNetDevice> sender) override
    {
        int dir = sender == ends[0] ? 0 : 1;
        Ptr<SimpleNetDevice> receiver = ends[1 - dir];
        Time d = delay[dir];
        if (jitter[dir].IsStrictlyPositive())
        {
            double j = jitter[dir].GetSeconds();
            double sample = normalJitter[dir] ? m_normal->GetValue(0, j * j, 4 * j)
                                              : m_uniform->GetValue(-j, j);
            d += Seconds(sample);
            if (d.IsNegative())
            {
                d = Seconds(0);
            }
        }
        packets[dir]++;
        bytes[dir] += p->GetSize();
        Simulator::ScheduleWithContext(receiver->GetNode()->GetId(),
                                       d,
                                       &SimpleNetDevice::Receive,
                                       receiver,
                                       p->Copy(),
                                       protocol,
                                       to,
                                       from);
    }

  private:
    Ptr<UniformRandomVariable> m_uniform;
    Ptr<NormalRandomVariable> m_normal;
};

NS_OBJECT_ENSURE_REGISTERED(QbWireChannel);

struct Wire
{
    std::string name;
    Ptr<QbWireChannel> channel;
    Ptr<SimpleNetDevice> dev[2];
    Ptr<QbLossModel> loss[2]; // loss[0]: a->b, applied at b
    Ptr<Queue<Packet>> queue[2];
    uint64_t packetsBase[2] = {0, 0}, bytesBase[2] = {0, 0}, lossBase[2] = {0, 0};
    uint64_t queueBase[2] = {0, 0};
};

// ---------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------

struct TxCounters
{
    uint64_t psdus = 0;
    uint64_t mpdus = 0;
    uint64_t bytes = 0;
    uint64_t retries = 0;
    std::map<uint32_t, uint64_t> hist; // MPDUs per PSDU -> count

    void Add(uint32_t nMpdus, uint32_t size, uint32_t nRetries)
    {
        psdus++;
        mpdus += nMpdus;
        bytes += size;
        retries += nRetries;
        hist[nMpdus]++;
    }

    std::string Json() const
    {
        std::ostringstream o;
        o << "{\"psdus\": " << psdus << ", \"mpdus\": " << mpdus << ", \"bytes\": " << bytes
          << ", \"retries\": " << retries
          << ", \"mean_mpdus_per_psdu\": " << Num(psdus ? double(mpdus) / psdus : 0)
          << ", \"mpdus_per_psdu\": {";
        bool first = true;
        for (auto& [k, v] : hist)
        {
            o << (first ? "" : ", ") << "\"" << k << "\": " << v;
            first = false;
        }
        o << "}}";
        return o.str();
    }
};

class LagMeter
{
  public:
    void Reset()
    {
        m_samples = 0;
        m_sum = 0;
        m_max = 0;
        std::fill(std::begin(m_buckets), std::end(m_buckets), 0);
    }

    void Add(int64_t lagUs)
    {
        if (lagUs < 0)
        {
            lagUs = 0;
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

    /// Upper bound (ms) of the bucket holding quantile q.
    double QuantileMs(double q) const
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

    uint64_t Over(int64_t us) const
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

    std::string Json(double intervalMs) const
    {
        std::ostringstream o;
        o << "{\"samples\": " << m_samples << ", \"probe_interval_ms\": " << Num(intervalMs)
          << ", \"mean_ms\": " << Num(m_samples ? m_sum / 1000.0 / m_samples : 0)
          << ", \"max_ms\": " << Num(m_max / 1000.0) << ", \"p50_ms\": " << Num(QuantileMs(0.5))
          << ", \"p99_ms\": " << Num(QuantileMs(0.99))
          << ", \"p999_ms\": " << Num(QuantileMs(0.999)) << ", \"over_1ms\": " << Over(1024)
          << ", \"over_4ms\": " << Over(4096) << ", \"over_16ms\": " << Over(16384) << "}";
        return o.str();
    }

    double MaxMs() const
    {
        return m_max / 1000.0;
    }

    double MeanMs() const
    {
        return m_samples ? m_sum / 1000.0 / m_samples : 0;
    }

  private:
    static const int NBUCKETS = 24;
    uint64_t m_samples = 0;
    double m_sum = 0;
    int64_t m_max = 0;
    uint64_t m_buckets[NBUCKETS] = {};
};

// ---------------------------------------------------------------------------------------
// Ports
// ---------------------------------------------------------------------------------------

struct TapPort
{
    std::string id;
    std::string ns;
    std::string ifname;
    int fd = -1;
    Mac48Address mac;
    bool macFromRadio = false;
    Ptr<FdNetDevice> dev;
    uint64_t fromNs = 0, toNs = 0, writeErrors = 0, foreignSource = 0;
};

struct WifiPort
{
    std::string id;
    std::string node;
    std::string role; // ap, sta, adhoc
    int channelNumber = 0;
    Ptr<WifiNetDevice> dev;
    Ptr<WifiPhy> phy;
    Ptr<WifiMac> mac;
    Mac48Address addr;
    WifiPhyBand band = WIFI_PHY_BAND_5GHZ;
    bool qos = false;
    bool needsBa = false;
    std::vector<std::string> peerIds;
    std::vector<Mac48Address> peers;
    Ptr<QbFrameErrorModel> frameErrors;
    std::map<std::string, double> frameErrorById;

    // statistics
    TxCounters data;
    std::map<Mac48Address, TxCounters> perReceiver;
    double airData = 0, airCtrl = 0, airMgmt = 0;
    uint64_t ctrlFrames = 0, mgmtFrames = 0;
    uint64_t dropQueue = 0, dropRetry = 0, dropLifetime = 0, dropOld = 0, txDrop = 0;
    uint64_t rxUp = 0;
    uint64_t frameErrorBase = 0;

    void ResetStats()
    {
        data = TxCounters();
        perReceiver.clear();
        airData = airCtrl = airMgmt = 0;
        ctrlFrames = mgmtFrames = 0;
        dropQueue = dropRetry = dropLifetime = dropOld = txDrop = 0;
        rxUp = 0;
        frameErrorBase = frameErrors ? frameErrors->drops : 0;
    }

    void OnPsduBegin(WifiConstPsduMap psdus, WifiTxVector txVector, double /*powerW*/)
    {
        double duration = WifiPhy::CalculateTxDuration(psdus, txVector, band).GetSeconds();
        for (auto& [staId, psdu] : psdus)
        {
            const WifiMacHeader& first = psdu->GetHeader(0);
            if (first.IsData() && first.HasData())
            {
                uint32_t retries = 0;
                for (size_t i = 0; i < psdu->GetNMpdus(); i++)
                {
                    retries += psdu->GetHeader(i).IsRetry();
                }
                uint32_t n = psdu->GetNMpdus();
                data.Add(n, psdu->GetSize(), retries);
                perReceiver[psdu->GetAddr1()].Add(n, psdu->GetSize(), retries);
                airData += duration;
            }
            else if (first.IsCtl())
            {
                ctrlFrames++;
                airCtrl += duration;
            }
            else
            {
                mgmtFrames++;
                airMgmt += duration;
            }
            break; // SU PPDUs only
        }
    }

    void OnDropped(WifiMacDropReason reason, Ptr<const WifiMpdu> /*mpdu*/)
    {
        switch (reason)
        {
        case WIFI_MAC_DROP_FAILED_ENQUEUE:
            dropQueue++;
            break;
        case WIFI_MAC_DROP_EXPIRED_LIFETIME:
            dropLifetime++;
            break;
        case WIFI_MAC_DROP_REACHED_RETRY_LIMIT:
            dropRetry++;
            break;
        default:
            dropOld++;
        }
    }

    void OnTxDrop(Ptr<const Packet>)
    {
        txDrop++;
    }

    void SendRaw(Ptr<Packet> p, Mac48Address dst, uint16_t proto)
    {
        dev->Send(p, dst, proto);
    }

    Ptr<WifiMacQueue> queue; // the queue data frames go to (AC_BE, or the DCF queue)

    /// Hand a frame to the MAC. ns-3 3.37's queue scheduler drops the newest MPDU of a full
    /// queue without a trace, so queue overflow is detected (and counted) here.
    void Enqueue(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto)
    {
        if (queue && queue->GetNPackets() >= queue->GetMaxSize().GetValue())
        {
            dropQueue++;
            return;
        }
        if (role == "ap")
        {
            dev->SendFrom(p, src, dst, proto);
        }
        else
        {
            dev->Send(p, dst, proto);
        }
    }
};

struct WirePort
{
    Wire* wire;
    int end; // 0 = node1 side, 1 = node2 side
};

// A port of a forwarding node: exactly one of tap, wifi, wire is set.
struct Port
{
    TapPort* tap = nullptr;
    WifiPort* wifi = nullptr;
    WirePort wire{nullptr, 0};

    Ptr<NetDevice> Device() const
    {
        if (tap)
        {
            return tap->dev;
        }
        if (wifi)
        {
            return wifi->dev;
        }
        return wire.wire->dev[wire.end];
    }

    void Send(Ptr<Packet> p, Mac48Address src, Mac48Address dst, uint16_t proto) const
    {
        if (tap)
        {
            if (tap->fd < 0)
            {
                return;
            }
            std::vector<uint8_t> frame(14 + p->GetSize());
            dst.CopyTo(frame.data());
            src.CopyTo(frame.data() + 6);
            frame[12] = proto >> 8;
            frame[13] = proto & 0xff;
            p->CopyData(frame.data() + 14, p->GetSize());
            tap->toNs++;
            g_writer.Write(tap->fd, std::move(frame), &tap->writeErrors);
        }
        else if (wifi)
        {
            wifi->Enqueue(p, src, dst, proto);
        }
        else
        {
            // account for the Ethernet header on the wire, as tbf/netem do
            EthernetHeader eth(false);
            eth.SetSource(src);
            eth.SetDestination(dst);
            eth.SetLengthType(proto);
            p->AddHeader(eth);
            wire.wire->dev[wire.end]->SendFrom(p, src, dst, proto);
        }
    }
};

static bool
IgnoreRx(Ptr<NetDevice>, Ptr<const Packet>, uint16_t, const Address&)
{
    return true;
}

/// Strips what Port::Send added on a wire; returns a private copy of the packet.
static Ptr<Packet>
Unwrap(const Port& port, Ptr<const Packet> packet)
{
    Ptr<Packet> copy = packet->Copy();
    if (port.wire.wire)
    {
        EthernetHeader eth(false);
        copy->RemoveHeader(eth);
    }
    return copy;
}

// ---------------------------------------------------------------------------------------
// Forwarding nodes
// ---------------------------------------------------------------------------------------

/// A learning bridge (access point, switch, a host's wired interface).
class Switch
{
  public:
    std::string name;
    std::vector<Port> ports;
    uint64_t flooded = 0, sameSegment = 0, received = 0;

    void Attach()
    {
        for (auto& port : ports)
        {
            Ptr<NetDevice> dev = port.Device();
            dev->SetReceiveCallback(MakeCallback(&IgnoreRx));
            dev->SetPromiscReceiveCallback(MakeCallback(&Switch::Receive, this));
        }
    }

  private:
    std::map<Mac48Address, size_t> m_table;

    bool Receive(Ptr<NetDevice> dev,
                 Ptr<const Packet> packet,
                 uint16_t proto,
                 const Address& fromAddr,
                 const Address& toAddr,
                 NetDevice::PacketType type)
    {
        if (proto == PROTO_WARMUP)
        {
            return true;
        }
        size_t in = 0;
        while (in < ports.size() && ports[in].Device() != dev)
        {
            in++;
        }
        Mac48Address from = Mac48Address::ConvertFrom(fromAddr);
        Mac48Address to = Mac48Address::ConvertFrom(toAddr);
        if (ports[in].tap)
        {
            ports[in].tap->fromNs++;
        }
        received++;
        if (ports[in].wifi)
        {
            ports[in].wifi->rxUp++;
        }
        static const bool debug = getenv("QUICBED_NS3_DEBUG") != nullptr;
        if (debug) // one line per bridged frame on stderr (channel.err)
        {
            std::cerr << Simulator::Now().GetSeconds() << " " << name << " in=" << in << " " << from
                      << " -> " << to << " proto=" << proto << " type=" << type << std::endl;
        }
        m_table[from] = in;
        if (!to.IsGroup())
        {
            auto it = m_table.find(to);
            if (it != m_table.end())
            {
                if (it->second != in)
                {
                    ports[it->second].Send(Unwrap(ports[in], packet), from, to, proto);
                }
                else
                {
                    sameSegment++;
                }
                return true;
            }
            flooded++;
        }
        for (size_t i = 0; i < ports.size(); i++)
        {
            if (i != in)
            {
                ports[i].Send(Unwrap(ports[in], packet), from, to, proto);
            }
        }
        return true;
    }
};

/// A station: the namespace's TAP is the STA radio (same MAC).
class StationRelay
{
  public:
    std::string name;
    TapPort* tap = nullptr;
    WifiPort* radio = nullptr;

    void Attach()
    {
        tap->dev->SetReceiveCallback(MakeCallback(&IgnoreRx));
        tap->dev->SetPromiscReceiveCallback(MakeCallback(&StationRelay::FromTap, this));
        radio->dev->SetReceiveCallback(MakeCallback(&IgnoreRx));
        radio->dev->SetPromiscReceiveCallback(MakeCallback(&StationRelay::FromRadio, this));
    }

  private:
    bool FromTap(Ptr<NetDevice>,
                 Ptr<const Packet> packet,
                 uint16_t proto,
                 const Address& fromAddr,
                 const Address& toAddr,
                 NetDevice::PacketType)
    {
        tap->fromNs++;
        if (Mac48Address::ConvertFrom(fromAddr) != radio->addr)
        {
            tap->foreignSource++; // a 3-address station sends its own frames only
            return true;
        }
        radio->Enqueue(packet->Copy(), radio->addr, Mac48Address::ConvertFrom(toAddr), proto);
        return true;
    }

    bool FromRadio(Ptr<NetDevice>,
                   Ptr<const Packet> packet,
                   uint16_t proto,
                   const Address& fromAddr,
                   const Address& toAddr,
                   NetDevice::PacketType type)
    {
        if (proto == PROTO_WARMUP || type == NetDevice::NS3_PACKET_OTHERHOST)
        {
            return true;
        }
        radio->rxUp++;
        Port out;
        out.tap = tap;
        out.Send(packet->Copy(),
                 Mac48Address::ConvertFrom(fromAddr),
                 Mac48Address::ConvertFrom(toAddr),
                 proto);
        return true;
    }
};

/// Mesh header: final destination, origin, TTL, sequence number, inner protocol.
class QbMeshHeader : public Header
{
  public:
    Mac48Address dst, src;
    uint8_t ttl = 32;
    uint32_t seq = 0; // 24 bits used
    uint16_t proto = 0;

    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::QbMeshHeader")
                                .SetParent<Header>()
                                .SetGroupName("Quicbed")
                                .AddConstructor<QbMeshHeader>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }

    uint32_t GetSerializedSize() const override
    {
        return 18;
    }

    void Serialize(Buffer::Iterator it) const override
    {
        it.WriteHtonU16(proto);
        WriteTo(it, dst);
        WriteTo(it, src);
        it.WriteU8(ttl);
        it.WriteU8((seq >> 16) & 0xff);
        it.WriteHtonU16(seq & 0xffff);
    }

    uint32_t Deserialize(Buffer::Iterator it) override
    {
        proto = it.ReadNtohU16();
        ReadFrom(it, dst);
        ReadFrom(it, src);
        ttl = it.ReadU8();
        seq = uint32_t(it.ReadU8()) << 16;
        seq |= it.ReadNtohU16();
        return 18;
    }

    void Print(std::ostream& os) const override
    {
        os << "mesh dst=" << dst << " src=" << src << " ttl=" << +ttl << " seq=" << seq;
    }
};

NS_OBJECT_ENSURE_REGISTERED(QbMeshHeader);

class MeshRelay
{
  public:
    std::string name;
    TapPort* tap = nullptr;
    std::vector<WifiPort*> radios;
    // final destination (identity MAC) -> (radio index, next hop radio MAC)
    std::map<Mac48Address, std::pair<size_t, Mac48Address>> routes;
    uint64_t delivered = 0, forwarded = 0, noRoute = 0, ttlDrops = 0, duplicates = 0,
             notPeer = 0, broadcasts = 0;

    void Attach()
    {
        tap->dev->SetReceiveCallback(MakeCallback(&IgnoreRx));
        tap->dev->SetPromiscReceiveCallback(MakeCallback(&MeshRelay::FromTap, this));
        for (auto radio : radios)
        {
            radio->dev->SetReceiveCallback(MakeCallback(&IgnoreRx));
            radio->dev->SetPromiscReceiveCallback(MakeCallback(&MeshRelay::FromRadio, this));
        }
    }

    void ResetStats()
    {
        delivered = forwarded = noRoute = ttlDrops = duplicates = notPeer = broadcasts = 0;
    }

  private:
    uint32_t m_seq = 0;
    std::map<Mac48Address, std::deque<uint32_t>> m_seen;

    void Flood(Ptr<const Packet> inner, const QbMeshHeader& header)
    {
        for (auto radio : radios)
        {
            Ptr<Packet> p = inner->Copy();
            p->AddHeader(header);
            radio->Enqueue(p, radio->addr, Mac48Address::GetBroadcast(), PROTO_MESH);
        }
    }

    bool FromTap(Ptr<NetDevice>,
                 Ptr<const Packet> packet,
                 uint16_t proto,
                 const Address& fromAddr,
                 const Address& toAddr,
                 NetDevice::PacketType)
    {
        tap->fromNs++;
        QbMeshHeader header;
        header.src = Mac48Address::ConvertFrom(fromAddr);
        header.dst = Mac48Address::ConvertFrom(toAddr);
        header.proto = proto;
        if (header.src != tap->mac)
        {
            tap->foreignSource++;
            return true;
        }
        if (header.dst.IsGroup())
        {
            header.seq = (++m_seq) & 0xffffff;
            broadcasts++;
            Flood(packet, header);
            return true;
        }
        Route(packet->Copy(), header);
        return true;
    }

    void Route(Ptr<Packet> inner, const QbMeshHeader& header)
    {
        auto it = routes.find(header.dst);
        if (it == routes.end())
        {
            noRoute++;
            return;
        }
        inner->AddHeader(header);
        WifiPort* radio = radios[it->second.first];
        radio->Enqueue(inner, radio->addr, it->second.second, PROTO_MESH);
    }

    bool Seen(const QbMeshHeader& header)
    {
        auto& recent = m_seen[header.src];
        if (std::find(recent.begin(), recent.end(), header.seq) != recent.end())
        {
            return true;
        }
        recent.push_back(header.seq);
        if (recent.size() > 64)
        {
            recent.pop_front();
        }
        return false;
    }

    bool FromRadio(Ptr<NetDevice> dev,
                   Ptr<const Packet> packet,
                   uint16_t proto,
                   const Address& fromAddr,
                   const Address& toAddr,
                   NetDevice::PacketType type)
    {
        if (proto != PROTO_MESH || type == NetDevice::NS3_PACKET_OTHERHOST)
        {
            return true;
        }
        WifiPort* radio = nullptr;
        for (auto r : radios)
        {
            if (r->dev == dev)
            {
                radio = r;
            }
        }
        Mac48Address from = Mac48Address::ConvertFrom(fromAddr);
        if (std::find(radio->peers.begin(), radio->peers.end(), from) == radio->peers.end())
        {
            notPeer++; // heard, but not a peer link of ours (like an unpeered 802.11s neighbour)
            return true;
        }
        radio->rxUp++;
        Ptr<Packet> inner = packet->Copy();
        QbMeshHeader header;
        inner->RemoveHeader(header);
        Port out;
        out.tap = tap;
        if (header.dst.IsGroup())
        {
            if (header.src == tap->mac || Seen(header))
            {
                duplicates++;
                return true;
            }
            delivered++;
            out.Send(inner->Copy(), header.src, header.dst, header.proto);
            if (header.ttl > 1)
            {
                header.ttl--;
                Flood(inner, header);
            }
            return true;
        }
        if (header.dst == tap->mac)
        {
            delivered++;
            out.Send(inner, header.src, header.dst, header.proto);
            return true;
        }
        if (header.ttl <= 1)
        {
            ttlDrops++;
            return true;
        }
        header.ttl--;
        forwarded++;
        Route(inner, header);
        return true;
    }
};

// ---------------------------------------------------------------------------------------
// The channel program
// ---------------------------------------------------------------------------------------

class Program
{
  public:
    explicit Program(const Value& config, bool dryRun)
        : m_config(config),
          m_dryRun(dryRun)
    {
    }

    void Build();
    void Run();

  private:
    const Value& m_config;
    bool m_dryRun;
    std::map<std::string, Ptr<YansWifiChannel>> m_channels; // band -> channel
    std::map<std::string, Value> m_channelSpecs;
    std::vector<std::unique_ptr<TapPort>> m_taps;
    std::vector<std::unique_ptr<WifiPort>> m_radios;
    std::vector<std::unique_ptr<Wire>> m_wires;
    std::vector<std::unique_ptr<Switch>> m_switches;
    std::vector<std::unique_ptr<StationRelay>> m_stations;
    std::vector<std::unique_ptr<MeshRelay>> m_meshes;
    std::map<std::string, WifiPort*> m_radioById;
    std::map<std::string, TapPort*> m_tapByNode; // mesh node name -> its TAP (identity)

    Ptr<RealtimeSimulatorImpl> m_rt;
    Time m_probeInterval = MicroSeconds(1000);
    Time m_liveInterval = Seconds(1);
    LagMeter m_lag;
    bool m_ready = false;
    int m_phase = 0;
    Time m_lastWarmup;
    Time m_allAssociatedSince = Time(-1);
    std::map<std::string, Time> m_missingSince; // link -> when its agreement was first missing
    uint64_t m_snapshots = 0;
    uint64_t m_resets = 0;
    double m_wallStart = 0, m_cpuStart = 0;
    Time m_simStart;
    std::string m_statsFile, m_snapshotFile, m_liveFile;

    Ptr<YansWifiChannel> GetChannel(const std::string& band);
    WifiPort* BuildRadio(Ptr<Node> node, const std::string& nodeName, const Value& spec);
    TapPort* BuildTap(Ptr<Node> node, const Value& spec);
    void BuildWires();
    void ResolvePeers();

    void Probe();
    void Live();
    void ReadyCheck();
    void SendWarmup();
    std::vector<std::string> MissingAgreements() const;
    void ResetStuckAgreements(const std::vector<std::string>& missing);
    size_t UnassociatedStations() const;
    void ResetStats();
    std::string StatsJson(bool final) const;
    void WriteFile(const std::string& path, const std::string& text) const;
};

Ptr<YansWifiChannel>
Program::GetChannel(const std::string& band)
{
    auto it = m_channels.find(band);
    if (it != m_channels.end())
    {
        return it->second;
    }
    const Value& props = m_config["propagation"];
    Ptr<YansWifiChannel> channel = CreateObject<YansWifiChannel>();
    channel->SetPropagationDelayModel(CreateObject<ConstantSpeedPropagationDelayModel>());
    std::string model = props.Str("model", "log_distance");
    const Value& byBand = props["reference_loss_db"];
    double refLoss = byBand.kind == Value::OBJECT ? byBand.Num(band, 46.6777) : 46.6777;
    if (model == "log_distance")
    {
        Ptr<LogDistancePropagationLossModel> loss = CreateObject<LogDistancePropagationLossModel>();
        loss->SetPathLossExponent(props.Num("exponent", 3.0));
        loss->SetReference(1.0, refLoss);
        channel->SetPropagationLossModel(loss);
    }
    else if (model == "fixed_rss")
    {
        Ptr<FixedRssLossModel> loss = CreateObject<FixedRssLossModel>();
        loss->SetRss(props.Num("rss_dbm", -50));
        channel->SetPropagationLossModel(loss);
    }
    else if (model == "friis")
    {
        Ptr<FriisPropagationLossModel> loss = CreateObject<FriisPropagationLossModel>();
        loss->SetFrequency(band == "2.4GHz" ? 2.437e9 : 5.25e9);
        channel->SetPropagationLossModel(loss);
    }
    else
    {
        Die("unknown propagation model " + model);
    }
    m_channels[band] = channel;
    return channel;
}

static std::string
ModeName(const std::string& standard, const std::string& band, int mcs)
{
    if (standard == "802.11n")
    {
        return "HtMcs" + std::to_string(mcs);
    }
    if (standard == "802.11ac")
    {
        return "VhtMcs" + std::to_string(mcs);
    }
    if (standard == "802.11g" || (standard != "802.11a" && band == "2.4GHz"))
    {
        return "ErpOfdmRate54Mbps";
    }
    return "OfdmRate54Mbps";
}

WifiPort*
Program::BuildRadio(Ptr<Node> node, const std::string& nodeName, const Value& spec)
{
    auto port = std::make_unique<WifiPort>();
    port->id = spec.At("id").AsStr();
    port->node = nodeName;
    port->role = spec.At("role").AsStr();
    std::string standard = spec.Str("standard", "802.11n");
    std::string band = spec.Str("band", "5GHz");
    int width = int(spec.Num("width", 20));
    int number = int(spec.At("ns3_channel").AsNum());
    int primary20 = int(spec.Num("primary20", 0));
    port->channelNumber = int(spec.Num("channel", number));
    bool ht = standard == "802.11n" || standard == "802.11ac";
    port->band = band == "2.4GHz" ? WIFI_PHY_BAND_2_4GHZ : WIFI_PHY_BAND_5GHZ;

    WifiHelper wifi;
    if (standard == "802.11n")
    {
        wifi.SetStandard(WIFI_STANDARD_80211n);
    }
    else if (standard == "802.11ac")
    {
        wifi.SetStandard(WIFI_STANDARD_80211ac);
    }
    else if (standard == "802.11g")
    {
        wifi.SetStandard(WIFI_STANDARD_80211g);
    }
    else if (standard == "802.11a")
    {
        wifi.SetStandard(WIFI_STANDARD_80211a);
    }
    else
    {
        Die("unknown standard " + standard);
    }
    int mcs = int(spec.Num("mcs", 7));
    int nss = 1;
    std::string rateControl = spec.Str("rate_control", "constant");
    if (rateControl == "minstrel")
    {
        wifi.SetRemoteStationManager(ht ? "ns3::MinstrelHtWifiManager" : "ns3::MinstrelWifiManager");
        if (standard == "802.11n")
        {
            nss = int(spec.Num("spatial_streams", 1));
        }
    }
    else
    {
        if (standard == "802.11n")
        {
            nss = mcs / 8 + 1;
        }
        std::string control = band == "2.4GHz" ? "ErpOfdmRate6Mbps" : "OfdmRate6Mbps";
        wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager",
                                     "DataMode",
                                     StringValue(ModeName(standard, band, mcs)),
                                     "ControlMode",
                                     StringValue(control));
    }
    YansWifiPhyHelper phy;
    phy.SetChannel(GetChannel(band));
    std::ostringstream settings;
    settings << "{" << number << ", " << width << ", "
             << (band == "2.4GHz" ? "BAND_2_4GHZ" : "BAND_5GHZ") << ", " << primary20 << "}";
    phy.Set("ChannelSettings", StringValue(settings.str()));
    double power = spec.Num("tx_power_dbm", 16.0206);
    phy.Set("TxPowerStart", DoubleValue(power));
    phy.Set("TxPowerEnd", DoubleValue(power));
    if (nss > 1)
    {
        phy.Set("Antennas", UintegerValue(nss));
        phy.Set("MaxSupportedTxSpatialStreams", UintegerValue(nss));
        phy.Set("MaxSupportedRxSpatialStreams", UintegerValue(nss));
    }

    WifiMacHelper mac;
    uint32_t ampdu = uint32_t(spec.Num("ampdu_max_bytes", 65535));
    uint32_t amsdu = uint32_t(spec.Num("amsdu_max_bytes", 0));
    Ssid ssid(spec.Str("ssid", "quicbed"));
    if (port->role == "ap")
    {
        mac.SetType("ns3::QbApWifiMac",
                    "Ssid",
                    SsidValue(ssid),
                    "BE_MaxAmpduSize",
                    UintegerValue(ampdu),
                    "BE_MaxAmsduSize",
                    UintegerValue(amsdu));
    }
    else if (port->role == "sta")
    {
        mac.SetType("ns3::StaWifiMac",
                    "Ssid",
                    SsidValue(ssid),
                    "BE_MaxAmpduSize",
                    UintegerValue(ampdu),
                    "BE_MaxAmsduSize",
                    UintegerValue(amsdu));
    }
    else if (port->role == "adhoc")
    {
        mac.SetType("ns3::AdhocWifiMac",
                    "BE_MaxAmpduSize",
                    UintegerValue(ampdu),
                    "BE_MaxAmsduSize",
                    UintegerValue(amsdu));
    }
    else
    {
        Die("unknown radio role " + port->role);
    }
    NetDeviceContainer devices = wifi.Install(phy, mac, node);
    port->dev = DynamicCast<WifiNetDevice>(devices.Get(0));
    port->phy = port->dev->GetPhy();
    port->mac = port->dev->GetMac();
    port->addr = Mac48Address::ConvertFrom(port->dev->GetAddress());
    port->qos = ht;
    port->needsBa = ht && (ampdu > 0 || standard == "802.11ac");
    if (ht)
    {
        port->dev->GetHtConfiguration()->SetShortGuardIntervalSupported(
            spec.Str("guard_interval", "long") == "short");
        Ptr<QosTxop> be = port->mac->GetQosTxop(AC_BE);
        port->queue = be->GetWifiMacQueue();
        be->GetWifiMacQueue()->SetMaxSize(
            QueueSize(QueueSizeUnit::PACKETS, uint32_t(spec.Num("queue_packets", 500))));
        if (spec.Has("queue_max_delay_ms"))
        {
            be->GetWifiMacQueue()->SetAttribute(
                "MaxDelay",
                TimeValue(MilliSeconds(spec.At("queue_max_delay_ms").AsNum())));
        }
    }
    else
    {
        port->queue = port->mac->GetTxop()->GetWifiMacQueue();
        port->queue->SetMaxSize(
            QueueSize(QueueSizeUnit::PACKETS, uint32_t(spec.Num("queue_packets", 500))));
    }
    if (port->role == "adhoc")
    {
        // An AP advertises the mandatory rates as its basic rate set; do the same for the
        // ad-hoc radios so that control responses (block ACKs) use the same rates.
        Ptr<WifiRemoteStationManager> manager = port->dev->GetRemoteStationManager();
        for (const auto& mode : port->phy->GetModeList())
        {
            if (mode.IsMandatory() && mode.GetModulationClass() != WIFI_MOD_CLASS_DSSS &&
                mode.GetModulationClass() != WIFI_MOD_CLASS_HR_DSSS)
            {
                manager->AddBasicMode(mode);
            }
        }
    }
    for (const auto& peer : spec["peers"].Arr())
    {
        port->peerIds.push_back(peer.AsStr());
    }
    const Value& errors = spec["frame_error"];
    if (errors.kind == Value::OBJECT)
    {
        for (auto& [peerId, rate] : errors.o)
        {
            port->frameErrorById[peerId] = rate.AsNum();
        }
    }
    port->phy->TraceConnectWithoutContext("PhyTxPsduBegin",
                                          MakeCallback(&WifiPort::OnPsduBegin, port.get()));
    port->mac->TraceConnectWithoutContext("DroppedMpdu",
                                          MakeCallback(&WifiPort::OnDropped, port.get()));
    port->mac->TraceConnectWithoutContext("MacTxDrop", MakeCallback(&WifiPort::OnTxDrop, port.get()));
    WifiPort* raw = port.get();
    m_radioById[raw->id] = raw;
    m_radios.push_back(std::move(port));
    return raw;
}

TapPort*
Program::BuildTap(Ptr<Node> node, const Value& spec)
{
    auto tap = std::make_unique<TapPort>();
    tap->id = spec.At("id").AsStr();
    tap->ns = spec.At("namespace").AsStr();
    tap->ifname = spec.At("ifname").AsStr();
    if (spec.Has("mac"))
    {
        tap->mac = Mac48Address(spec.At("mac").AsStr().c_str());
    }
    tap->fd = m_dryRun ? -1 : OpenTap(tap->ns, tap->ifname);
    tap->dev = CreateObject<FdNetDevice>();
    if (tap->fd >= 0)
    {
        tap->dev->SetFileDescriptor(tap->fd);
    }
    node->AddDevice(tap->dev);
    TapPort* raw = tap.get();
    m_taps.push_back(std::move(tap));
    return raw;
}

void
Program::BuildWires()
{
    for (const auto& spec : m_config["wires"].Arr())
    {
        auto wire = std::make_unique<Wire>();
        wire->name = spec.At("name").AsStr();
        wire->channel = CreateObject<QbWireChannel>();
        const char* dirs[2] = {"forward", "backward"};
        for (int d = 0; d < 2; d++)
        {
            const Value& shape = spec[dirs[d]];
            Ptr<SimpleNetDevice> dev = CreateObject<SimpleNetDevice>();
            dev->SetAddress(Mac48Address::Allocate());
            double rate = shape.Num("rate_bps", 0);
            if (rate > 0)
            {
                dev->SetAttribute("DataRate", DataRateValue(DataRate(uint64_t(rate))));
            }
            Ptr<DropTailQueue<Packet>> queue = CreateObject<DropTailQueue<Packet>>();
            queue->SetMaxSize(
                QueueSize(QueueSizeUnit::PACKETS, uint32_t(shape.Num("queue_packets", 1000))));
            dev->SetQueue(queue);
            wire->queue[d] = queue;
            wire->dev[d] = dev;
            wire->channel->delay[d] = Seconds(shape.Num("delay_s", 0));
            wire->channel->jitter[d] = Seconds(shape.Num("jitter_s", 0));
            wire->channel->normalJitter[d] = shape.Str("jitter_distribution", "uniform") == "normal";
            Ptr<QbLossModel> loss = CreateObject<QbLossModel>();
            loss->Configure(shape["loss"], shape.Num("corrupt", 0));
            wire->loss[d] = loss;
        }
        for (int d = 0; d < 2; d++)
        {
            wire->dev[d]->SetChannel(wire->channel);
            wire->channel->ends[d] = wire->dev[d];
            // the loss of direction d (d's device sends) is applied where it arrives
            wire->dev[1 - d]->SetReceiveErrorModel(wire->loss[d]);
        }
        m_wires.push_back(std::move(wire));
    }
}

void
Program::Build()
{
    // ns-3 3.37: if an ADDBA response comes later than AddBaResponseTimeout (1 ms by default;
    // it does when dozens of stations set up agreements at once), the originator sends its
    // next MPDU with a normal ACK, the recipient (whose agreement already exists) delivers
    // it outside its reorder window, the window never advances and every later MPDU of that
    // link is held forever. Waiting longer for the response avoids that race.
    Config::SetDefault("ns3::QosTxop::AddBaResponseTimeout",
                       TimeValue(MilliSeconds(int64_t(m_config.Num("addba_timeout_ms", 500)))));
    RngSeedManager::SetSeed(uint32_t(m_config.Num("seed", 1)));
    RngSeedManager::SetRun(uint64_t(m_config.Num("run", 1)));
    m_probeInterval = MicroSeconds(int64_t(m_config.Num("lag_interval_us", 1000)));
    m_liveInterval = MilliSeconds(int64_t(m_config.Num("live_interval_ms", 1000)));
    m_statsFile = m_config.Str("stats_file", "");
    m_snapshotFile = m_config.Str("snapshot_file", "");
    m_liveFile = m_config.Str("live_file", "");

    BuildWires();
    std::map<std::string, Wire*> wireByName;
    for (auto& wire : m_wires)
    {
        wireByName[wire->name] = wire.get();
    }

    for (const auto& nodeSpec : m_config["nodes"].Arr())
    {
        std::string name = nodeSpec.At("name").AsStr();
        std::string kind = nodeSpec.At("kind").AsStr();
        Ptr<Node> node = CreateObject<Node>();
        std::vector<Port> ports;
        bool hasRadio = false;
        for (const auto& portSpec : nodeSpec["ports"].Arr())
        {
            std::string portKind = portSpec.At("kind").AsStr();
            Port port;
            if (portKind == "tap")
            {
                port.tap = BuildTap(node, portSpec);
            }
            else if (portKind == "wifi")
            {
                hasRadio = true;
                port.wifi = BuildRadio(node, name, portSpec);
            }
            else if (portKind == "wire")
            {
                auto it = wireByName.find(portSpec.At("wire").AsStr());
                if (it == wireByName.end())
                {
                    Die("node " + name + ": unknown wire " + portSpec.At("wire").AsStr());
                }
                int end = int(portSpec.At("end").AsNum());
                port.wire = WirePort{it->second, end};
                node->AddDevice(it->second->dev[end]);
            }
            else
            {
                Die("node " + name + ": unknown port kind " + portKind);
            }
            ports.push_back(port);
        }
        if (hasRadio)
        {
            Ptr<ConstantPositionMobilityModel> mobility =
                CreateObject<ConstantPositionMobilityModel>();
            const auto& pos = nodeSpec["position"].Arr();
            mobility->SetPosition(Vector(pos.size() > 0 ? pos[0].AsNum() : 0,
                                         pos.size() > 1 ? pos[1].AsNum() : 0,
                                         pos.size() > 2 ? pos[2].AsNum() : 0));
            node->AggregateObject(mobility);
        }
        if (kind == "switch")
        {
            auto sw = std::make_unique<Switch>();
            sw->name = name;
            sw->ports = ports;
            m_switches.push_back(std::move(sw));
        }
        else if (kind == "station")
        {
            auto relay = std::make_unique<StationRelay>();
            relay->name = name;
            for (auto& port : ports)
            {
                if (port.tap)
                {
                    relay->tap = port.tap;
                }
                if (port.wifi)
                {
                    relay->radio = port.wifi;
                }
            }
            if (!relay->tap || !relay->radio || ports.size() != 2)
            {
                Die("station node " + name + " needs one TAP and one radio");
            }
            relay->tap->mac = relay->radio->addr; // the namespace's interface IS the station
            relay->tap->macFromRadio = true;
            m_stations.push_back(std::move(relay));
        }
        else if (kind == "mesh")
        {
            auto relay = std::make_unique<MeshRelay>();
            relay->name = name;
            for (auto& port : ports)
            {
                if (port.tap)
                {
                    relay->tap = port.tap;
                }
                if (port.wifi)
                {
                    relay->radios.push_back(port.wifi);
                }
            }
            if (!relay->tap || relay->radios.empty())
            {
                Die("mesh node " + name + " needs one TAP and at least one radio");
            }
            m_tapByNode[name] = relay->tap;
            m_meshes.push_back(std::move(relay));
        }
        else
        {
            Die("node " + name + ": unknown kind " + kind);
        }
    }
    ResolvePeers();

    // Mesh routes: identity of the destination mesh node -> (local radio, next-hop radio).
    size_t meshIndex = 0;
    for (const auto& nodeSpec : m_config["nodes"].Arr())
    {
        if (nodeSpec.At("kind").AsStr() != "mesh")
        {
            continue;
        }
        MeshRelay* relay = m_meshes[meshIndex++].get();
        const Value& routes = nodeSpec["routes"];
        if (routes.kind != Value::OBJECT)
        {
            continue;
        }
        for (auto& [destination, hop] : routes.o)
        {
            auto dst = m_tapByNode.find(destination);
            auto local = m_radioById.find(hop.At("radio").AsStr());
            auto next = m_radioById.find(hop.At("next_hop").AsStr());
            if (dst == m_tapByNode.end() || local == m_radioById.end() || next == m_radioById.end())
            {
                Die("mesh node " + relay->name + ": bad route to " + destination);
            }
            size_t index = std::find(relay->radios.begin(), relay->radios.end(), local->second) -
                           relay->radios.begin();
            if (index == relay->radios.size())
            {
                Die("mesh node " + relay->name + ": route via a radio of another node");
            }
            relay->routes[dst->second->mac] = {index, next->second->addr};
        }
    }

    for (auto& sw : m_switches)
    {
        sw->Attach();
    }
    for (auto& relay : m_stations)
    {
        relay->Attach();
    }
    for (auto& relay : m_meshes)
    {
        relay->Attach();
    }
    for (auto& tap : m_taps)
    {
        if (tap->mac == Mac48Address())
        {
            tap->mac = Mac48Address::Allocate();
        }
        tap->dev->SetAddress(tap->mac);
        if (!m_dryRun)
        {
            SetTapMac(tap->ns, tap->ifname, tap->mac);
        }
    }
}

void
Program::ResolvePeers()
{
    for (auto& radio : m_radios)
    {
        for (const auto& peerId : radio->peerIds)
        {
            auto it = m_radioById.find(peerId);
            if (it == m_radioById.end())
            {
                Die("radio " + radio->id + ": unknown peer " + peerId);
            }
            radio->peers.push_back(it->second->addr);
        }
        if (!radio->frameErrorById.empty())
        {
            radio->frameErrors = CreateObject<QbFrameErrorModel>();
            for (auto& [peerId, rate] : radio->frameErrorById)
            {
                auto it = m_radioById.find(peerId);
                if (it == m_radioById.end())
                {
                    Die("radio " + radio->id + ": unknown frame_error peer " + peerId);
                }
                radio->frameErrors->rates[it->second->addr] = rate;
            }
            radio->phy->SetPostReceptionErrorModel(radio->frameErrors);
        }
    }
}

size_t
Program::UnassociatedStations() const
{
    size_t n = 0;
    for (auto& radio : m_radios)
    {
        if (radio->role == "sta" && !DynamicCast<StaWifiMac>(radio->mac)->IsAssociated())
        {
            n++;
        }
    }
    return n;
}

std::vector<std::string>
Program::MissingAgreements() const
{
    std::vector<std::string> missing;
    for (auto& radio : m_radios)
    {
        if (!radio->needsBa)
        {
            continue;
        }
        Ptr<QosTxop> be = radio->mac->GetQosTxop(AC_BE);
        for (size_t i = 0; i < radio->peers.size(); i++)
        {
            if (!be->GetBaAgreementEstablished(radio->peers[i], 0))
            {
                missing.push_back(radio->id + "->" + radio->peerIds[i]);
            }
        }
    }
    return missing;
}

void
Program::ResetStuckAgreements(const std::vector<std::string>& missing)
{
    // An ADDBA request lost together with an association (see ReadyCheck) leaves the
    // agreement PENDING for good, and no new request is ever sent: reset such agreements.
    std::set<std::string> now(missing.begin(), missing.end());
    for (auto it = m_missingSince.begin(); it != m_missingSince.end();)
    {
        it = now.count(it->first) ? std::next(it) : m_missingSince.erase(it);
    }
    for (auto& radio : m_radios)
    {
        if (!radio->needsBa)
        {
            continue;
        }
        Ptr<QosTxop> be = radio->mac->GetQosTxop(AC_BE);
        for (size_t i = 0; i < radio->peers.size(); i++)
        {
            std::string link = radio->id + "->" + radio->peerIds[i];
            if (!now.count(link))
            {
                continue;
            }
            auto [entry, fresh] = m_missingSince.emplace(link, Simulator::Now());
            if (!fresh && Simulator::Now() - entry->second > Seconds(1) &&
                be->GetBaManager()->ExistsAgreementInState(radio->peers[i],
                                                           0,
                                                           OriginatorBlockAckAgreement::PENDING))
            {
                be->GetBaManager()->NotifyAgreementReset(radio->peers[i], 0);
                entry->second = Simulator::Now();
            }
        }
    }
}

void
Program::SendWarmup()
{
    uint32_t packets = uint32_t(m_config["warmup"].Num("packets", 8));
    uint32_t size = uint32_t(m_config["warmup"].Num("bytes", 200));
    for (auto& radio : m_radios)
    {
        Ptr<QosTxop> be = radio->qos ? radio->mac->GetQosTxop(AC_BE) : nullptr;
        for (auto& peer : radio->peers)
        {
            if (be && be->GetBaAgreementEstablished(peer, 0))
            {
                continue;
            }
            for (uint32_t i = 0; i < packets; i++)
            {
                // in the radio's node context, like traffic arriving from its namespace
                Simulator::ScheduleWithContext(radio->dev->GetNode()->GetId(),
                                               Seconds(0),
                                               &WifiPort::SendRaw,
                                               radio.get(),
                                               Create<Packet>(size),
                                               peer,
                                               PROTO_WARMUP);
            }
        }
    }
}

void
Program::ReadyCheck()
{
    if (m_ready)
    {
        return;
    }
    double timeout = m_config["warmup"].Num("timeout_s", 20);
    if (m_phase == 0)
    {
        size_t waiting = UnassociatedStations();
        if (waiting == 0 && m_allAssociatedSince.IsNegative())
        {
            m_allAssociatedSince = Simulator::Now();
        }
        else if (waiting > 0)
        {
            m_allAssociatedSince = Time(-1);
        }
        // ns-3 3.37 arms a STA's beacon watchdog when it starts associating and refreshes it
        // only on beacons received once associated: a STA whose association took about a
        // second (dozens of STAs at once) drops it again right away. Wait until every STA
        // has stayed associated for two beacon intervals.
        if (waiting == 0 && Simulator::Now() - m_allAssociatedSince >= MilliSeconds(210))
        {
            m_phase = 1;
            Say("ASSOCIATED {\"t\": " + Num(Simulator::Now().GetSeconds()) + "}");
            SendWarmup();
            m_lastWarmup = Simulator::Now();
        }
        else if (Simulator::Now().GetSeconds() > timeout)
        {
            std::string list;
            for (auto& radio : m_radios)
            {
                if (radio->role == "sta" && !DynamicCast<StaWifiMac>(radio->mac)->IsAssociated())
                {
                    list += (list.empty() ? "" : ", ") + Quote(radio->id);
                }
            }
            Say("NOT-READY {\"reason\": \"association\", \"unassociated\": [" + list + "]}");
            m_ready = true; // give up checking; quicbed decides
            return;
        }
    }
    else
    {
        auto missing = MissingAgreements();
        if (missing.empty())
        {
            m_ready = true;
            size_t agreements = 0;
            for (auto& radio : m_radios)
            {
                agreements += radio->needsBa ? radio->peers.size() : 0;
            }
            std::ostringstream line;
            line << "READY {\"t\": " << Num(Simulator::Now().GetSeconds())
                 << ", \"radios\": " << m_radios.size() << ", \"agreements\": " << agreements
                 << ", \"lag_max_ms\": " << Num(m_lag.MaxMs()) << "}";
            ResetStats();
            Say(line.str());
            return;
        }
        if (Simulator::Now().GetSeconds() > timeout)
        {
            std::string list;
            for (auto& m : missing)
            {
                list += (list.empty() ? "" : ", ") + Quote(m);
            }
            Say("NOT-READY {\"reason\": \"block-ack agreements\", \"missing\": [" + list + "]}");
            m_ready = true;
            return;
        }
        ResetStuckAgreements(missing);
        if (Simulator::Now() - m_lastWarmup > MilliSeconds(250))
        {
            SendWarmup();
            m_lastWarmup = Simulator::Now();
        }
    }
    Simulator::Schedule(MilliSeconds(20), &Program::ReadyCheck, this);
}

void
Program::ResetStats()
{
    m_lag.Reset();
    m_wallStart = NowWallSeconds();
    m_cpuStart = CpuSeconds();
    m_simStart = Simulator::Now();
    for (auto& radio : m_radios)
    {
        radio->ResetStats();
    }
    for (auto& wire : m_wires)
    {
        for (int d = 0; d < 2; d++)
        {
            wire->packetsBase[d] = wire->channel->packets[d];
            wire->bytesBase[d] = wire->channel->bytes[d];
            wire->lossBase[d] = wire->loss[d]->drops;
            wire->queueBase[d] = wire->queue[d]->GetTotalDroppedPackets();
        }
    }
    for (auto& tap : m_taps)
    {
        tap->fromNs = tap->toNs = tap->writeErrors = tap->foreignSource = 0;
    }
    for (auto& mesh : m_meshes)
    {
        mesh->ResetStats();
    }
    for (auto& sw : m_switches)
    {
        sw->flooded = sw->sameSegment = sw->received = 0;
    }
}

std::string
Program::StatsJson(bool final) const
{
    double wall = NowWallSeconds() - m_wallStart;
    double cpu = CpuSeconds() - m_cpuStart;
    double sim = (Simulator::Now() - m_simStart).GetSeconds();
    std::map<Mac48Address, std::string> names;
    for (auto& radio : m_radios)
    {
        names[radio->addr] = radio->id;
    }
    std::ostringstream o;
    o << "{\"version\": " << Quote(VERSION) << ", \"final\": " << (final ? "true" : "false")
      << ", \"snapshot\": " << m_snapshots << ", \"resets\": " << m_resets
      << ", \"ready\": " << (m_ready ? "true" : "false") << ",\n \"interval\": {\"sim_s\": "
      << Num(sim) << ", \"wall_s\": " << Num(wall) << ", \"cpu_s\": " << Num(cpu)
      << ", \"cpu_share\": " << Num(wall > 0 ? cpu / wall : 0) << "},\n \"lag\": "
      << m_lag.Json(m_probeInterval.GetSeconds() * 1000) << ",\n \"radios\": [";
    for (size_t i = 0; i < m_radios.size(); i++)
    {
        const WifiPort& r = *m_radios[i];
        double air = r.airData + r.airCtrl + r.airMgmt;
        o << (i ? ",\n  " : "\n  ") << "{\"id\": " << Quote(r.id) << ", \"node\": " << Quote(r.node)
          << ", \"role\": " << Quote(r.role) << ", \"mac\": " << Quote(MacStr(r.addr))
          << ", \"channel\": " << r.channelNumber << ", \"tx_data\": " << r.data.Json()
          << ", \"airtime_s\": {\"data\": " << Num(r.airData) << ", \"control\": " << Num(r.airCtrl)
          << ", \"management\": " << Num(r.airMgmt) << ", \"total\": " << Num(air) << "}"
          << ", \"airtime_share\": " << Num(sim > 0 ? air / sim : 0)
          << ", \"control_frames\": " << r.ctrlFrames << ", \"management_frames\": " << r.mgmtFrames
          << ", \"drops\": {\"queue_full\": " << r.dropQueue << ", \"retry_limit\": " << r.dropRetry
          << ", \"lifetime\": " << r.dropLifetime << ", \"other\": " << r.dropOld
          << ", \"not_associated\": " << r.txDrop << ", \"frame_errors\": "
          << (r.frameErrors ? r.frameErrors->drops - r.frameErrorBase : 0) << "}"
          << ", \"rx_forwarded\": " << r.rxUp << ", \"per_receiver\": {";
        bool first = true;
        for (auto& [mac, counters] : r.perReceiver)
        {
            auto it = names.find(mac);
            std::string key = it != names.end() ? it->second : MacStr(mac);
            o << (first ? "" : ", ") << Quote(key) << ": " << counters.Json();
            first = false;
        }
        o << "}}";
    }
    o << "],\n \"wires\": [";
    for (size_t i = 0; i < m_wires.size(); i++)
    {
        const Wire& w = *m_wires[i];
        o << (i ? ",\n  " : "\n  ") << "{\"name\": " << Quote(w.name);
        const char* dirs[2] = {"forward", "backward"};
        for (int d = 0; d < 2; d++)
        {
            o << ", " << Quote(dirs[d]) << ": {\"packets\": "
              << w.channel->packets[d] - w.packetsBase[d]
              << ", \"bytes\": " << w.channel->bytes[d] - w.bytesBase[d]
              << ", \"queue_drops\": " << w.queue[d]->GetTotalDroppedPackets() - w.queueBase[d]
              << ", \"loss_drops\": " << w.loss[d]->drops - w.lossBase[d] << "}";
        }
        o << "}";
    }
    o << "],\n \"taps\": [";
    for (size_t i = 0; i < m_taps.size(); i++)
    {
        const TapPort& t = *m_taps[i];
        o << (i ? ",\n  " : "\n  ") << "{\"id\": " << Quote(t.id) << ", \"mac\": "
          << Quote(MacStr(t.mac)) << ", \"from_namespace\": " << t.fromNs
          << ", \"to_namespace\": " << t.toNs << ", \"write_errors\": " << t.writeErrors
          << ", \"foreign_source\": " << t.foreignSource << "}";
    }
    o << "],\n \"bridges\": [";
    for (size_t i = 0; i < m_switches.size(); i++)
    {
        const Switch& b = *m_switches[i];
        o << (i ? ",\n  " : "\n  ") << "{\"node\": " << Quote(b.name) << ", \"received\": " << b.received
          << ", \"flooded\": " << b.flooded << ", \"same_segment\": " << b.sameSegment << "}";
    }
    o << "],\n \"mesh\": [";
    for (size_t i = 0; i < m_meshes.size(); i++)
    {
        const MeshRelay& m = *m_meshes[i];
        o << (i ? ",\n  " : "\n  ") << "{\"node\": " << Quote(m.name)
          << ", \"delivered\": " << m.delivered << ", \"forwarded\": " << m.forwarded
          << ", \"broadcasts\": " << m.broadcasts << ", \"no_route\": " << m.noRoute
          << ", \"ttl_drops\": " << m.ttlDrops << ", \"duplicates\": " << m.duplicates
          << ", \"not_peer\": " << m.notPeer << "}";
    }
    o << "]}\n";
    return o.str();
}

void
Program::WriteFile(const std::string& path, const std::string& text) const
{
    if (path.empty())
    {
        return;
    }
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp);
        out << text;
    }
    if (rename(tmp.c_str(), path.c_str()) != 0)
    {
        std::cerr << "quicbed-ns3-channel: cannot write " << path << ": " << strerror(errno)
                  << std::endl;
    }
}

void
Program::Probe()
{
    if (m_rt)
    {
        m_lag.Add((m_rt->RealtimeNow() - Simulator::Now()).GetMicroSeconds());
    }
    if (g_stop)
    {
        Simulator::Stop();
        return;
    }
    if (g_reset)
    {
        g_reset = 0;
        m_resets++;
        ResetStats();
        g_dump = 1;
    }
    if (g_dump)
    {
        g_dump = 0;
        m_snapshots++;
        WriteFile(m_snapshotFile, StatsJson(false));
    }
    Simulator::Schedule(m_probeInterval, &Program::Probe, this);
}

void
Program::Live()
{
    std::ostringstream o;
    o << "{\"t\": " << Num(Simulator::Now().GetSeconds()) << ", \"ready\": "
      << (m_ready ? "true" : "false") << ", \"lag_max_ms\": " << Num(m_lag.MaxMs())
      << ", \"lag_mean_ms\": " << Num(m_lag.MeanMs())
      << ", \"cpu_s\": " << Num(CpuSeconds() - m_cpuStart)
      << ", \"wall_s\": " << Num(NowWallSeconds() - m_wallStart) << "}\n";
    WriteFile(m_liveFile, o.str());
    Simulator::Schedule(m_liveInterval, &Program::Live, this);
}

void
Program::Run()
{
    std::ostringstream taps;
    taps << "TAPS {";
    for (size_t i = 0; i < m_taps.size(); i++)
    {
        taps << (i ? ", " : "") << Quote(m_taps[i]->id) << ": " << Quote(MacStr(m_taps[i]->mac));
    }
    taps << "}";
    Say(taps.str());
    if (m_dryRun)
    {
        std::ostringstream radios;
        radios << "RADIOS {";
        for (size_t i = 0; i < m_radios.size(); i++)
        {
            radios << (i ? ", " : "") << Quote(m_radios[i]->id) << ": "
                   << Quote(MacStr(m_radios[i]->addr));
        }
        radios << "}";
        Say(radios.str());
        Say("DRY-RUN OK");
        return;
    }
    m_rt = DynamicCast<RealtimeSimulatorImpl>(Simulator::GetImplementation());
    m_wallStart = NowWallSeconds();
    m_cpuStart = CpuSeconds();
    Simulator::ScheduleNow(&Program::Probe, this);
    Simulator::ScheduleNow(&Program::Live, this);
    Simulator::Schedule(MilliSeconds(10), &Program::ReadyCheck, this);
    g_writer.Start();
    Simulator::Run();
    g_writer.Stop();
    WriteFile(m_statsFile, StatsJson(true));
    Say("STOPPED");
    Simulator::Destroy();
}

int
main(int argc, char** argv)
{
    bool dryRun = false;
    std::string path;
    for (int i = 1; i < argc; i++)
    {
        std::string arg = argv[i];
        if (arg == "--version")
        {
            std::cout << VERSION << std::endl;
            return 0;
        }
        if (arg == "--dry-run")
        {
            dryRun = true;
        }
        else
        {
            path = arg;
        }
    }
    if (path.empty())
    {
        std::cerr << "usage: quicbed-ns3-channel [--dry-run] CONFIG.json" << std::endl;
        return 2;
    }
    std::ifstream in(path);
    if (!in)
    {
        Die("cannot read " + path);
    }
    std::stringstream text;
    text << in.rdbuf();
    Value config;
    try
    {
        config = qbjson::Parse(text.str());
    }
    catch (const std::exception& error)
    {
        Die(std::string("bad configuration: ") + error.what());
    }

    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2})
    {
        sigaction(sig, &action, nullptr);
    }

    if (!dryRun)
    {
        // Real-time practice: no page faults in the event loop (best effort; may be refused).
        mlockall(MCL_CURRENT | MCL_FUTURE);
        GlobalValue::Bind("SimulatorImplementationType",
                          StringValue("ns3::RealtimeSimulatorImpl"));
    }
    try
    {
        Program program(config, dryRun);
        program.Build();
        program.Run();
    }
    catch (const std::exception& error)
    {
        Die(std::string("bad configuration: ") + error.what());
    }
    return 0;
}
