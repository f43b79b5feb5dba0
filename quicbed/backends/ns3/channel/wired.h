// Wired links: QbWireChannel (a full-duplex cable with per-direction delay and jitter) and
// Wire (its two SimpleNetDevices with their rate, drop-tail queue and loss, or a delivery trace),
// built from a spec.
#pragma once

#include "common.h"
#include "ledger.h"
#include "loss.h"
#include "trace.h"

#include "ns3/nstime.h"
#include "ns3/queue.h"
#include "ns3/random-variable-stream.h"
#include "ns3/simple-channel.h"
#include "ns3/simple-net-device.h"

#include <memory>
#include <string>

namespace qbchannel
{

/// A full-duplex cable: per-direction delay and jitter between two SimpleNetDevices.
class QbWireChannel : public SimpleChannel
{
  public:
    static TypeId GetTypeId();

    QbWireChannel();

    Ptr<SimpleNetDevice> ends[2];
    Time delay[2];
    Time jitter[2];
    bool normalJitter[2] = {false, false};
    uint64_t packets[2] = {0, 0};
    uint64_t bytes[2] = {0, 0};
    /// a direction with a delivery trace: its packets wait there instead of in the device's queue
    std::unique_ptr<TraceGate> gate[2];

    void Send(Ptr<Packet> p,
              uint16_t protocol,
              Mac48Address to,
              Mac48Address from,
              Ptr<SimpleNetDevice> sender) override;

    /// Puts a packet that left direction dir's sender on the cable (its delay and jitter).
    void Deliver(int dir, const TraceGate::Frame& frame);

  private:
    Ptr<UniformRandomVariable> m_uniform;
    Ptr<NormalRandomVariable> m_normal;
};

/// One direction's queue of a cable, for the frame ledger.
class WireQueue : public FrameHolder
{
  public:
    Ptr<Queue<Packet>> queue;
    uint32_t Held() const override { return queue ? queue->GetNPackets() : 0; }
};

struct Wire
{
    std::string name;
    Ptr<QbWireChannel> channel;
    Ptr<SimpleNetDevice> dev[2];
    Ptr<QbLossModel> loss[2]; // loss[0]: a->b, applied at b
    Ptr<Queue<Packet>> queue[2]; // the device's, or the trace gate's
    WireQueue held[2];           // (the same, for the frame ledger)
    uint64_t packetsBase[2] = {0, 0}, bytesBase[2] = {0, 0}, lossBase[2] = {0, 0};
    uint64_t queueBase[2] = {0, 0};
};

/// One wire of the configuration's "wires" list: both directions' devices, queues and losses.
std::unique_ptr<Wire> BuildWire(const Value& spec);

} // namespace qbchannel
