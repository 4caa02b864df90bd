//! HTML for sweeps and reproductions: per table, a chart of measured
//! MB/s (solid) beside the model (dashed) across the row parameter, one
//! line per column, and the table with each cell's model error. The
//! charts are the bench report's (`ironlun_bench::report::svg`), with its
//! style and script, so every ironlun page reads and behaves alike.

use std::fmt::Write as _;

use ironlun_bench::report::axis::Axis;
use ironlun_bench::report::svg::{Line, Plot, Style};
use ironlun_bench::report::{esc, format, CHART_SCRIPT, CHART_STYLE};

use crate::sweep::{cell_key as key, first_seen, CellResult};

/// One titled table of a report.
pub struct Section<'a> {
    pub title: String,
    pub note: String,
    pub results: &'a [CellResult],
    pub rows: Vec<String>,
    pub cols: Vec<String>,
}

/// `key` (from [`key`]) as a reader names it: "rtt=20ms" when it is the
/// value of one parameter, as it is when it names several.
fn named(names: &[String], key: &str) -> String {
    match names {
        [one] => format!("{one}={key}"),
        _ => key.to_owned(),
    }
}

/// The section's chart: across the row parameter, per column, measured
/// MB/s as a solid line and the model as a dashed one in the same
/// colour, each point with its value as a tooltip.
fn chart(s: &Section<'_>) -> String {
    let xs = first_seen(s.results, &s.rows);
    let cols = first_seen(s.results, &s.cols);
    let names: Vec<String> = cols
        .iter()
        .map(|c| match named(&s.cols, c) {
            n if n.is_empty() => "measured".to_owned(),
            n => n,
        })
        .collect();
    let mut lines = Vec::new();
    for (run, col) in cols.iter().enumerate() {
        let name = names.get(run).map_or("", String::as_str);
        lines.extend(column(s, &xs, col, run, name));
    }
    let max = lines
        .iter()
        .flat_map(|l| &l.points)
        .fold(0.0f64, |m, p| m.max(p.1));
    Plot {
        kind: "sweep",
        title: format!("{} — MB/s", s.title),
        x: Axis::categories(&xs, &s.rows.join(",")),
        y: Axis::from_zero(max, format::count, "MB/s (10⁶ B/s)"),
        lines,
        rules: Vec::new(),
        runs: &names,
    }
    .svg()
}

/// Column `col`'s lines across the rows `xs`: measured (solid), and the
/// model (dashed) where the cells have one.
fn column(s: &Section<'_>, xs: &[String], col: &str, run: usize, name: &str) -> Vec<Line> {
    let mut measured = Line {
        run,
        ..Line::default()
    };
    let mut model = Line {
        run,
        style: Style::Dashed,
        ..Line::default()
    };
    for (x, row) in xs.iter().enumerate() {
        let Some(r) = s
            .results
            .iter()
            .find(|r| key(r, &s.rows) == *row && key(r, &s.cols) == col)
        else {
            continue;
        };
        let at = format!("{name}, {}", named(&s.rows, row));
        measured.points.push((x as f64, r.measured.mb_per_s));
        measured
            .tips
            .push(format!("{at}: {:.2} MB/s measured", r.measured.mb_per_s));
        if let Some(m) = &r.model {
            model.points.push((x as f64, m.mb_per_s));
            model
                .tips
                .push(format!("{at}: model {:.2} MB/s ({})", m.mb_per_s, m.bound));
        }
    }
    let mut out = vec![measured];
    if !model.points.is_empty() {
        out.push(model);
    }
    out
}

fn html_table(s: &Section<'_>) -> String {
    let xs = first_seen(s.results, &s.rows);
    let cols = first_seen(s.results, &s.cols);
    let mut t = String::from("<table><tr><th>");
    t.push_str(&esc(&s.rows.join(",")));
    t.push_str("</th>");
    for c in &cols {
        let _ = write!(t, "<th>{}</th>", esc(c));
    }
    t.push_str("</tr>");
    for x in &xs {
        let _ = write!(t, "<tr><th>{}</th>", esc(x));
        for c in &cols {
            let cell = s
                .results
                .iter()
                .find(|r| key(r, &s.rows) == *x && key(r, &s.cols) == *c);
            match cell {
                Some(r) => {
                    let m = r.model.as_ref().map_or(String::new(), |m| {
                        format!(
                            "<br><small>model {:.2} ({}; {:+.0} %)</small>",
                            m.mb_per_s,
                            m.bound,
                            r.model_error.unwrap_or(0.0) * 100.0
                        )
                    });
                    let off = r.model_error.is_some_and(|e| e.abs() > 0.25);
                    let _ = write!(
                        t,
                        "<td{}>{:.2}{m}</td>",
                        if off { " class=off" } else { "" },
                        r.measured.mb_per_s
                    );
                }
                None => t.push_str("<td>-</td>"),
            }
        }
        t.push_str("</tr>");
    }
    t.push_str("</table>");
    t
}

/// One self-contained page.
pub fn html(title: &str, intro: &str, sections: &[Section<'_>]) -> String {
    html_with(title, intro, "", sections)
}

/// One self-contained page with `lead`, already HTML, before the
/// sections.
pub fn html_with(title: &str, intro: &str, lead: &str, sections: &[Section<'_>]) -> String {
    let mut h = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>\
         body{{font-family:sans-serif;max-width:1000px;margin:auto}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}\
         td.off{{background:#fde0dc}}pre{{background:#f6f6f6;padding:8px}}{CHART_STYLE}</style></head><body>\
         <h1>{t}</h1><p>{i}</p>",
        t = esc(title),
        i = esc(intro)
    );
    h.push_str(lead);
    for s in sections {
        let _ = write!(h, "<h2>{}</h2>", esc(&s.title));
        if !s.note.is_empty() {
            let _ = write!(h, "<p>{}</p>", esc(&s.note));
        }
        if !s.results.is_empty() {
            let _ = write!(h, "<div class=\"charts\">{}</div>", chart(s));
            h.push_str(&html_table(s));
        }
    }
    let _ = write!(
        h,
        "<p><small>MB/s = 10^6 bytes/s. Solid lines: measured; dashed: model. Point at a point for its value; \
         click a key to hide its lines. Cells more than 25 % from the model are shaded.</small></p>\
         <script>{CHART_SCRIPT}</script></body></html>"
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::Cell;
    use crate::model::Prediction;
    use crate::runner::Measured;

    fn cell(window: &str, rtt: &str, mb: f64, model: Option<f64>) -> CellResult {
        CellResult {
            params: [("window", window), ("rtt", rtt)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            measured: Measured {
                mb_per_s: mb,
                ..Measured::default()
            },
            model: model.map(|m| Prediction {
                mb_per_s: m,
                bound: "link",
                round_trips: 1,
                cycle_ms: 1.0,
            }),
            model_error: model.map(|m| mb / m - 1.0),
            runs: 1,
            cell: Cell::default(),
        }
    }

    #[test]
    fn a_section_charts_each_column_measured_and_modelled_with_a_tip_per_point() {
        let results = [
            cell("64KiB", "0ms", 11.0, Some(12.0)),
            cell("64KiB", "10ms", 5.5, Some(6.0)),
            cell("64KiB", "20ms", 3.0, Some(3.1)),
            cell("1MiB", "0ms", 11.5, Some(12.0)),
            cell("1MiB", "10ms", 10.0, None),
            cell("1MiB", "20ms", 9.0, Some(12.0)),
        ];
        let page = html(
            "a sweep <1>",
            "intro",
            &[Section {
                title: "Table 1".into(),
                note: String::new(),
                results: &results,
                rows: vec!["rtt".into()],
                cols: vec!["window".into()],
            }],
        );
        assert_eq!(page.matches("data-chart=\"sweep\"").count(), 1);
        assert_eq!(page.matches("<path class=\"line\"").count(), 2);
        assert_eq!(page.matches("<path class=\"line model\"").count(), 2);
        assert_eq!(page.matches("<circle class=\"pt\"").count(), 6 + 5);
        for needle in [
            "Table 1 — MB/s",
            ">rtt</text>",
            ">MB/s (10⁶ B/s)</text>",
            ">10ms</text>",
            ">window=64KiB</text>",
            ">window=1MiB</text>",
            "<title>window=64KiB, rtt=10ms: 5.50 MB/s measured</title>",
            "<title>window=1MiB, rtt=20ms: model 12.00 MB/s (link)</title>",
            "a sweep &lt;1&gt;",
            CHART_STYLE,
            CHART_SCRIPT,
        ] {
            assert!(page.contains(needle), "{needle}");
        }
        // The 1MiB model line skips the row without a model.
        assert!(!page.contains("window=1MiB, rtt=10ms: model"));
        // Self-contained: the SVG namespace is the only address.
        assert_eq!(page.matches("http").count(), page.matches("xmlns=").count());
        assert!(!page.contains("src=") && !page.contains("href="));
    }

    #[test]
    fn a_section_without_results_has_no_chart() {
        let page = html(
            "t",
            "i",
            &[Section {
                title: "TCP baseline".into(),
                note: "n".into(),
                results: &[],
                rows: Vec::new(),
                cols: Vec::new(),
            }],
        );
        assert!(!page.contains("<svg"));
    }
}
