//! Timers that fire when they are due, for fine pacing (the knob `pacing_burst`).
//!
//! tokio's timer wheel counts whole milliseconds, so a pacer on it releases at most once per
//! millisecond: one packet per release caps a sender near 10 Mbit/s. A timerfd per connection,
//! woken through tokio's reactor, fires within tens of microseconds instead. quinn's own
//! (millisecond) timers stay in use without the knob, so default runs are unchanged.

use std::{
    future::Future,
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use quinn::{AsyncTimer, AsyncUdpSocket, Runtime, TokioRuntime};
use tokio::io::unix::AsyncFd;

use crate::knobs::Knobs;

/// The runtime an endpoint with these knobs runs on.
pub fn runtime(knobs: &Knobs) -> Arc<dyn Runtime> {
    if knobs.pacing_burst.is_some() {
        Arc::new(FineTimers)
    } else {
        Arc::new(TokioRuntime)
    }
}

/// tokio, with timerfd timers.
#[derive(Debug)]
pub struct FineTimers;

impl Runtime for FineTimers {
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        Box::pin(TimerFd::new(deadline).expect("timerfd_create (a file descriptor per connection)"))
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        TokioRuntime.spawn(future)
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        TokioRuntime.wrap_udp_socket(socket)
    }
}

#[derive(Debug)]
struct TimerFd {
    fd: AsyncFd<OwnedFd>,
    deadline: Instant,
}

impl TimerFd {
    fn new(deadline: Instant) -> io::Result<Self> {
        // SAFETY: plain system call; the descriptor is owned below
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nobody else owns; the OwnedFd keeps it open, unchanged, for
        // the AsyncFd's life
        let fd = unsafe { AsyncFd::register(OwnedFd::from_raw_fd(raw)) }.map_err(|error| error.into_parts().1)?;
        let timer = Self { fd, deadline };
        timer.arm();
        Ok(timer)
    }

    /// Sets the timerfd to the deadline (relative: std's Instant is CLOCK_MONOTONIC but has no
    /// public conversion to a timespec); setting it discards an expiry not yet read.
    fn arm(&self) {
        // a zero value disarms a timerfd: a deadline already past fires in a nanosecond
        let wait = self.deadline.saturating_duration_since(Instant::now()).max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: wait.as_secs() as libc::time_t, tv_nsec: wait.subsec_nanos() as libc::c_long },
        };
        // SAFETY: a valid descriptor and itimerspec; the old value is not asked for
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }
}

impl AsyncTimer for TimerFd {
    fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.deadline = deadline;
        self.arm();
    }

    fn poll(self: Pin<&mut Self>, cx: &mut Context) -> Poll<()> {
        loop {
            if Instant::now() >= self.deadline {
                return Poll::Ready(());
            }
            let mut ready = match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(ready)) => ready,
                Poll::Ready(Err(_)) => return Poll::Ready(()), // the reactor is gone: let the driver look
                Poll::Pending => return Poll::Pending,
            };
            let mut expiries = 0u64;
            // SAFETY: reads 8 bytes into a u64; EAGAIN (nothing due after a reset) is fine
            unsafe { libc::read(self.fd.as_raw_fd(), &mut expiries as *mut u64 as *mut libc::c_void, 8) };
            ready.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll_until_ready(timer: Pin<&mut dyn AsyncTimer>) -> impl Future<Output = ()> + '_ {
        let mut timer = timer;
        std::future::poll_fn(move |cx| timer.as_mut().poll(cx))
    }

    #[test]
    fn fires_at_the_deadline_it_was_reset_to() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let start = Instant::now();
            let mut timer = FineTimers.new_timer(start + Duration::from_millis(50));
            // moved earlier before it fired: the new deadline counts, not the old one
            timer.as_mut().reset(start + Duration::from_micros(300));
            poll_until_ready(timer.as_mut()).await;
            let fired = start.elapsed();
            assert!(fired >= Duration::from_micros(300) && fired < Duration::from_millis(50), "{fired:?}");
            let again = Instant::now();
            timer.as_mut().reset(again + Duration::from_micros(200));
            poll_until_ready(timer.as_mut()).await;
            assert!(again.elapsed() >= Duration::from_micros(200));
        });
    }

    #[test]
    fn only_the_pacing_burst_knob_selects_it() {
        let mut knobs = Knobs::from_json(&crate::knobs::tests::quic_knobs()).unwrap();
        assert!(format!("{:?}", runtime(&knobs)).contains("TokioRuntime"));
        knobs.pacing_burst = Some(2);
        assert!(format!("{:?}", runtime(&knobs)).contains("FineTimers"));
    }
}
