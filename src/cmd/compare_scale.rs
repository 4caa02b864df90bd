//! `ironlun compare-scale`: ironlun and tgt as the client's threads and
//! sessions grow, target and client pinned to disjoint halves of the
//! machine (see docs/performance.md, "compare-scale";
//! `benches/compare-scale` installs what it needs and runs this).

use std::path::PathBuf;

use ironlun_compare::scale;

use super::compare_peers::write_out;

#[derive(clap::Args)]
pub struct ScaleArgs {
    /// Alternating repetitions of every row (medians are reported).
    #[arg(long, default_value_t = 2)]
    pub reps: usize,
    /// Measured time per run (one second of ramp comes before).
    #[arg(long, default_value = "4s", value_name = "DURATION")]
    pub time: String,
    /// Client thread counts of the thread rows, comma-separated
    /// (default: 1, 2, 4 … up to half the machine's CPUs).
    #[arg(long, value_name = "LIST")]
    pub threads: Option<String>,
    /// Session counts of the session rows, comma-separated ("" for
    /// none); 256 I/Os in flight spread over them.
    #[arg(long, default_value = "1,8,64", value_name = "LIST")]
    pub sessions: String,
    /// Where the table (Markdown) and the samples (JSON) go.
    #[arg(long, default_value = "compare-scale", value_name = "DIR")]
    pub out: PathBuf,
}

/// A comma-separated list of counts from 1 to 256.
fn counts(flag: &str, list: &str) -> Result<Vec<u32>, String> {
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| match s.trim().parse::<u32>() {
            Ok(n) if (1..=256).contains(&n) => Ok(n),
            _ => Err(format!("{flag}: '{s}' is not a count from 1 to 256")),
        })
        .collect()
}

pub fn run(a: ScaleArgs) -> Result<(), String> {
    let measure = ironlun_units::parse_duration(&a.time)?;
    if measure.as_millis() < 500 {
        return Err("--time must be at least 500ms".into());
    }
    if a.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    let opts = scale::Options {
        exe: std::env::current_exe().map_err(|e| format!("cannot find our own binary: {e}"))?,
        reps: a.reps,
        measure,
        threads: counts("--threads", a.threads.as_deref().unwrap_or(""))?,
        sessions: counts("--sessions", &a.sessions)?,
        scratch: a.out.join("scratch"),
        started: crate::runtime::now_rfc3339(),
    };
    let report = scale::run(&opts)?;
    let _ = std::fs::remove_dir(&opts.scratch);
    let md = scale::table::markdown(&report);
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    write_out(&a.out, &md, &json, report.failures.len())
}
