//! `ironlun report`: one HTML page with charts from bench and lab JSON
//! results.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ReportArgs {
    /// JSON results written by `ironlun bench --json` or `ironlun lab`.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short, long, default_value = "report.html")]
    pub output: PathBuf,
}

pub fn run(a: ReportArgs) -> Result<(), String> {
    let mut reports = Vec::new();
    for p in &a.results {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let r =
            ironlun_bench::output::read_json(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        reports.push(r);
    }
    let html = ironlun_bench::report::html(&reports)?;
    std::fs::write(&a.output, html).map_err(|e| format!("{}: {e}", a.output.display()))?;
    outln!("report: {}", a.output.display());
    Ok(())
}
