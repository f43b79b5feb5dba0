// Wired links (see wired.h).

#include "wired.h"

#include "ledger.h"

#include "ns3/data-rate.h"
#include "ns3/drop-tail-queue.h"
#include "ns3/node.h"
#include "ns3/packet.h"
#include "ns3/queue-size.h"
#include "ns3/simulator.h"

namespace qbchannel
{

TypeId
QbWireChannel::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::QbWireChannel").SetParent<SimpleChannel>().SetGroupName("Quicbed");
    return tid;
}

QbWireChannel::QbWireChannel()
{
    m_uniform = CreateObject<UniformRandomVariable>();
    m_normal = CreateObject<NormalRandomVariable>();
}

void
QbWireChannel::Send(Ptr<Packet> p,
                    uint16_t protocol,
                    Mac48Address to,
                    Mac48Address from,
                    Ptr<SimpleNetDevice> sender)
{
    int dir = sender == ends[0] ? 0 : 1;
    TraceGate::Frame frame{p->Copy(), protocol, to, from};
    if (gate[dir])
    {
        gate[dir]->Arrive(frame);
    }
    else
    {
        Deliver(dir, frame);
    }
}

void
QbWireChannel::Deliver(int dir, const TraceGate::Frame& frame)
{
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
    bytes[dir] += frame.packet->GetSize();
    Simulator::ScheduleWithContext(receiver->GetNode()->GetId(),
                                   d,
                                   &SimpleNetDevice::Receive,
                                   receiver,
                                   frame.packet,
                                   frame.protocol,
                                   frame.to,
                                   frame.from);
}

NS_OBJECT_ENSURE_REGISTERED(QbWireChannel);

std::unique_ptr<Wire>
BuildWire(const Value& spec)
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
        std::string trace = shape.Str("trace_file", "");
        if (trace.empty())
        {
            dev->SetQueue(queue);
        }
        else
        {
            // the device (no rate) hands every packet to the cable at once; the gate queues them
            dev->SetQueue(CreateObject<DropTailQueue<Packet>>());
            Wire* w = wire.get();
            wire->channel->gate[d] = std::make_unique<TraceGate>(
                trace,
                queue,
                [w, d](const TraceGate::Frame& frame) { w->channel->Deliver(d, frame); });
        }
        wire->queue[d] = queue;
        wire->held[d].queue = queue;
        wire->dev[d] = dev;
        wire->channel->delay[d] = Seconds(shape.Num("delay_s", 0));
        wire->channel->jitter[d] = Seconds(shape.Num("jitter_s", 0));
        wire->channel->normalJitter[d] = shape.Str("jitter_distribution", "uniform") == "normal";
        Ptr<QbLossModel> loss = CreateObject<QbLossModel>();
        loss->Configure(shape["loss"], shape.Num("corrupt", 0));
        wire->loss[d] = loss;
    }
    // the frame ledger counts what the queues and the losses drop (frames carry Ethernet headers)
    auto dropped = [](const char* reason) {
        return MakeBoundCallback(+[](const char* why, Ptr<const Packet> p) {
            g_ledger.Dropped(p, 0, Framing::ETHERNET, why);
        }, reason);
    };
    for (int d = 0; d < 2; d++)
    {
        wire->queue[d]->TraceConnectWithoutContext("Drop", dropped("wire_queue"));
        wire->dev[d]->TraceConnectWithoutContext("PhyRxDrop", dropped("wire_loss"));
        wire->dev[d]->SetChannel(wire->channel);
        wire->channel->ends[d] = wire->dev[d];
        // the loss of direction d (d's device sends) is applied where it arrives
        wire->dev[1 - d]->SetReceiveErrorModel(wire->loss[d]);
    }
    return wire;
}

} // namespace qbchannel
