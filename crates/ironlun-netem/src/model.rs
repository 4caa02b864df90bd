//! The link model, without sockets or threads: when a chunk that arrives
//! at the relay is delivered, and how much may be on the link at once.
//! Deterministic given the arrival times, so it is tested without a
//! clock.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// Delivery schedule of one direction: a chunk leaves when the link is
/// free, takes `len / rate` to serialise (so back-to-back chunks queue as
/// on a real link), then travels the one-way delay (plus jitter). Many
/// chunks are on the link at once; nothing waits a whole delay per chunk.
#[derive(Debug)]
pub struct Shaper {
    rate_bps: Option<u64>,
    delay: Duration,
    jitter: Duration,
    /// When the link finishes serialising what it already has.
    link_free: Option<Instant>,
    /// Deliveries stay in order.
    last_delivery: Option<Instant>,
    rng: SmallRng,
}

impl Shaper {
    pub fn new(rate_bps: Option<u64>, delay: Duration, jitter: Duration, seed: u64) -> Shaper {
        Shaper {
            rate_bps: rate_bps.filter(|r| *r > 0),
            delay,
            jitter,
            link_free: None,
            last_delivery: None,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Time to put `len` bytes on the wire.
    pub fn serialisation(&self, len: usize) -> Duration {
        match self.rate_bps {
            Some(r) => Duration::from_secs_f64(len as f64 * 8.0 / r as f64),
            None => Duration::ZERO,
        }
    }

    /// When a chunk of `len` bytes that reached the relay at `now` is due
    /// at the other end.
    pub fn schedule(&mut self, now: Instant, len: usize) -> Instant {
        let start = self.link_free.map_or(now, |f| f.max(now));
        let sent = start + self.serialisation(len);
        self.link_free = Some(sent);
        let jitter = if self.jitter.is_zero() {
            Duration::ZERO
        } else {
            let max = u64::try_from(self.jitter.as_nanos()).unwrap_or(u64::MAX);
            Duration::from_nanos(self.rng.random_range(0..=max))
        };
        let due = sent + self.delay + jitter;
        let due = self.last_delivery.map_or(due, |l| l.max(due));
        self.last_delivery = Some(due);
        due
    }
}

/// Bytes allowed on the link in one direction. Taken when the relay reads
/// a chunk; given back at a time the caller chooses (delivery, or
/// delivery plus the reverse delay when a TCP window is emulated).
#[derive(Debug)]
pub struct Window {
    limit: usize,
    in_use: usize,
    returns: VecDeque<(Instant, usize)>,
}

impl Window {
    pub fn new(limit: usize) -> Window {
        Window {
            limit: limit.max(1),
            in_use: 0,
            returns: VecDeque::new(),
        }
    }

    /// Bytes that may be taken at `now`.
    pub fn available(&mut self, now: Instant) -> usize {
        while let Some(&(at, n)) = self.returns.front() {
            if at > now {
                break;
            }
            self.returns.pop_front();
            self.in_use = self.in_use.saturating_sub(n);
        }
        self.limit.saturating_sub(self.in_use)
    }

    pub fn take(&mut self, n: usize) {
        self.in_use += n;
    }

    /// `n` bytes come back at `at` (calls come in time order per
    /// direction; a later call with an earlier time is kept in order).
    pub fn give_back(&mut self, at: Instant, n: usize) {
        let at = self.returns.back().map_or(at, |(last, _)| (*last).max(at));
        self.returns.push_back((at, n));
    }

    /// When credit next comes back, if any is due.
    pub fn next_return(&self) -> Option<Instant> {
        self.returns.front().map(|(at, _)| *at)
    }

    pub fn in_use(&self) -> usize {
        self.in_use
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn delay_is_pipelined_not_per_chunk() {
        let t0 = Instant::now();
        let mut s = Shaper::new(None, 25 * MS, Duration::ZERO, 1);
        // Ten chunks arriving together are all due one delay later, not
        // ten delays later.
        for _ in 0..10 {
            assert_eq!(s.schedule(t0, 1000), t0 + 25 * MS);
        }
    }

    #[test]
    fn rate_serialises_back_to_back_chunks() {
        let t0 = Instant::now();
        // 8 Mbit/s: 1000 bytes take 1 ms.
        let mut s = Shaper::new(Some(8_000_000), 10 * MS, Duration::ZERO, 1);
        assert_eq!(s.schedule(t0, 1000), t0 + 11 * MS);
        assert_eq!(s.schedule(t0, 1000), t0 + 12 * MS);
        // A chunk after an idle gap does not inherit the queue.
        assert_eq!(s.schedule(t0 + 100 * MS, 2000), t0 + 112 * MS);
        // 1 MB at 8 Mbit/s: one second.
        let mut s = Shaper::new(Some(8_000_000), Duration::ZERO, Duration::ZERO, 1);
        let mut last = t0;
        for _ in 0..1000 {
            last = s.schedule(t0, 1000);
        }
        assert_eq!(last, t0 + Duration::from_secs(1));
    }

    #[test]
    fn jitter_is_bounded_and_keeps_order() {
        let t0 = Instant::now();
        let mut s = Shaper::new(None, 5 * MS, 2 * MS, 7);
        let mut prev = t0;
        for i in 0..1000u32 {
            let now = t0 + Duration::from_micros(u64::from(i) * 10);
            let due = s.schedule(now, 100);
            assert!(due >= prev, "out of order");
            assert!(due >= now + 5 * MS && due <= now + 7 * MS + Duration::from_micros(10));
            prev = due;
        }
    }

    #[test]
    fn window_credit_comes_back_when_given() {
        let t0 = Instant::now();
        let mut w = Window::new(64 << 10);
        assert_eq!(w.available(t0), 64 << 10);
        w.take(64 << 10);
        assert_eq!(w.available(t0), 0);
        w.give_back(t0 + 10 * MS, 16 << 10);
        w.give_back(t0 + 5 * MS, 16 << 10); // kept in order: at 10 ms
        assert_eq!(w.next_return(), Some(t0 + 10 * MS));
        assert_eq!(w.available(t0 + 9 * MS), 0);
        assert_eq!(w.available(t0 + 10 * MS), 32 << 10);
        assert_eq!(w.in_use(), 32 << 10);
        assert_eq!(w.next_return(), None);
    }

    /// A window-limited flow over the model gets window / RTT.
    #[test]
    fn a_window_limits_a_flow_to_window_per_round_trip() {
        let t0 = Instant::now();
        let (window, chunk) = (64usize << 10, 16usize << 10);
        let mut s = Shaper::new(Some(1_000_000_000), 25 * MS, Duration::ZERO, 1);
        let mut w = Window::new(window);
        let mut now = t0;
        let mut sent = 0usize;
        while now < t0 + Duration::from_secs(1) {
            if w.available(now) >= chunk {
                w.take(chunk);
                let due = s.schedule(now, chunk);
                // The receiver reads at once; the ACK takes 25 ms back.
                w.give_back(due + 25 * MS, chunk);
                sent += chunk;
            } else {
                now = w.next_return().unwrap_or(now + MS);
            }
        }
        // 64 KiB per ~50 ms round trip: ~1.3 MB/s.
        let expected = window as f64 / 0.050;
        let got = sent as f64;
        assert!(
            (got - expected).abs() / expected < 0.05,
            "{got} vs {expected}"
        );
    }
}
