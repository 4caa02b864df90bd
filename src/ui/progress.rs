//! Progress on a terminal: a bar for a copy (indicatif), a line per
//! workload for a run; nothing when stderr is not a terminal or the user
//! asked for quiet.

use std::io::IsTerminal;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};

/// A copy's progress bar.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    pub fn new(total_bytes: u64, quiet: bool) -> Self {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::new(total_bytes);
        if let Ok(style) = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress { bar: Some(bar) }
    }

    pub fn add(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// A workload's progress line on a terminal (elapsed time, IOPS, MB/s,
/// p99, and the time left of a run of at most `total` seconds), nothing
/// otherwise.
pub fn progress_line(name: &str, total: Option<f64>) -> Option<ironlun_bench::engine::ProgressFn> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let name = name.to_owned();
    Some(Arc::new(move |t, iops, mbs, p99| {
        let line = ironlun_bench::progress::line(&name, t, total, iops, mbs, p99);
        eprint!("\r\x1b[2K{line}");
    }))
}

/// A bench run's console: progress lines on a terminal's stderr, the
/// result table on stdout.
pub struct Terminal;

impl ironlun_bench::runs::Console for Terminal {
    fn progress(
        &self,
        name: &str,
        total: Option<f64>,
    ) -> Option<ironlun_bench::engine::ProgressFn> {
        progress_line(name, total)
    }

    fn end_progress(&self) {
        eprint!("\r\x1b[2K");
    }

    fn table_line(&self, line: &str) {
        outln!("{line}");
    }
}
