//! When a driver re-arms its timer for the protocol's `poll_timeout`.
//!
//! The keep-alive deadline (`last PDU received + NOP interval`) moves with
//! every PDU, so a driver that armed a fresh runtime timer on each wakeup
//! would register and cancel one per batch of commands: on a QD 1 workload
//! that is one timer-wheel insertion and removal per I/O. Every
//! `handle_timeout` in this crate acts only on deadlines that have passed,
//! so a timer that fires early is harmless: the driver calls
//! `handle_timeout`, nothing is due, and it arms for the later deadline.
//! [`TimerSlot`] holds that rule: re-arm only when the wanted deadline is
//! earlier than the armed one (or none is armed), and the timer fires at
//! most once per keep-alive interval instead of being moved per PDU.

use std::time::Instant;

/// The deadline a driver's timer is armed for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerSlot {
    armed: Option<Instant>,
}

impl TimerSlot {
    /// Takes the protocol's wanted deadline; returns the instant to re-arm
    /// the timer for, when it must change. `None` as `want` disarms.
    pub fn update(&mut self, want: Option<Instant>) -> Option<Instant> {
        match (want, self.armed) {
            (Some(w), Some(a)) if a <= w => None,
            (Some(w), _) => {
                self.armed = Some(w);
                Some(w)
            }
            (None, _) => {
                self.armed = None;
                None
            }
        }
    }

    /// True while the driver should wait on its timer.
    pub fn is_armed(&self) -> bool {
        self.armed.is_some()
    }

    /// The timer fired: nothing is armed until the next `update`.
    pub fn fired(&mut self) {
        self.armed = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn later_deadlines_keep_the_armed_one_earlier_ones_rearm() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut slot = TimerSlot::default();
        assert!(!slot.is_armed());
        assert_eq!(slot.update(Some(s(30))), Some(s(30)));
        // The keep-alive deadline moving later with each PDU: no re-arm.
        for n in 31..40 {
            assert_eq!(slot.update(Some(s(n))), None);
        }
        // A nearer deadline (a ping's answer timeout) re-arms at once.
        assert_eq!(slot.update(Some(s(10))), Some(s(10)));
        assert_eq!(slot.update(Some(s(10))), None);
        // Fired early: the later deadline is armed next.
        slot.fired();
        assert!(!slot.is_armed());
        assert_eq!(slot.update(Some(s(39))), Some(s(39)));
        // No deadline at all disarms; the next one arms again.
        assert_eq!(slot.update(None), None);
        assert!(!slot.is_armed());
        assert_eq!(slot.update(Some(s(50))), Some(s(50)));
        assert!(slot.is_armed());
    }
}
