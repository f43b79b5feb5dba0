// Drives quicbed's ACK accelerator (quicbed/backends/ns3/channel/fastack.cc) on ns-3's
// simulated clock, one command per line on stdin, for tests/unit/test_fastack_model.py. It
// plays the access point around the model: a radio queue the test empties by hand, the
// switch that forwards what the model does not take, and the wire to the sender.
//
//   capacity N      the radio queue holds N frames (default 1000)
//   sender HEX      an IPv4 packet from the wired sender for the station
//   station HEX     an IPv4 packet from the station
//   air N           the station's MAC acknowledges the first N queued frames
//   drop N          the MAC gives up on the first N queued frames (its retries failed)
//   expire N        the first N queued frames outlived the queue's lifetime
//   air_at K        the station's MAC acknowledges queued frame K (0: the first) alone, out of
//                   order (a block ACK confirming a later MPDU first)
//   wait MS         simulated time passes
//   stats           the model's counters
//
// Each command's consequences are printed as "MS KIND HEX" lines, then "done":
//   radio HEX     queued for the station by the model; switched HEX: by the switch
//   refused HEX   the radio queue was full
//   to_sender HEX the model sent it to the sender; passed HEX: the switch passed the station's
//   stats JSON

#include "fastack.h"

#include "ns3/simulator.h"

#include <deque>
#include <iomanip>
#include <sstream>

using namespace qbchannel;

namespace
{

std::deque<std::vector<uint8_t>> radio;
size_t capacity = 1000;

std::string
Hex(const std::vector<uint8_t>& bytes)
{
    std::ostringstream o;
    for (uint8_t b : bytes)
    {
        o << std::hex << std::setw(2) << std::setfill('0') << int(b);
    }
    return o.str();
}

std::vector<uint8_t>
Bytes(const std::string& hex)
{
    std::vector<uint8_t> out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
    {
        out.push_back(uint8_t(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return out;
}

void
Emit(const std::string& kind, const std::string& text)
{
    std::cout << Simulator::Now().GetMicroSeconds() / 1000.0 << " " << kind << " " << text << "\n";
}

bool
Queue(const std::vector<uint8_t>& ip, const char* kind)
{
    if (radio.size() >= capacity)
    {
        Emit("refused", Hex(ip));
        return false;
    }
    radio.push_back(ip);
    Emit(kind, Hex(ip));
    return true;
}

/// Runs what is due now, or until ms from now.
void
Settle(double ms = 0)
{
    Simulator::Stop(MicroSeconds(int64_t(ms * 1000)));
    Simulator::Run();
    for (int pass = 0; pass < 3; pass++) // what the last events scheduled for now
    {
        Simulator::Stop(Seconds(0));
        Simulator::Run();
    }
}

} // namespace

int
main()
{
    const Mac48Address sender("00:00:00:00:00:01"), station("00:00:00:00:00:02");
    FastAck model([](const std::vector<uint8_t>& ip, Mac48Address, Mac48Address) { return Queue(ip, "radio"); },
                  [](size_t, const std::vector<uint8_t>& ip, Mac48Address, Mac48Address) {
                      Emit("to_sender", Hex(ip));
                  });
    std::string line;
    while (std::getline(std::cin, line))
    {
        std::istringstream words(line);
        std::string command, argument;
        words >> command >> argument;
        if (command == "capacity")
        {
            capacity = std::stoul(argument);
        }
        else if (command == "sender")
        {
            std::vector<uint8_t> ip = Bytes(argument);
            if (!model.FromSender(ip, sender, station, 0))
            {
                Queue(ip, "switched");
            }
        }
        else if (command == "station")
        {
            std::vector<uint8_t> ip = Bytes(argument);
            if (!model.FromStation(ip))
            {
                Emit("passed", Hex(ip));
            }
        }
        else if (command == "air" || command == "drop" || command == "expire")
        {
            for (size_t n = std::stoul(argument); n > 0 && !radio.empty(); n--)
            {
                std::vector<uint8_t> ip = radio.front();
                radio.pop_front();
                command == "air" ? model.Delivered(ip) : model.Dropped(ip, command == "expire");
            }
        }
        else if (command == "air_at")
        {
            size_t at = std::stoul(argument);
            if (at < radio.size())
            {
                std::vector<uint8_t> ip = radio[at];
                radio.erase(radio.begin() + at);
                model.Delivered(ip);
            }
        }
        else if (command == "wait")
        {
            Settle(std::stod(argument));
        }
        else if (command == "stats")
        {
            Emit("stats", model.Json());
        }
        else
        {
            std::cerr << "driver: unknown command " << command << std::endl;
            return 2;
        }
        Settle();
        std::cout << "done" << std::endl;
    }
    Simulator::Destroy();
    return 0;
}
