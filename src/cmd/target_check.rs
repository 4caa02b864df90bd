//! `ironlun target --check`, as `nginx -t`: the configuration as the
//! daemon would run it, in the file's own terms (TOML on standard
//! output: `Config::effective_toml`, every default filled in, flags'
//! effects marked, secrets hidden), then on standard error what opening
//! it without serving found (`ironlun_target_admin::check`) and the verdict:
//! "configuration OK" (status 0), or every problem (status 2).

use ironlun_target_admin::check::{self, Severity};
use ironlun_target_config::{Config, Overrides};

/// Prints the effective configuration and the findings; `Err` is the
/// verdict when something would fail.
pub fn run(cfg: &Config, flags: &Overrides, log: Option<&str>) -> Result<(), String> {
    print_toml(&cfg.effective_toml(flags, log))?;
    let found = check::check(cfg);
    for f in &found {
        eprintln!("{f}");
    }
    let source = cfg
        .source
        .as_ref()
        .map_or("flags".to_owned(), |p| p.display().to_string());
    let errors = found
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    if errors > 0 {
        let what = if errors == 1 { "problem" } else { "problems" };
        return Err(format!(
            "{source}: {errors} {what}: the daemon would not start, or not work as configured"
        ));
    }
    let luns: usize = cfg.targets.iter().map(|t| t.luns.len()).sum();
    eprintln!(
        "{source}: configuration OK: {} target(s), {luns} LUN(s)",
        cfg.targets.len()
    );
    Ok(())
}

/// The configuration on standard output. A reader that has gone (`|
/// head`) does not end the check: its verdict and exit status still
/// come.
fn print_toml(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("cannot write to standard output: {e}"))
        }
        _ => Ok(()),
    }
}
