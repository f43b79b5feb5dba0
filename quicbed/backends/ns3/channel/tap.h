// TAP devices inside network namespaces: opening them (setns + TUNSETIFF), setting their
// MAC, and TapWriter, the thread that writes frames into them.
#pragma once

#include "common.h"

#include "ns3/mac48-address.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace qbchannel
{

/// Opens TAP ifname inside namespace ns (IFF_TAP | IFF_NO_PI); dies on failure.
int OpenTap(const std::string& ns, const std::string& ifname);

void SetTapMac(const std::string& ns, const std::string& ifname, const Mac48Address& mac);

/// Writes frames to the TAPs from its own thread. A write into a TAP runs the receiving
/// namespace's network stack (IP, TCP, the ACK it sends, wake-ups of the app) in the
/// writer's context; on the simulator thread that cost ~25 % of its time at 50 Mbit/s.
class TapWriter
{
  public:
    void Start();
    void Stop();
    /// Queue one Ethernet frame for fd (called on the simulator thread).
    void Write(int fd, std::vector<uint8_t>&& frame, uint64_t* errors);

  private:
    struct Item
    {
        int fd;
        std::vector<uint8_t> frame;
        uint64_t* errors;
    };

    void Loop();

    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::vector<Item> m_queue;
    bool m_sleeping = false;
    bool m_stop = false;
    std::thread m_thread;
};

extern TapWriter g_writer;

} // namespace qbchannel
