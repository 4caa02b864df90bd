//! `ironlun compare-local`: the disk's own limit (local fio) beside
//! ironlun and tgt over loopback on the same disk file and device (see
//! docs/performance.md; `benches/compare-local` installs what it needs
//! and runs this).

use std::path::PathBuf;
use std::time::Duration;

use ironlun_compare::local;

use super::compare_peers::write_out;
use super::compare_runs::RunArgs;

#[derive(clap::Args)]
pub struct LocalArgs {
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
    #[command(flatten)]
    pub runs: RunArgs,
    /// Where the table (Markdown) and the samples (JSON) go.
    #[arg(long, default_value = "compare-local", value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(a: LocalArgs) -> Result<(), String> {
    let runs = a.runs.check(Duration::from_millis(500), "500ms")?;
    let size = ironlun_units::parse_size(&a.size)?;
    if size < 64 << 20 {
        return Err("--size must be at least 64MiB".into());
    }
    let opts = local::Options {
        exe: std::env::current_exe().map_err(|e| format!("cannot find our own binary: {e}"))?,
        reps: runs.reps,
        measure: runs.measure,
        file: a.file,
        size,
        remove: !a.keep,
        block: !a.no_block,
        only: runs.only,
        steal_redo_pct: runs.steal_redo_pct,
        started: crate::runtime::now_rfc3339(),
    };
    let report = local::run(&opts)?;
    let md = local::table::markdown(&report);
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    write_out(&a.out, &md, &json, report.failures.len())
}
