//! The arithmetic of a sanitize operation's pace and progress: how many
//! bytes one step covers, when a step is due at the LU's configured
//! medium rate, the PROGRESS INDICATION it reports, and when it records
//! how far it got. Pure functions, so that the tests need no clock.

use std::num::{NonZeroU128, NonZeroU64};
use std::time::Duration;

/// Bytes one step covers at full speed.
pub(super) const CHUNK: u64 = 1 << 20;

/// Steps per second at a configured rate: progress moves in steps this
/// fine, and a stop request waits no longer than one step.
const STEPS_PER_SECOND: u64 = 8;

/// How often a running operation records how far it got (SBC-4 §4.11.2:
/// it resumes from there after a restart).
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Bytes of one step: [`CHUNK`], or at `rate` bytes per second about an
/// eighth of a second of work; whole blocks of `block` bytes, at least
/// one.
pub(super) fn step_bytes(rate: Option<u64>, block: u64) -> u64 {
    let block = NonZeroU64::new(block).unwrap_or(NonZeroU64::MIN);
    let want = rate.map_or(CHUNK, |r| (r / STEPS_PER_SECOND).min(CHUNK));
    // At most CHUNK or one block.
    (want / block).max(1).saturating_mul(block.get())
}

/// How long after the operation (re)started the first `done` bytes are
/// due at `rate` bytes per second.
pub(super) fn due(done: u64, rate: u64) -> Duration {
    // A u64 times 10^9 fits a u128.
    let rate = NonZeroU128::new(u128::from(rate)).unwrap_or(NonZeroU128::MIN);
    let nanos = u128::from(done).saturating_mul(1_000_000_000) / rate;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The PROGRESS INDICATION for `done` of `work` bytes: the numerator of
/// a fraction over 65536 (SPC-5 §4.4.2.4.4), 65535 when done.
pub(super) fn progress(done: u64, work: u64) -> u16 {
    let Some(whole) = NonZeroU128::new(u128::from(work)).filter(|_| done < work) else {
        return u16::MAX;
    };
    // A u64 times 65535 fits a u128.
    let p = u128::from(done).saturating_mul(65535) / whole;
    u16::try_from(p).unwrap_or(u16::MAX)
}

/// Whether a checkpoint is due `since_last` after the previous one.
pub(super) fn checkpoint_due(since_last: Duration) -> bool {
    since_last >= CHECKPOINT_EVERY
}
