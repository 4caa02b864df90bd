//! `ironlun report`: one self-contained HTML page from result files, for
//! pasting into a review. Charts are SVG drawn here (no fonts, scripts or
//! styles are fetched): per workload the latency exceedance plot
//! (latency against percentile on a log scale of 1/(1-p)), the latency
//! distribution, IOPS and p99 latency per second, zone rates; an
//! overview of every workload's IOPS, MB/s, p99 and host CPU as bars;
//! axes in K/M and µs/ms. Several runs
//! overlay, one colour per run, with a legend naming them. A summary
//! header says what ran where; the full tables follow. A small inline
//! script toggles runs and records what the charts hold.
//!
//! This is ironlun's one chart engine: the lab's sweep, reproduction and
//! published-comparison pages draw with the same `svg` plots and `axis`
//! scales, styled by [`CHART_STYLE`] and driven by [`CHART_SCRIPT`].
//!
//! Modules: `format` (numbers and units), `axis` (scales and ticks),
//! `svg` (line plots and scatters), `rules` (reference lines), `bars`
//! (bar charts), `charts` (the report's charts from results), `header`
//! (the summary), `tables`.

pub mod axis;
mod bars;
mod charts;
pub mod format;
mod header;
mod rules;
pub mod svg;
mod tables;

use std::fmt::Write as _;

pub use format::esc;

use crate::result::RunReport;
use charts::Group;

/// One results file and the name the report gives it.
pub struct Run {
    pub name: String,
    pub report: RunReport,
}

/// The style of every chart (and of its run keys), for any page that
/// shows them.
pub const CHART_STYLE: &str = include_str!("charts.css");
/// The page script of every page with charts: click a run's key to hide
/// it, point at one to bring it forward; it records what the charts hold
/// on `<html data-report>` for tests.
pub const CHART_SCRIPT: &str = include_str!("report.js");
const PAGE_STYLE: &str = include_str!("report.css");

/// The page for `reports`, named for what they say about themselves: the
/// tool alone, else each one's target when those differ, else "run N".
pub fn html(reports: &[RunReport]) -> String {
    let targets: Vec<&str> = reports
        .iter()
        .map(|r| r.target.as_deref().unwrap_or(""))
        .collect();
    let distinct = targets
        .iter()
        .enumerate()
        .all(|(i, t)| !t.is_empty() && !targets.iter().take(i).any(|u| u == t));
    let runs: Vec<Run> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| Run {
            name: match (reports.len(), distinct) {
                (1, _) => r.tool.clone(),
                (_, true) => r.target.clone().unwrap_or_default(),
                _ => format!("run {}", i + 1),
            },
            report: r.clone(),
        })
        .collect();
    compare(&runs)
}

/// Names that differ: a name given twice gets " (2)", " (3)" ...
pub fn distinct_names(names: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        let mut candidate = n.clone();
        let mut k = 2;
        while out.contains(&candidate) {
            candidate = format!("{n} ({k})");
            k += 1;
        }
        out.push(candidate);
    }
    out
}

/// The workloads of all runs by name, in the order first seen; each with
/// the first result of that name from each run that has one.
fn groups(runs: &[Run]) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        for w in &run.report.workloads {
            match out.iter_mut().find(|g| g.name == w.name) {
                Some(g) if g.results.iter().any(|(r, _)| *r == i) => {}
                Some(g) => g.results.push((i, w)),
                None => out.push(Group {
                    name: &w.name,
                    results: vec![(i, w)],
                }),
            }
        }
    }
    out
}

/// The page comparing `runs`, overlaid in their colours.
pub fn compare(runs: &[Run]) -> String {
    let names: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    let groups = groups(runs);
    let mut h = head(&names);
    h.push_str(&header::summary(runs));
    h.push_str("<h2>Overview</h2><div class=\"charts\">");
    for svg in charts::overview(&groups, &names) {
        h.push_str(&svg);
    }
    h.push_str("</div>");
    for g in &groups {
        h.push_str(&section(g, &names));
    }
    h.push_str("<h2>Results</h2>");
    for (i, r) in runs.iter().enumerate() {
        h.push_str(&tables::results(i, r));
    }
    let _ = writeln!(
        h,
        "<footer>MB/s = 10<sup>6</sup> bytes/s, MiB/s = 2<sup>20</sup> bytes/s; K = 10<sup>3</sup>, \
         M = 10<sup>6</sup>. Latency is from command sent to response received, by the load generator. \
         Host CPU is the whole initiator host's busy time over all its CPUs (IOMeter's definition); \
         the dashed line at 8 % is the initiator study's acceptable CPU. Click a run's key to hide it. \
         Written by ironlun {}.</footer><script>{CHART_SCRIPT}</script></body></html>",
        env!("CARGO_PKG_VERSION")
    );
    h
}

/// The page up to the summary: title, style, the runs' legend.
fn head(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(4).map(String::as_str).collect();
    let mut title = format!("ironlun report: {}", shown.join(" vs "));
    if names.len() > shown.len() {
        let _ = write!(title, " and {} more", names.len() - shown.len());
    }
    let mut h = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{PAGE_STYLE}{CHART_STYLE}</style></head><body><h1>{t}</h1><div class=\"legend-bar\">",
        t = esc(&title)
    );
    for (i, n) in names.iter().enumerate() {
        h.push_str(&header::swatch(i, n));
    }
    h.push_str("</div>");
    h
}

/// One workload: its specification, its charts, the runs side by side.
fn section(g: &Group<'_>, names: &[String]) -> String {
    let mut h = format!("<h2>{}</h2>", esc(g.name));
    if let Some((_, first)) = g.results.first() {
        let _ = write!(
            h,
            "<p class=\"spec\">{}{}</p>",
            esc(&header::spec(&first.workload)),
            if first.description.is_empty() {
                String::new()
            } else {
                format!(" — {}", esc(&first.description))
            }
        );
    }
    h.push_str("<div class=\"charts\">");
    h.push_str(&charts::exceedance(g, names));
    h.push_str(&charts::distribution(g, names));
    h.push_str(&charts::iops_over_time(g, names));
    h.push_str(&charts::latency_over_time(g, names));
    if let Some(z) = charts::zones(g, names) {
        h.push_str(&z);
    }
    h.push_str("</div>");
    if g.results.len() > 1 {
        h.push_str(&tables::comparison(g, names));
    }
    h
}

#[cfg(test)]
mod tests;
