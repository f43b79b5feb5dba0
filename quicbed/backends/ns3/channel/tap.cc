// TAP devices inside network namespaces (see tap.h).

#include "tap.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_arp.h>
#include <linux/if_tun.h>
#include <sched.h>
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
        m_queue.push_back(Item{fd, std::move(frame), errors});
        wake = m_sleeping;
        m_sleeping = false;
    }
    if (wake)
    {
        m_wake.notify_one();
    }
}

void
TapWriter::Loop()
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

TapWriter g_writer;

} // namespace qbchannel
