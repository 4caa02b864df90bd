//! What a run, or one thread's part of a run, measured before it is
//! summarised: what a thread hands back and what a threaded run merges.

use std::time::Instant;

use hdrhistogram::Histogram;

use super::meter::{Counters, ZoneBytes};
use crate::mix::OpMeter;
use crate::result::{Second, VerifyReport};
use crate::steady::SteadyResult;

/// The measurement of one part of a run.
pub(crate) struct Measured {
    pub(crate) all: Histogram<u64>,
    pub(crate) read: Histogram<u64>,
    pub(crate) write: Histogram<u64>,
    pub(crate) counts: Counters,
    pub(crate) errors: u64,
    /// The first errors' messages (all are counted in `errors`).
    pub(crate) error_samples: Vec<String>,
    pub(crate) series: Vec<Second>,
    /// The number of zones when the workload sweeps zones.
    pub(crate) zones: Option<u32>,
    pub(crate) zone_bytes: Vec<ZoneBytes>,
    pub(crate) verify: Option<VerifyReport>,
    /// Counts and latencies by op, when the workload has a mix.
    pub(crate) ops: Option<OpMeter>,
    /// What the steady-state rule found, when the workload has one.
    pub(crate) steady: Option<SteadyResult>,
    /// The measured interval.
    pub(crate) start: Instant,
    pub(crate) end: Instant,
}

impl Measured {
    /// The measured interval in seconds (never zero).
    pub(crate) fn elapsed(&self) -> f64 {
        (self.end.saturating_duration_since(self.start))
            .as_secs_f64()
            .max(1e-9)
    }
}
