// What every file of the channel program shares: the qbchannel namespace (with ns-3's and
// the JSON reader's names in it), the ethertypes of its own frames, and its output lines.
#pragma once

#include "json.h"

#include <cstdint>
#include <iostream>
#include <string>
#include <unistd.h>

namespace ns3 // (its headers come with the files that use them)
{
}

namespace qbchannel
{

using namespace ns3;
using qbjson::Num;
using qbjson::Quote;
using qbjson::Value;

constexpr uint16_t PROTO_IPV4 = 0x0800;
constexpr uint16_t PROTO_MESH = 0x88B5;   // IEEE local experimental ethertype 1
constexpr uint16_t PROTO_WARMUP = 0x88B6; // IEEE local experimental ethertype 2

/// One "QUICBED-NS3 ..." line on stdout, which quicbed reads.
inline void
Say(const std::string& line)
{
    std::cout << "QUICBED-NS3 " << line << std::endl;
}

[[noreturn]] inline void
Die(const std::string& message)
{
    std::cout << "QUICBED-NS3 ERROR " << message << std::endl;
    std::cerr << "quicbed-ns3-channel: " << message << std::endl;
    _exit(2);
}

} // namespace qbchannel
