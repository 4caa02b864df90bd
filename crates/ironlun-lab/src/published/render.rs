//! The comparison as people read it: the side-by-side text table with
//! its share line, and the HTML section (a log-log scatter of measured
//! against published per unit, with the ±25 % band, then the table). The
//! scatters are drawn by the bench report's chart engine.

use std::fmt::Write as _;

use ironlun_bench::report::axis::Axis;
use ironlun_bench::report::esc;
use ironlun_bench::report::format;
use ironlun_bench::report::svg::{Line, Plot, Rule, Style};

use super::compare::{conditions_of, Compared, Comparison, Status, TOLERANCE};
use crate::testbed::Fit;

/// A number in a few significant digits.
fn num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(0.0) => "0".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.3}"),
    }
}

fn flag(c: &Compared) -> &'static str {
    match (c.status, c.within_25pct) {
        (_, Some(true)) => "ok",
        (_, Some(false)) => "OFF",
        (Status::NotMeasured, _) => "not measured",
        (Status::NotPublished, _) => "not published",
        (Status::Compared, None) => "no ratio",
    }
}

/// The share line: "61 of 112 compared cells within ±25 % (54 %)".
pub fn share_line(c: &Comparison) -> String {
    let share = c
        .share_within_25pct
        .map_or("no cell compared".to_owned(), |s| {
            format!("{:.0} %", s * 100.0)
        });
    format!(
        "{} of {} compared cells within ±{:.0} % of the published value ({share}); {} published cells, {} not measured; {} measured rows the study did not publish",
        c.within,
        c.compared,
        TOLERANCE * 100.0,
        c.published_cells,
        c.not_measured,
        c.not_published
    )
}

/// The side-by-side table.
pub fn text(c: &Comparison) -> String {
    let mut s = format!(
        "\nPublished | measured | model | ratio — {}\nunits: {}\n",
        c.source, c.convention
    );
    for si in &c.stand_ins {
        let _ = writeln!(
            s,
            "stand-in: measured {}={} beside published {}={} ({})",
            si.key, si.measured, si.key, si.published, si.why
        );
    }
    let _ = writeln!(
        s,
        "{:<16} {:<6} {:>10} {:>10} {:>10} {:>6} {:<13} {:>10} {:>6} {:<5} conditions | where",
        "metric",
        "unit",
        "published",
        "measured",
        "model",
        "ratio",
        "±25 %",
        "profile",
        "ratio",
        "fit"
    );
    for cell in &c.cells {
        let _ = writeln!(
            s,
            "{:<16} {:<6} {:>10} {:>10} {:>10} {:>6} {:<13} {:>10} {:>6} {:<5} {} | {}",
            cell.metric,
            cell.unit,
            num(cell.published),
            num(cell.measured),
            num(cell.model),
            cell.ratio.map_or("-".into(), |r| format!("{r:.2}")),
            flag(cell),
            num(cell.profile),
            cell.profile_ratio.map_or("-".into(), |r| format!("{r:.2}")),
            fit_set(cell),
            conditions_of(cell),
            cell.at
        );
    }
    for (why, n) in not_measured_by_reason(c) {
        let _ = writeln!(s, "not measured, {n} cells: {why}");
    }
    let _ = writeln!(s, "{}", share_line(c));
    if let Some(f) = &c.fit {
        s.push_str(&fit_text(f));
    }
    s
}

/// A cell's side of the fit: "train" (the profile was fitted on it),
/// "held" (held out), "-" (no profile value or not published).
fn fit_set(c: &Compared) -> &'static str {
    match (c.published.is_some() && c.profile.is_some(), c.training) {
        (false, _) => "-",
        (true, true) => "train",
        (true, false) => "held",
    }
}

/// A parameter's value in a few significant digits with its unit.
fn param_value(p: &crate::testbed::Parameter) -> String {
    format!("{} {}", num(Some(p.value)), p.unit)
}

/// The fitted profile in one line, for the head of a report: each
/// parameter with its unit, and the agreement in and out of sample.
pub fn fit_line(f: &Fit) -> String {
    let params: Vec<String> = f
        .list
        .iter()
        .map(|p| {
            format!(
                "{} {}{}",
                p.name,
                param_value(p),
                if p.fitted { "*" } else { "" }
            )
        })
        .collect();
    format!(
        "fitted testbed profile (* fitted): {}; in-sample {}, out-of-sample {}\n",
        params.join(", "),
        f.in_sample.text(),
        f.out_of_sample.text()
    )
}

/// The fitted profile: its parameters with units, the training rule,
/// and the agreement in-sample and out-of-sample.
pub fn fit_text(f: &Fit) -> String {
    let mut s = String::from("\nFitted testbed profile (parameters with units; * fitted on the training cells, the rest declared by the study or fixed)\n");
    for p in &f.list {
        let _ = writeln!(
            s,
            "  {}{:<24} {:>14}  {}",
            if p.fitted { "*" } else { " " },
            p.name,
            param_value(p),
            p.what
        );
    }
    let _ = writeln!(
        s,
        "training cells ({}): {}",
        f.training_cells,
        f.training_rule.join(" | ")
    );
    let _ = writeln!(s, "why: {}", f.why);
    let _ = writeln!(s, "{}", f.basis);
    let _ = writeln!(
        s,
        "profile in-sample (training cells): {}",
        f.in_sample.text()
    );
    let _ = writeln!(
        s,
        "profile out-of-sample (held-out cells): {}",
        f.out_of_sample.text()
    );
    let _ = writeln!(s, "profile, all modelled cells: {}", f.all.text());
    let _ = writeln!(
        s,
        "measured, training cells: {}; measured, held-out cells: {}",
        f.measured_in_sample.text(),
        f.measured_out_of_sample.text()
    );
    let _ = writeln!(s, "measured rows: {}", f.imposed);
    for n in &f.not_modelled {
        let _ = writeln!(s, "no profile value, {} cells: {}", n.cells, n.reason);
    }
    s
}

/// The fitted profile as HTML: the parameter table and the agreement.
fn fit_html(f: &Fit) -> String {
    let mut h = String::from(
        "<h2>Fitted testbed profile</h2><table><tr><th>parameter</th><th>value</th><th>unit</th><th>fitted</th><th>what</th></tr>",
    );
    for p in &f.list {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(p.name),
            num(Some(p.value)),
            esc(p.unit),
            if p.fitted { "fitted" } else { "declared" },
            esc(p.what)
        );
    }
    let _ = write!(
        h,
        "</table><p>Training cells ({}): {}. {}</p><p>{}</p><p><b>Profile in-sample (training cells): {}. Out-of-sample (held-out cells): {}.</b> All modelled cells: {}.</p><p>Measured, training cells: {}; held-out cells: {}. Measured rows: {}</p>",
        f.training_cells,
        esc(&f.training_rule.join(" | ")),
        esc(&f.why),
        esc(f.basis),
        f.in_sample.text(),
        f.out_of_sample.text(),
        f.all.text(),
        f.measured_in_sample.text(),
        f.measured_out_of_sample.text(),
        esc(f.imposed)
    );
    for n in &f.not_modelled {
        let _ = write!(
            h,
            "<p>No profile value, {} cells: {}</p>",
            n.cells,
            esc(&n.reason)
        );
    }
    h
}

/// The not-measured cells grouped by what their nearest measured row
/// differs in (condition names only, values dropped), most first.
pub fn not_measured_by_reason(c: &Comparison) -> Vec<(String, usize)> {
    let mut groups: Vec<(String, usize)> = Vec::new();
    for cell in c.cells.iter().filter(|x| x.status == Status::NotMeasured) {
        let reason = cell.note.split("; ").next().unwrap_or_default();
        let why = without_parentheses(reason.trim_start_matches("not measured: "));
        match groups.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => groups.push((why, 1)),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.1));
    groups
}

/// `s` with every parenthesised part (and the space before it) removed.
fn without_parentheses(s: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for ch in s.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(ch),
            _ => {}
        }
    }
    out.replace(" ,", ",").trim_end().to_owned()
}

/// The scatter's two runs, by [`run_of`].
const SCATTER_RUNS: [&str; 2] = ["within ±25 %", "outside ±25 %"];

/// A compared cell's run in the scatter: 0 within the tolerance, 1
/// outside.
fn run_of(within: bool) -> usize {
    usize::from(!within)
}

/// One log-log scatter of measured against published for the cells in
/// `unit`, a point per cell with its values as a tooltip, coloured by
/// whether it is within ±25 %, over the y = x line and the ±25 % band.
/// Empty when no cell has two positive values (a log scale has no room
/// for zero).
fn scatter(unit: &str, cells: &[&Compared]) -> String {
    let mut lines: Vec<Line> = (0..SCATTER_RUNS.len())
        .map(|run| Line {
            run,
            style: Style::Points,
            ..Line::default()
        })
        .collect();
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for c in cells {
        let (Some(p), Some(m), Some(w)) = (c.published, c.measured, c.within_25pct) else {
            continue;
        };
        if p <= 0.0 || m <= 0.0 {
            continue;
        }
        (lo, hi) = (lo.min(p).min(m), hi.max(p).max(m));
        if let Some(l) = lines.get_mut(run_of(w)) {
            l.points.push((p, m));
            l.tips.push(tip(c, unit));
        }
    }
    lines.retain(|l| !l.points.is_empty());
    if lines.is_empty() {
        return String::new();
    }
    let (lo, hi) = (lo / 1.2, hi * 1.2);
    let axis = |t: &str| Axis::log(lo, hi, 10, format::count, &format!("{t} ({unit})"));
    let (x, y) = (axis("published"), axis("measured"));
    let runs: Vec<String> = SCATTER_RUNS.iter().map(|r| (*r).to_owned()).collect();
    Plot {
        kind: "published",
        title: format!("measured against published, {unit}"),
        rules: band(x.lo, x.hi),
        x,
        y,
        lines,
        runs: &runs,
    }
    .svg()
}

/// A cell's tooltip: what it is, where the study has it, both values and
/// their ratio.
fn tip(c: &Compared, unit: &str) -> String {
    format!(
        "{} ({}), {}: published {} {unit}, measured {} {unit}, ratio {}",
        c.metric,
        conditions_of(c),
        c.at,
        num(c.published),
        num(c.measured),
        c.ratio.map_or("-".into(), |r| format!("{r:.2}"))
    )
}

/// The y = x line (solid) and the ±25 % band's edges (dashed) across
/// `lo..hi` (the plot clips them to its frame).
fn band(lo: f64, hi: f64) -> Vec<Rule> {
    let pct = TOLERANCE * 100.0;
    [
        (1.0, "measured = published".to_owned(), false),
        (
            1.0 - TOLERANCE,
            format!("measured = published − {pct:.0} %"),
            true,
        ),
        (
            1.0 + TOLERANCE,
            format!("measured = published + {pct:.0} %"),
            true,
        ),
    ]
    .into_iter()
    .map(|(k, label, dashed)| Rule {
        from: (lo, lo * k),
        to: (hi, hi * k),
        label,
        dashed,
    })
    .collect()
}

/// The HTML section: the share, a scatter per unit, the table.
pub fn html(c: &Comparison) -> String {
    let mut h = format!(
        "<h2>Published | measured | model | ratio</h2><p>{}</p><p>{}</p><p><b>{}</b></p>",
        esc(&c.source),
        esc(&c.convention),
        esc(&share_line(c))
    );
    for si in &c.stand_ins {
        let _ = write!(
            h,
            "<p>Stand-in: measured {}={} beside published {}={}: {}</p>",
            esc(&si.key),
            esc(&si.measured),
            esc(&si.key),
            esc(&si.published),
            esc(&si.why)
        );
    }
    let mut units: Vec<&str> = c.cells.iter().map(|x| x.unit).collect();
    units.dedup();
    units.sort_unstable();
    units.dedup();
    h.push_str("<div class=\"charts\">");
    for u in units {
        let cells: Vec<&Compared> = c
            .cells
            .iter()
            .filter(|x| x.unit == u && x.within_25pct.is_some())
            .collect();
        if !cells.is_empty() {
            h.push_str(&scatter(u, &cells));
        }
    }
    h.push_str(
        "</div><p><small>Solid line: measured = published; dashed: ±25 %. The key names the points within and outside ±25 %; \
         point at a point for its cell.</small></p>\
         <table><tr><th>metric</th><th>unit</th><th>published</th><th>measured</th><th>model</th><th>ratio</th><th>±25 %</th><th>profile</th><th>profile ratio</th><th>fit</th><th>conditions</th><th>where</th><th>note</th></tr>",
    );
    for cell in &c.cells {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td><td{}>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(cell.metric),
            esc(cell.unit),
            num(cell.published),
            num(cell.measured),
            num(cell.model),
            cell.ratio.map_or("-".into(), |r| format!("{r:.2}")),
            if cell.within_25pct == Some(false) { " class=off" } else { "" },
            flag(cell),
            num(cell.profile),
            if cell.profile_within_25pct == Some(false) { " class=off" } else { "" },
            cell.profile_ratio.map_or("-".into(), |r| format!("{r:.2}")),
            fit_set(cell),
            esc(&conditions_of(cell)),
            esc(&cell.at),
            esc(&cell.note)
        );
    }
    h.push_str("</table>");
    if let Some(f) = &c.fit {
        h.push_str(&fit_html(f));
    }
    h
}
