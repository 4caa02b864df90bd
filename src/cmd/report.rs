//! `ironlun report`: one HTML page with charts from bench and lab JSON
//! results; several files overlay, one colour per file, each named by
//! its file name.

use std::path::{Path, PathBuf};

use ironlun_bench::report::{self, Run};

#[derive(clap::Args)]
pub struct ReportArgs {
    /// JSON results written by `ironlun bench --json` or `ironlun lab`;
    /// several are overlaid for comparison.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short, long, default_value = "report.html")]
    pub output: PathBuf,
}

/// A run's name: its file name without the extension.
fn name(p: &Path) -> String {
    p.file_stem().map_or_else(
        || p.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

pub fn run(a: ReportArgs) -> Result<(), String> {
    let names = report::distinct_names(a.results.iter().map(|p| name(p)).collect());
    let mut runs = Vec::new();
    for (p, name) in a.results.iter().zip(names) {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let report =
            ironlun_bench::output::read_json(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        runs.push(Run { name, report });
    }
    let html = report::compare(&runs);
    std::fs::write(&a.output, html).map_err(|e| format!("{}: {e}", a.output.display()))?;
    outln!("report: {}", a.output.display());
    Ok(())
}
