// How the channel's relays receive what a radio's MAC forwards up (see forward_up.h).
//
// The relays need each frame's destination address and type, which only the promiscuous
// receive callback gives. Setting it also puts ns-3 3.37's MAC in promiscuous mode, where every
// data frame of one MPDU addressed to another radio goes through the MAC's duplicate filter.
// That filter keeps one last sequence number per transmitter and TID, while an AP numbers each
// station's frames apart: a frame overheard for another station overwrote it, and a
// retransmission (Retry bit set) that carried the same number was then dropped as a duplicate
// after the radio had acknowledged it. The frame was lost inside the channel, and no counter
// showed it; the frame ledger did. The relays ignore frames for other hosts, so the MAC need
// not be promiscuous.

#include "forward_up.h"

#include "ns3/frame-exchange-manager.h"
#include "ns3/wifi-mac.h"

namespace qbchannel
{

namespace
{

/// ns-3 3.37 has FrameExchangeManager::SetPromisc() but no way back; its flag is protected.
struct PromiscuousFlag : FrameExchangeManager
{
    static void Clear(FrameExchangeManager& manager)
    {
        manager.*(&PromiscuousFlag::m_promisc) = false;
    }
};

} // namespace

void
SetForwardUpCallback(Ptr<WifiNetDevice> radio, NetDevice::PromiscReceiveCallback cb)
{
    radio->SetPromiscReceiveCallback(cb);
    Ptr<WifiMac> mac = radio->GetMac();
    for (uint8_t link = 0; link < mac->GetNLinks(); link++)
    {
        PromiscuousFlag::Clear(*mac->GetFrameExchangeManager(link));
    }
}

} // namespace qbchannel
