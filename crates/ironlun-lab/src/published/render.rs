//! The comparison as people read it: the side-by-side text table with
//! its share line, and the HTML section (a log-log scatter of measured
//! against published per unit, with the ±25 % band, then the table).

use std::fmt::Write as _;

use plotters::prelude::*;

use ironlun_bench::report::esc;

use super::compare::{conditions_of, Compared, Comparison, Status, TOLERANCE};

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
        "{:<16} {:<6} {:>10} {:>10} {:>10} {:>6} {:<13} conditions | where",
        "metric", "unit", "published", "measured", "model", "ratio", "±25 %"
    );
    for cell in &c.cells {
        let _ = writeln!(
            s,
            "{:<16} {:<6} {:>10} {:>10} {:>10} {:>6} {:<13} {} | {}",
            cell.metric,
            cell.unit,
            num(cell.published),
            num(cell.measured),
            num(cell.model),
            cell.ratio.map_or("-".into(), |r| format!("{r:.2}")),
            flag(cell),
            conditions_of(cell),
            cell.at
        );
    }
    for (why, n) in not_measured_by_reason(c) {
        let _ = writeln!(s, "not measured, {n} cells: {why}");
    }
    let _ = writeln!(s, "{}", share_line(c));
    s
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

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("chart: {e}")
}

/// One log-log scatter of measured against published for the cells in
/// `unit`, with the y = x line and the ±25 % band.
fn scatter(unit: &str, cells: &[&Compared]) -> Result<String, String> {
    let pts: Vec<(f64, f64, bool)> = cells
        .iter()
        .filter_map(|c| match (c.published, c.measured, c.within_25pct) {
            (Some(p), Some(m), Some(w)) if p > 0.0 && m > 0.0 => Some((p, m, w)),
            _ => None,
        })
        .collect();
    if pts.is_empty() {
        // A log scale has no room for zero or negative values.
        return Ok(String::new());
    }
    let lo = pts
        .iter()
        .map(|p| p.0.min(p.1))
        .fold(f64::INFINITY, f64::min)
        / 1.5;
    let hi = pts.iter().map(|p| p.0.max(p.1)).fold(0.0, f64::max) * 1.5;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (560, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut ch = ChartBuilder::on(&root)
            .caption(
                format!("measured against published, {unit}"),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
            .map_err(err)?;
        ch.configure_mesh()
            .x_desc(format!("published ({unit})"))
            .y_desc(format!("measured ({unit})"))
            .draw()
            .map_err(err)?;
        let band = RGBColor(200, 200, 200);
        for k in [1.0 - TOLERANCE, 1.0 + TOLERANCE] {
            ch.draw_series(DashedLineSeries::new(
                [(lo, lo * k), (hi, hi * k)],
                5,
                4,
                band.stroke_width(1),
            ))
            .map_err(err)?;
        }
        ch.draw_series(LineSeries::new([(lo, lo), (hi, hi)], BLACK.stroke_width(1)))
            .map_err(err)?;
        let ok = RGBColor(44, 160, 44);
        let off = RGBColor(214, 39, 40);
        ch.draw_series(
            pts.iter().map(|&(p, m, w)| {
                Circle::new((p, m), 3, if w { ok.filled() } else { off.filled() })
            }),
        )
        .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The HTML section: the share, a scatter per unit, the table.
pub fn html(c: &Comparison) -> Result<String, String> {
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
    for u in units {
        let cells: Vec<&Compared> = c
            .cells
            .iter()
            .filter(|x| x.unit == u && x.within_25pct.is_some())
            .collect();
        if !cells.is_empty() {
            h.push_str(&scatter(u, &cells)?);
        }
    }
    h.push_str(
        "<p><small>Solid line: measured = published; dashed: ±25 %. Green: within, red: outside.</small></p>\
         <table><tr><th>metric</th><th>unit</th><th>published</th><th>measured</th><th>model</th><th>ratio</th><th>±25 %</th><th>conditions</th><th>where</th><th>note</th></tr>",
    );
    for cell in &c.cells {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(cell.metric),
            esc(cell.unit),
            num(cell.published),
            num(cell.measured),
            num(cell.model),
            cell.ratio.map_or("-".into(), |r| format!("{r:.2}")),
            if cell.within_25pct == Some(false) { " class=off" } else { "" },
            flag(cell),
            esc(&conditions_of(cell)),
            esc(&cell.at),
            esc(&cell.note)
        );
    }
    h.push_str("</table>");
    Ok(h)
}
