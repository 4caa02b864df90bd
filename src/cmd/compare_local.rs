//! `ironlun compare-local`: the disk's own limit (local fio) beside
//! ironlun and tgt over loopback on the same disk file and device (see
//! docs/performance.md; `benches/compare-local` installs what it needs
//! and runs this).

use std::path::PathBuf;

use ironlun_compare::local;

use super::compare_peers::write_out;

#[derive(clap::Args)]
pub struct LocalArgs {
    /// Alternating repetitions of every run (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Measured time per run (one second of ramp comes before it).
    #[arg(long, default_value = "3s", value_name = "DURATION")]
    pub time: String,
    /// The file on the disk to measure (made with random data when
    /// missing or of another size). It must be on a disk, not tmpfs.
    #[arg(
        long,
        default_value = "/var/tmp/ironlun-compare-local/disk.img",
        value_name = "PATH"
    )]
    pub file: PathBuf,
    /// Size of the file.
    #[arg(long, default_value = "2GiB", value_name = "SIZE")]
    pub size: String,
    /// Keep the file afterwards (a later run reuses it).
    #[arg(long)]
    pub keep: bool,
    /// Leave out the block-device rows (a loop device over the file).
    #[arg(long)]
    pub no_block: bool,
    /// Only workloads whose name contains this (repeatable), e.g. qd64.
    #[arg(long, value_name = "TEXT")]
    pub only: Vec<String>,
    /// A run with at least this much hypervisor steal (percent) is run
    /// again, up to twice, keeping the least stolen; "off" never.
    /// Default: 5.
    #[arg(long, value_name = "PCT")]
    pub steal_redo: Option<String>,
    /// Where the table (Markdown) and the samples (JSON) go.
    #[arg(long, default_value = "compare-local", value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(a: LocalArgs) -> Result<(), String> {
    let measure = ironlun_units::parse_duration(&a.time)?;
    if measure.as_millis() < 500 {
        return Err("--time must be at least 500ms".into());
    }
    if a.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    let size = ironlun_units::parse_size(&a.size)?;
    if size < 64 << 20 {
        return Err("--size must be at least 64MiB".into());
    }
    let steal_redo_pct = match a.steal_redo.as_deref() {
        None => local::STEAL_REDO_PCT,
        Some("off") => f64::INFINITY,
        Some(p) => p
            .trim_end_matches('%')
            .parse::<f64>()
            .ok()
            .filter(|p| (0.0..=100.0).contains(p))
            .ok_or_else(|| format!("--steal-redo {p}: a percentage or \"off\""))?,
    };
    let opts = local::Options {
        exe: std::env::current_exe().map_err(|e| format!("cannot find our own binary: {e}"))?,
        reps: a.reps,
        measure,
        file: a.file,
        size,
        remove: !a.keep,
        block: !a.no_block,
        only: a.only,
        steal_redo_pct,
        started: crate::runtime::now_rfc3339(),
    };
    let report = local::run(&opts)?;
    let md = local::table::markdown(&report);
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    write_out(&a.out, &md, &json, report.failures.len())
}
