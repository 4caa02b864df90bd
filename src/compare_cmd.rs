//! `ironlun compare-peers`: ironlun and tgt side by side on loopback with
//! the same clients, in alternation; `ironlun compare-local`: the disk's
//! own limit (local fio) beside both targets over loopback (see
//! docs/performance.md; `benches/compare-peers` and `benches/compare-local`
//! install what they need and run these).

use std::path::PathBuf;

use ironlun_compare::clients::Client;
use ironlun_compare::{local, summary, Options};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// Alternating repetitions of every run (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Measured time per run, warm-up excluded.
    #[arg(long, default_value = "3s", value_name = "DURATION")]
    pub time: String,
    /// Size of each target's file LUN.
    #[arg(long, default_value = "1GiB", value_name = "SIZE")]
    pub size: String,
    /// Directory for the LUN files; a tmpfs directory, as in the study.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Clients to run (repeatable): iscsi-perf, qemu-img, ironlun.
    /// Default: all three.
    #[arg(long, value_name = "NAME")]
    pub client: Vec<String>,
    /// Session counts for the scaling runs, comma-separated ("" for none).
    #[arg(long, default_value = "1,2,4,8,64", value_name = "LIST")]
    pub sessions: String,
    /// Only workloads whose name contains this (repeatable), e.g. 4k-randread.
    #[arg(long, value_name = "TEXT")]
    pub only: Vec<String>,
    /// Where the table (Markdown) and the samples (JSON) go.
    #[arg(long, default_value = "compare-peers", value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run_compare(a: CompareArgs) -> Result<(), String> {
    let measure = ironlun_units::parse_duration(&a.time)?;
    if measure.as_secs() < 1 {
        return Err("--time must be at least 1s (iscsi-perf reports whole seconds)".into());
    }
    if a.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    let clients = if a.client.is_empty() {
        Client::ALL.to_vec()
    } else {
        a.client
            .iter()
            .map(|c| Client::parse(c))
            .collect::<Result<_, _>>()?
    };
    let sessions = a
        .sessions
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| match s.trim().parse::<usize>() {
            Ok(n) if (1..=256).contains(&n) => Ok(n),
            _ => Err(format!("--sessions: '{s}' is not a count from 1 to 256")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find our own binary: {e}"))?;
    let dir = a.dir.unwrap_or_else(|| {
        PathBuf::from(format!("/dev/shm/ironlun-compare-{}", std::process::id()))
    });
    let opts = Options {
        exe,
        reps: a.reps,
        measure,
        lun_size: ironlun_units::parse_size(&a.size)?,
        dir,
        clients,
        sessions,
        only: a.only,
        started: crate::now_rfc3339(),
    };
    let report = ironlun_compare::run(&opts)?;
    let md = summary::markdown(&report);
    outln!("\n{md}");
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let table = a.out.join("table.md");
    let json = a.out.join("result.json");
    std::fs::write(&table, &md).map_err(|e| format!("{}: {e}", table.display()))?;
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&json, text).map_err(|e| format!("{}: {e}", json.display()))?;
    eprintln!("wrote {} and {}", table.display(), json.display());
    if report.failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} runs failed (listed above)",
            report.failures.len()
        ))
    }
}

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

pub fn run_local(a: LocalArgs) -> Result<(), String> {
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
        started: crate::now_rfc3339(),
    };
    let report = local::run(&opts)?;
    let md = local::table::markdown(&report);
    outln!("\n{md}");
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let table = a.out.join("table.md");
    let json = a.out.join("result.json");
    std::fs::write(&table, &md).map_err(|e| format!("{}: {e}", table.display()))?;
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&json, text).map_err(|e| format!("{}: {e}", json.display()))?;
    eprintln!("wrote {} and {}", table.display(), json.display());
    if report.failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} runs failed (listed above)",
            report.failures.len()
        ))
    }
}
