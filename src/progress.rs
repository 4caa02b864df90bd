//! A progress line on a terminal (indicatif); nothing when stderr is not
//! a terminal or the user asked for quiet.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

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
