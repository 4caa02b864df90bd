//! The flags `compare-local` and `compare-rbd` share (how many runs, how
//! long, which workloads, when a run is redone for steal) and their
//! checks, in one place.

use std::time::Duration;

use ironlun_compare::local::STEAL_REDO_PCT;

#[derive(clap::Args)]
pub struct RunArgs {
    /// Alternating repetitions of every run (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Measured time per run (about one second of warm-up comes before).
    #[arg(long, default_value = "3s", value_name = "DURATION")]
    pub time: String,
    /// Only workloads whose name contains this (repeatable), e.g. 4k.
    #[arg(long, value_name = "TEXT")]
    pub only: Vec<String>,
    /// A run with at least this much hypervisor steal (percent) is run
    /// again, up to twice, keeping the least stolen; "off" never.
    /// Default: 5.
    #[arg(long, value_name = "PCT")]
    pub steal_redo: Option<String>,
}

/// [`RunArgs`] checked.
pub struct Runs {
    pub reps: usize,
    pub measure: Duration,
    pub only: Vec<String>,
    /// Percent; infinite for "off".
    pub steal_redo_pct: f64,
}

impl RunArgs {
    /// Checks the flags; `--time` must be at least `min_time`, which
    /// `min_text` names (and says why) in the error.
    pub fn check(self, min_time: Duration, min_text: &str) -> Result<Runs, String> {
        let measure = ironlun_units::parse_duration(&self.time)?;
        if measure < min_time {
            return Err(format!("--time must be at least {min_text}"));
        }
        if self.reps == 0 {
            return Err("--reps must be at least 1".into());
        }
        Ok(Runs {
            reps: self.reps,
            measure,
            only: self.only,
            steal_redo_pct: steal_redo_pct(self.steal_redo.as_deref())?,
        })
    }
}

/// `--steal-redo`: a percentage (a trailing % allowed), "off", or the
/// default.
fn steal_redo_pct(given: Option<&str>) -> Result<f64, String> {
    match given {
        None => Ok(STEAL_REDO_PCT),
        Some("off") => Ok(f64::INFINITY),
        Some(p) => p
            .trim_end_matches('%')
            .parse::<f64>()
            .ok()
            .filter(|p| (0.0..=100.0).contains(p))
            .ok_or_else(|| format!("--steal-redo {p}: a percentage or \"off\"")),
    }
}
