//! `ironlun compare-peers`: ironlun and tgt (and istgt, when installed or
//! asked for) side by side on loopback with the same clients, in
//! alternation (see docs/performance.md; `benches/compare-peers` installs
//! what it needs and runs this).

use std::path::{Path, PathBuf};

use ironlun_compare::clients::Client;
use ironlun_compare::{summary, Options};

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
    /// Targets to compare, comma-separated: ironlun and tgt always, istgt
    /// optionally (e.g. ironlun,tgt,istgt). Default: istgt too when it is
    /// installed.
    #[arg(long, value_name = "LIST")]
    pub targets: Option<String>,
    /// Where the table (Markdown) and the samples (JSON) go.
    #[arg(long, default_value = "compare-peers", value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(a: CompareArgs) -> Result<(), String> {
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
    let istgt = match &a.targets {
        Some(list) => with_istgt(list)?,
        None => ironlun_compare::istgt::installed(),
    };
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
        started: crate::runtime::now_rfc3339(),
        istgt,
    };
    let report = ironlun_compare::run(&opts)?;
    let md = summary::markdown(&report);
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    write_out(&a.out, &md, &json, report.failures.len())
}

/// Whether `--targets LIST` asks for istgt; ironlun and tgt must be in
/// it (the table is ironlun against tgt), and nothing else.
fn with_istgt(list: &str) -> Result<bool, String> {
    let names: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if let Some(bad) = names
        .iter()
        .find(|t| !["ironlun", "tgt", "istgt"].contains(t))
    {
        return Err(format!(
            "--targets: unknown target '{bad}' (ironlun, tgt, istgt)"
        ));
    }
    if !names.contains(&"ironlun") || !names.contains(&"tgt") {
        return Err("--targets must include ironlun and tgt (istgt is optional)".into());
    }
    Ok(names.contains(&"istgt"))
}

/// Prints the table, writes it and the samples to `out`, and fails when
/// any of the runs did.
pub(super) fn write_out(out: &Path, md: &str, json: &str, failures: usize) -> Result<(), String> {
    outln!("\n{md}");
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let table = out.join("table.md");
    let result = out.join("result.json");
    std::fs::write(&table, md).map_err(|e| format!("{}: {e}", table.display()))?;
    std::fs::write(&result, json).map_err(|e| format!("{}: {e}", result.display()))?;
    eprintln!("wrote {} and {}", table.display(), result.display());
    if failures == 0 {
        Ok(())
    } else {
        Err(format!("{failures} runs failed (listed above)"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::with_istgt;

    #[test]
    fn targets_list_names_istgt_as_the_optional_peer() {
        assert_eq!(with_istgt("ironlun,tgt"), Ok(false));
        assert_eq!(with_istgt("tgt, ironlun ,istgt"), Ok(true));
        assert!(with_istgt("ironlun,istgt")
            .unwrap_err()
            .contains("must include"));
        assert!(with_istgt("ironlun,tgt,lio").unwrap_err().contains("'lio'"));
    }
}
