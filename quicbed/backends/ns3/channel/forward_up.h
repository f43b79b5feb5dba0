// How the channel's relays receive what a radio's MAC forwards up (docs/ns3-backend.md,
// "Frames a station acknowledged and dropped").
#pragma once

#include "common.h"

#include "ns3/net-device.h"
#include "ns3/wifi-net-device.h"

namespace qbchannel
{

/// Hand `cb` every frame the radio's MAC forwards up, with both addresses and the frame's type,
/// as WifiNetDevice::SetPromiscReceiveCallback does, but with the MAC kept out of promiscuous
/// mode (forward_up.cc says why).
void SetForwardUpCallback(Ptr<WifiNetDevice> radio, NetDevice::PromiscReceiveCallback cb);

} // namespace qbchannel
