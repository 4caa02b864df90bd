//! The arithmetic of a sanitize operation's pace and progress: how many
//! bytes one step covers, when a step is due at the LU's configured
//! medium rate, the PROGRESS INDICATION it reports, and when it records
//! how far it got. Pure functions, so that the tests need no clock.

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
    let block = block.max(1);
    let want = rate.map_or(CHUNK, |r| (r / STEPS_PER_SECOND).min(CHUNK));
    (want / block).max(1) * block
}

/// How long after the operation (re)started the first `done` bytes are
/// due at `rate` bytes per second.
pub(super) fn due(done: u64, rate: u64) -> Duration {
    let nanos = u128::from(done) * 1_000_000_000 / u128::from(rate.max(1));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The PROGRESS INDICATION for `done` of `work` bytes: the numerator of
/// a fraction over 65536 (SPC-5 §4.4.2.4.4), 65535 when done.
pub(super) fn progress(done: u64, work: u64) -> u16 {
    if work == 0 || done >= work {
        return u16::MAX;
    }
    let p = u128::from(done) * 65535 / u128::from(work);
    u16::try_from(p).unwrap_or(u16::MAX)
}

/// Whether a checkpoint is due `since_last` after the previous one.
pub(super) fn checkpoint_due(since_last: Duration) -> bool {
    since_last >= CHECKPOINT_EVERY
}
