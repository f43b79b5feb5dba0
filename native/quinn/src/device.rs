//! A weak client as an explicit cost (`stress.client_device`): the time a slower device's CPU
//! would take per datagram, charged where the client receives and sends them.
//!
//! The client runs on one thread (a current-thread runtime), so time the socket spends here is
//! time the whole client is busy, as on a slow single core: datagrams wait in the socket buffer
//! meanwhile and the ACKs they call for leave later. The time is slept, not spun, so it costs
//! the same in both clocks and no CPU on the host. Quicbed's Python side works out the costs
//! (quicbed/apps/client_device.py); this applies them.

use std::{
    fmt,
    io::{self, IoSliceMut},
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncTimer, AsyncUdpSocket, Runtime, UdpPoller};
use serde_json::{json, Value};

/// A debt below this is carried to the next datagram, not slept: one sleep per datagram would
/// overshoot by the timer's slack each time (what is overslept is credited all the same).
const QUANTUM: Duration = Duration::from_micros(50);

/// What a datagram costs the device beyond what this host's own run of the client already takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PacketCost {
    pub per_received: Duration,
    pub per_sent: Duration,
}

impl PacketCost {
    /// From `--receive-cost` and `--send-cost` (seconds); None when both are absent or zero.
    pub fn from_seconds(received: f64, sent: f64) -> Result<Option<Self>, String> {
        for (name, value) in [("--receive-cost", received), ("--send-cost", sent)] {
            if !(value.is_finite() && (0.0..1.0).contains(&value)) {
                return Err(format!("{name}: expected seconds from 0 to 1, got {value}"));
            }
        }
        if received == 0.0 && sent == 0.0 {
            return Ok(None);
        }
        Ok(Some(Self { per_received: Duration::from_secs_f64(received), per_sent: Duration::from_secs_f64(sent) }))
    }
}

#[derive(Debug, Default)]
struct Account {
    received: u64,
    sent: u64,
    /// time owed (positive) or overslept (negative), nanoseconds
    debt: i128,
    slept: Duration,
}

/// The datagrams charged and the time slept for them, shared with the client's record.
#[derive(Debug)]
pub struct Meter {
    cost: PacketCost,
    account: Mutex<Account>,
}

impl Meter {
    pub fn new(cost: PacketCost) -> Arc<Self> {
        Arc::new(Self { cost, account: Mutex::default() })
    }

    fn charge(&self, received: u64, sent: u64) {
        let mut account = self.account.lock().unwrap();
        account.received += received;
        account.sent += sent;
        account.debt += (self.cost.per_received * received as u32 + self.cost.per_sent * sent as u32).as_nanos() as i128;
        if account.debt < QUANTUM.as_nanos() as i128 {
            return;
        }
        let start = Instant::now();
        std::thread::sleep(Duration::from_nanos(account.debt as u64));
        let slept = start.elapsed();
        account.debt -= slept.as_nanos() as i128;
        account.slept += slept;
    }

    /// The record's `device.applied`: datagrams charged, the time added per datagram and slept in all.
    pub fn summary(&self) -> Value {
        let account = self.account.lock().unwrap();
        json!({
            "received": account.received,
            "sent": account.sent,
            "added_per_received": self.cost.per_received.as_secs_f64(),
            "added_per_sent": self.cost.per_sent.as_secs_f64(),
            "slept": account.slept.as_secs_f64(),
        })
    }
}

/// A runtime whose UDP sockets charge the meter; timers and tasks are the inner runtime's.
pub struct Costly {
    pub inner: Arc<dyn Runtime>,
    pub meter: Arc<Meter>,
}

impl fmt::Debug for Costly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Costly({:?}, {:?})", self.inner, self.meter.cost)
    }
}

impl Runtime for Costly {
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        self.inner.new_timer(deadline)
    }

    fn spawn(&self, future: Pin<Box<dyn std::future::Future<Output = ()> + Send>>) {
        self.inner.spawn(future)
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        Ok(Arc::new(CostlySocket { inner: self.inner.wrap_udp_socket(socket)?, meter: self.meter.clone() }))
    }
}

#[derive(Debug)]
struct CostlySocket {
    inner: Arc<dyn AsyncUdpSocket>,
    meter: Arc<Meter>,
}

/// Datagrams in a buffer of `len` bytes cut at `stride` (GRO/GSO), at least one.
fn datagrams(len: usize, stride: Option<usize>) -> u64 {
    match stride {
        Some(stride) if stride > 0 => len.div_ceil(stride).max(1) as u64,
        _ => 1,
    }
}

impl AsyncUdpSocket for CostlySocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)?;
        self.meter.charge(0, datagrams(transmit.contents.len(), transmit.segment_size));
        Ok(())
    }

    fn poll_recv(&self, cx: &mut Context, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> Poll<io::Result<usize>> {
        let polled = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(count)) = polled {
            let received = meta[..count].iter().map(|m| datagrams(m.len, Some(m.stride))).sum();
            // before quinn sees them: processing them is what takes the device this long
            self.meter.charge(received, 0);
        }
        polled
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_datagrams_and_sleeps_what_they_cost() {
        let meter = Meter::new(PacketCost { per_received: Duration::from_micros(200), per_sent: Duration::from_micros(30) });
        let start = Instant::now();
        for _ in 0..20 {
            meter.charge(1, 0);
        }
        meter.charge(0, 10);
        let elapsed = start.elapsed();
        let summary = meter.summary();
        assert_eq!((summary["received"].as_u64(), summary["sent"].as_u64()), (Some(20), Some(10)));
        // 20 x 200 us + 10 x 30 us = 4.3 ms; a debt under the quantum may stay unpaid
        assert!(elapsed >= Duration::from_micros(4300) - QUANTUM, "{elapsed:?}");
        let slept = summary["slept"].as_f64().unwrap();
        assert!(slept >= 0.0043 - QUANTUM.as_secs_f64() && slept <= elapsed.as_secs_f64(), "{slept}");
    }

    #[test]
    fn small_debts_wait_for_the_quantum() {
        let meter = Meter::new(PacketCost { per_received: Duration::from_micros(10), per_sent: Duration::ZERO });
        for _ in 0..4 {
            meter.charge(1, 0);
        }
        assert_eq!(meter.summary()["slept"].as_f64(), Some(0.0)); // 40 us owed, under 50
        meter.charge(1, 0);
        assert!(meter.summary()["slept"].as_f64().unwrap() >= 50e-6);
    }

    #[test]
    fn counts_each_datagram_of_a_segmented_buffer() {
        assert_eq!(datagrams(3000, Some(1200)), 3);
        assert_eq!(datagrams(1200, Some(1200)), 1);
        assert_eq!(datagrams(500, None), 1);
        assert_eq!(datagrams(0, Some(0)), 1);
    }

    #[test]
    fn refuses_impossible_costs() {
        assert_eq!(PacketCost::from_seconds(0.0, 0.0), Ok(None));
        assert!(PacketCost::from_seconds(-1e-6, 0.0).is_err());
        assert!(PacketCost::from_seconds(f64::NAN, 0.0).is_err());
        assert!(PacketCost::from_seconds(0.0, 2.0).is_err());
        assert_eq!(
            PacketCost::from_seconds(180e-6, 0.0).unwrap().unwrap().per_received,
            Duration::from_secs_f64(180e-6)
        );
    }
}
