// Stations that move or roam: their waypoints start with the first run's statistics (the
// runner's reset), and a timeline samples where each one is, the AP it is associated with,
// the signal it hears from each of its APs, the MCS it receives at and the bytes it delivers;
// association changes are logged as they happen.
#pragma once

#include "common.h"
#include "wifi.h"

#include "ns3/mac48-address.h"
#include "ns3/mobility-model.h"
#include "ns3/nstime.h"
#include "ns3/waypoint-mobility-model.h"
#include "ns3/wifi-phy.h"

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace qbchannel
{

struct Tracked
{
    WifiPort* radio = nullptr;
    Ptr<MobilityModel> position;
    Ptr<WaypointMobilityModel> waypoints; // null: the station stands still (it roams only)
    std::vector<std::array<double, 4>> points; // (t, x, y, z), t from the start of the motion
    std::map<Mac48Address, std::string> apIds;

    // the current sample's sums
    std::map<Mac48Address, std::pair<double, uint32_t>> signal; // dBm sum and count per AP
    double mcsSum = 0;
    uint32_t mcsCount = 0;
    uint64_t rxBytes = 0, rxBytesSampled = 0;
    Time lastDelivery = Time(-1);
    bool awaitingDelivery = false;
    Mac48Address bssid; // associated with (zero: none; set at Start, then by the traces)
    Time start = Time(-1); // of the motion (negative: not started)

    std::vector<std::string> samples, events;

    void OnSniff(Ptr<const Packet> packet,
                 uint16_t channelFreqMhz,
                 WifiTxVector txVector,
                 MpduInfo aMpdu,
                 SignalNoiseDbm signalNoise,
                 uint16_t staId);
    void OnAssoc(Mac48Address bssid);
    void OnDeAssoc(Mac48Address bssid);
    void OnDelivered(uint32_t bytes);
    void Event(const std::string& what, Mac48Address ap, const std::string& extra = "");
    std::string ApId(Mac48Address ap) const;
};

class Motion
{
  public:
    /// Follow station radio (its node's mobility built from trajectory, or fixed when it
    /// has none); apIds names the APs it may associate with.
    void Track(WifiPort* radio,
               Ptr<Node> node,
               const Value& trajectory,
               const std::map<Mac48Address, std::string>& apIds);
    /// Start the waypoints and the timeline (once: at the runner's first reset).
    void Start();
    bool Empty() const
    {
        return m_tracked.empty();
    }
    /// JSON of the timeline ("null" before Start).
    std::string Json() const;

    Time interval = MilliSeconds(250);

  private:
    void Sample();
    std::vector<std::unique_ptr<Tracked>> m_tracked;
    Time m_start = Time(-1);
};

} // namespace qbchannel
