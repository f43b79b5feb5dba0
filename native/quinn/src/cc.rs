//! Congestion controllers for the profiles' `congestion_control` and
//! `slow_start_exit_rtt_increase` knobs: NewReno (RFC 9002 section 7) and CUBIC (RFC 9438),
//! both with the same slow-start exit rule as quicbed's aioquic endpoints. quinn's own
//! controllers cannot take that rule, so these replace them; `bbr` is quicbed's BBR (bbr.rs).

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;

const INITIAL_WINDOW_PACKETS: u64 = 10;
const MINIMUM_WINDOW_PACKETS: u64 = 2;
const RENO_BETA: f64 = 0.5;
const CUBIC_BETA: f64 = 0.7;
const CUBIC_C: f64 = 0.4;
/// Samples the exit rule compares (the smallest of them must exceed the min RTT)
const EXIT_SAMPLES: usize = 5;
/// At most one RTT sample per this interval feeds the exit rule (aioquic's granularity)
const EXIT_SAMPLE_SPACING: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Reno,
    Cubic,
}

/// Leave slow start once the smallest of the last five RTT samples exceeds the smallest
/// sample ever seen by more than `rtt_increase` times it.
#[derive(Clone, Debug)]
pub struct DelayIncreaseMonitor {
    rtt_increase: f64,
    min_rtt: Option<Duration>,
    recent: VecDeque<Duration>,
    last_sample: Option<Instant>,
}

impl DelayIncreaseMonitor {
    pub fn new(rtt_increase: f64) -> Self {
        Self { rtt_increase, min_rtt: None, recent: VecDeque::with_capacity(EXIT_SAMPLES), last_sample: None }
    }

    pub fn is_rtt_increasing(&mut self, now: Instant, rtt: Duration) -> bool {
        if self.last_sample.is_some_and(|last| now < last + EXIT_SAMPLE_SPACING) {
            return false;
        }
        self.last_sample = Some(now);
        let min_rtt = self.min_rtt.map_or(rtt, |known| known.min(rtt));
        self.min_rtt = Some(min_rtt);
        if self.recent.len() == EXIT_SAMPLES {
            self.recent.pop_front();
        }
        self.recent.push_back(rtt);
        let smallest_recent = self.recent.iter().min().copied().unwrap_or(rtt);
        self.recent.len() == EXIT_SAMPLES
            && smallest_recent.as_secs_f64() > min_rtt.as_secs_f64() * (1.0 + self.rtt_increase)
    }
}

/// NewReno or CUBIC over bytes, with an optional slow-start exit rule.
#[derive(Clone, Debug)]
pub struct LossBased {
    algorithm: Algorithm,
    mtu: u64,
    initial_window: u64,
    window: u64,
    ssthresh: u64,
    recovery_start: Option<Instant>,
    /// NewReno: bytes acknowledged since the window last grew in congestion avoidance
    acked_since_growth: u64,
    /// CUBIC: window before the last reduction (bytes), start of the current epoch, and the
    /// Reno-friendly estimate (bytes)
    w_max: f64,
    epoch_start: Option<Instant>,
    w_est: f64,
    exit: Option<DelayIncreaseMonitor>,
    /// the newest packet acknowledged in the current batch of ACKs: the latest RTT sample
    batch_latest_sent: Option<Instant>,
    /// times the exit rule ended slow start
    pub slow_start_exits: u64,
}

impl LossBased {
    /// `initial_window` in bytes; None: RFC 9002's 10 datagrams
    pub fn new(algorithm: Algorithm, mtu: u16, rtt_increase: Option<f64>, initial_window: Option<u64>) -> Self {
        let mtu = u64::from(mtu);
        let initial_window = initial_window.unwrap_or(INITIAL_WINDOW_PACKETS * mtu);
        Self {
            algorithm,
            mtu,
            initial_window,
            window: initial_window,
            ssthresh: u64::MAX,
            recovery_start: None,
            acked_since_growth: 0,
            w_max: 0.0,
            epoch_start: None,
            w_est: 0.0,
            exit: rtt_increase.map(DelayIncreaseMonitor::new),
            batch_latest_sent: None,
            slow_start_exits: 0,
        }
    }

    fn minimum_window(&self) -> u64 {
        MINIMUM_WINDOW_PACKETS * self.mtu
    }

    fn in_slow_start(&self) -> bool {
        self.window < self.ssthresh
    }

    fn cubic_growth(&mut self, now: Instant, bytes: u64, rtt: &RttEstimator) {
        let mss = self.mtu as f64;
        let window = self.window as f64;
        let epoch_start = *self.epoch_start.get_or_insert_with(|| {
            // a new epoch (after a reduction, or after a slow start that ended without one)
            if self.w_max < window {
                self.w_max = window;
            }
            self.w_est = window;
            now
        });
        let k = ((self.w_max / mss) * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
        let t = (now - epoch_start + rtt.get()).as_secs_f64();
        let target = (CUBIC_C * (t - k).powi(3) * mss + self.w_max).clamp(window, 1.5 * window);
        // RFC 9438 section 4.3: the Reno-friendly region
        let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
        self.w_est += alpha * (bytes as f64) * mss / window;
        let grown = if self.w_est > target {
            self.w_est
        } else {
            window + (target - window) * (bytes as f64) / window
        };
        self.window = (grown as u64).max(self.window);
    }
}

impl Controller for LossBased {
    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool, rtt: &RttEstimator) {
        if self.batch_latest_sent.is_none_or(|latest| sent > latest) {
            self.batch_latest_sent = Some(sent);
        }
        if app_limited || self.recovery_start.is_some_and(|start| sent <= start) {
            return;
        }
        if self.in_slow_start() {
            self.window += bytes;
            return;
        }
        match self.algorithm {
            Algorithm::Reno => {
                self.acked_since_growth += bytes;
                if self.acked_since_growth >= self.window {
                    self.acked_since_growth -= self.window;
                    self.window += self.mtu;
                }
            }
            Algorithm::Cubic => self.cubic_growth(now, bytes, rtt),
        }
    }

    fn on_end_acks(&mut self, now: Instant, _in_flight: u64, _app_limited: bool, _largest: Option<u64>) {
        let Some(sent) = self.batch_latest_sent.take() else { return };
        if !self.in_slow_start() {
            return;
        }
        if let Some(monitor) = self.exit.as_mut() {
            if monitor.is_rtt_increasing(now, now.saturating_duration_since(sent)) {
                self.ssthresh = self.window;
                self.slow_start_exits += 1;
            }
        }
    }

    fn on_congestion_event(&mut self, now: Instant, sent: Instant, is_persistent_congestion: bool, _lost: u64) {
        if self.recovery_start.is_some_and(|start| sent <= start) {
            return;
        }
        self.recovery_start = Some(now);
        let window = self.window as f64;
        let beta = match self.algorithm {
            Algorithm::Reno => RENO_BETA,
            Algorithm::Cubic => {
                // fast convergence (RFC 9438 section 4.7)
                self.w_max = if window < self.w_max { window * (1.0 + CUBIC_BETA) / 2.0 } else { window };
                self.epoch_start = None;
                CUBIC_BETA
            }
        };
        self.window = ((window * beta) as u64).max(self.minimum_window());
        self.ssthresh = self.window;
        self.acked_since_growth = 0;
        if is_persistent_congestion {
            self.window = self.minimum_window();
        }
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = u64::from(new_mtu);
        self.window = self.window.max(self.minimum_window());
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.window;
        metrics.ssthresh = (self.ssthresh != u64::MAX).then_some(self.ssthresh);
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Builds a [`LossBased`] controller per connection.
pub struct LossBasedFactory {
    pub algorithm: Algorithm,
    pub rtt_increase: Option<f64>,
    pub initial_window: Option<u64>,
}

impl ControllerFactory for LossBasedFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(LossBased::new(self.algorithm, current_mtu, self.rtt_increase, self.initial_window))
    }
}

/// The factory for a `congestion_control` knob value.
pub fn factory(name: &str, rtt_increase: Option<f64>, initial_window: Option<u64>)
    -> Result<Arc<dyn ControllerFactory + Send + Sync>, String> {
    match name {
        "reno" => Ok(Arc::new(LossBasedFactory { algorithm: Algorithm::Reno, rtt_increase, initial_window })),
        "cubic" => Ok(Arc::new(LossBasedFactory { algorithm: Algorithm::Cubic, rtt_increase, initial_window })),
        "bbr" if initial_window.is_some() => Err("initial_window: quicbed's BBR starts from 10 datagrams; set the \
                                                  knob to null with bbr".into()),
        "bbr" if rtt_increase.is_none() => Ok(Arc::new(crate::bbr::BbrFactory)),
        "bbr" => Err("slow_start_exit_rtt_increase: BBR leaves its startup by its own bandwidth rule; \
                      set the knob to null with bbr".into()),
        other => Err(format!("congestion_control: {other:?} is not one of reno, cubic, bbr")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_needs_five_raised_samples_one_per_millisecond() {
        let start = Instant::now();
        let mut monitor = DelayIncreaseMonitor::new(0.5);
        let ms = Duration::from_millis;
        assert!(!monitor.is_rtt_increasing(start, ms(10)));
        for step in 1..=4 {
            assert!(!monitor.is_rtt_increasing(start + ms(step), ms(16)));
        }
        // a second sample within the same millisecond is ignored
        assert!(!monitor.is_rtt_increasing(start + ms(4) + Duration::from_micros(100), ms(16)));
        assert!(monitor.is_rtt_increasing(start + ms(5), ms(16)));
        let mut tolerant = DelayIncreaseMonitor::new(0.5);
        assert!(!tolerant.is_rtt_increasing(start, ms(10)));
        for step in 1..=10 {
            assert!(!tolerant.is_rtt_increasing(start + ms(step), ms(14)));
        }
    }

    #[test]
    fn reno_halves_and_cubic_keeps_seven_tenths_once_per_recovery() {
        let start = Instant::now();
        for (algorithm, kept) in [(Algorithm::Reno, 0.5), (Algorithm::Cubic, 0.7)] {
            let mut cc = LossBased::new(algorithm, 1200, None, None);
            let before = cc.window();
            cc.on_congestion_event(start + Duration::from_millis(10), start, false, 1200);
            assert_eq!(cc.window(), (before as f64 * kept) as u64);
            // a packet sent before the recovery started does not reduce again
            cc.on_congestion_event(start + Duration::from_millis(20), start + Duration::from_millis(5), false, 1200);
            assert_eq!(cc.window(), (before as f64 * kept) as u64);
            cc.on_congestion_event(start + Duration::from_millis(30), start + Duration::from_millis(25), true, 1200);
            assert_eq!(cc.window(), 2 * 1200);
        }
    }

    #[test]
    fn the_initial_window_knob_sets_where_slow_start_begins() {
        let default = LossBased::new(Algorithm::Cubic, 1200, None, None);
        assert_eq!((default.window(), default.initial_window()), (12_000, 12_000));
        let tcp_like = LossBased::new(Algorithm::Reno, 1200, None, Some(14_480));
        assert_eq!((tcp_like.window(), tcp_like.initial_window()), (14_480, 14_480));
        assert!(factory("bbr", None, Some(14_480)).is_err() && factory("bbr", None, None).is_ok());
    }
}
