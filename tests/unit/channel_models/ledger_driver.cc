// Drives the channel's frame ledger (quicbed/backends/ns3/channel/ledger.cc) on ns-3's
// simulated clock, one command per line on stdin, for tests/unit/test_frame_ledger.py:
//
//   enter DST HEX              a frame read from a TAP for MAC DST (HEX: the IPv4 packet)
//   left HEX                   written to a TAP
//   drop FRAMING REASON HEX    dropped (FRAMING: ip, ethernet or llc: what HEX starts with)
//   copied FRAMING N HEX       N more copies made
//   stage STAGE HEX            reached a stage (accelerator, acked)
//   queue HEX                  entered the queue below
//   holding N                  that queue holds N frames now
//   wait MS                    simulated time passes
//   json                       the ledger's statistics, one line
//   reset

#include "ledger.h"

#include "ns3/simulator.h"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace qbchannel;

namespace
{

class TestQueue : public FrameHolder
{
  public:
    uint32_t frames = 0;
    uint32_t Held() const override { return frames; }
} queue;

Ptr<Packet>
FromHex(const std::string& hex)
{
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
    {
        bytes.push_back(uint8_t(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return Create<Packet>(bytes.data(), bytes.size());
}

Framing
ParseFraming(const std::string& name)
{
    return name == "ethernet" ? Framing::ETHERNET : name == "llc" ? Framing::LLC : Framing::IP;
}

FrameLedger::Stage
ParseStage(const std::string& name)
{
    return name == "accelerator" ? FrameLedger::AT_ACCELERATOR : FrameLedger::ACKED;
}

} // namespace

int
main()
{
    std::string line;
    while (std::getline(std::cin, line))
    {
        std::istringstream in(line);
        std::string command, a, b, hex;
        in >> command;
        if (command == "enter")
        {
            in >> a >> hex;
            g_ledger.Enter(FromHex(hex), PROTO_IPV4, Mac48Address(a.c_str()));
        }
        else if (command == "left")
        {
            in >> hex;
            g_ledger.Left(FromHex(hex), PROTO_IPV4);
        }
        else if (command == "drop")
        {
            in >> a >> b >> hex;
            g_ledger.Dropped(FromHex(hex), PROTO_IPV4, ParseFraming(a), b);
        }
        else if (command == "copied")
        {
            in >> a >> b >> hex;
            g_ledger.Copied(FromHex(hex), PROTO_IPV4, ParseFraming(a), std::stoul(b));
        }
        else if (command == "stage")
        {
            in >> a >> hex;
            g_ledger.Reached(FromHex(hex), PROTO_IPV4, Framing::IP, ParseStage(a));
        }
        else if (command == "queue")
        {
            in >> hex;
            g_ledger.Queued(FromHex(hex), PROTO_IPV4, Framing::IP, &queue);
        }
        else if (command == "holding")
        {
            in >> a;
            queue.frames = std::stoul(a);
        }
        else if (command == "wait")
        {
            in >> a;
            Simulator::Stop(MilliSeconds(std::stoi(a)));
            Simulator::Run();
        }
        else if (command == "json")
        {
            std::cout << g_ledger.Json() << std::endl;
        }
        else if (command == "reset")
        {
            g_ledger.Reset();
        }
    }
    Simulator::Destroy();
    return 0;
}
