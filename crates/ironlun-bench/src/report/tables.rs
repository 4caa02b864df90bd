//! The report's tables: every run's results in full, and per workload the
//! runs side by side with each one's change from the first.

use std::fmt::Write as _;

use super::charts::Group;
use super::format::{cell, esc};
use super::header::swatch;
use super::Run;
use crate::result::WorkloadResult;

/// Every workload of one run, as `ironlun bench` prints them.
pub fn results(run: usize, r: &Run) -> String {
    let mut h = format!(
        "<h3>{}</h3><div class=\"wide\"><table class=\"results\"><tr><th>workload</th><th>IOPS</th><th>read IOPS</th>\
         <th>write IOPS</th><th>MB/s (10<sup>6</sup>)</th><th>MiB/s (2<sup>20</sup>)</th><th>mean µs</th>\
         <th>p50 µs</th><th>p99 µs</th><th>p99.9 µs</th><th>p99.99 µs</th><th>max µs</th>\
         <th>initiator CPU %</th><th>target CPU %</th><th>target µs/IO</th><th>errors</th></tr>",
        swatch(run, &r.name)
    );
    for w in &r.report.workloads {
        let l = &w.latency_us;
        let _ = write!(
            h,
            "<tr><td title=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            esc(&w.description),
            esc(&w.name),
            cell(Some(w.iops), 0),
            cell(Some(w.read_iops), 0),
            cell(Some(w.write_iops), 0),
            cell(Some(w.mb_per_s), 1),
            cell(Some(w.mib_per_s), 1),
            cell(Some(l.mean), 1),
            cell(Some(l.p50), 1),
            cell(Some(l.p99), 1),
            cell(Some(l.p999), 1),
            cell(Some(l.p9999), 1),
            cell(Some(l.max), 0),
            cell(w.cpu.initiator_pct, 1),
            cell(w.cpu.target_pct, 1),
            cell(w.cpu.target_us_per_io, 2),
            w.errors
        );
    }
    h.push_str("</table></div>");
    h
}

/// `v` beside the first run's `base`: "+12.5 %".
fn change(v: f64, base: f64) -> String {
    if base > 0.0 && v.is_finite() {
        format!("{:+.1} %", (v / base - 1.0) * 100.0)
    } else {
        "-".into()
    }
}

/// The figures a comparison shows: name, value, decimals.
fn figures(w: &WorkloadResult) -> [(f64, usize); 6] {
    let l = &w.latency_us;
    [
        (w.iops, 0),
        (w.mb_per_s, 1),
        (l.p50, 1),
        (l.p99, 1),
        (l.p999, 1),
        (l.max, 0),
    ]
}

/// One workload across runs, each run's change from the first run.
pub fn comparison(g: &Group<'_>, runs: &[String]) -> String {
    let mut h = String::from(
        "<table class=\"compare\"><tr><th>run</th><th>IOPS</th><th>MB/s</th><th>p50 µs</th>\
         <th>p99 µs</th><th>p99.9 µs</th><th>max µs</th></tr>",
    );
    let base = g.results.first().map(|(_, r)| figures(r));
    for (i, &(run, w)) in g.results.iter().enumerate() {
        let name = runs.get(run).map_or("?", String::as_str);
        let _ = write!(h, "<tr><td>{}</td>", swatch(run, name));
        for (k, (v, digits)) in figures(w).into_iter().enumerate() {
            let delta = match base.as_ref().and_then(|b| b.get(k)) {
                Some(b) if i > 0 => format!("<br><small>{}</small>", change(v, b.0)),
                _ => String::new(),
            };
            let _ = write!(h, "<td>{}{delta}</td>", cell(Some(v), digits));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_signed_percentages() {
        assert_eq!(change(110.0, 100.0), "+10.0 %");
        assert_eq!(change(50.0, 100.0), "-50.0 %");
        assert_eq!(change(5.0, 0.0), "-");
    }
}
