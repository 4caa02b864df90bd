//! HTML for sweeps and reproductions: per table, a chart of measured
//! MB/s (solid) beside the model (dashed) across the row parameter, one
//! line per column, and the table with each cell's model error.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use plotters::prelude::*;

use ironlun_bench::report::esc;

use crate::sweep::{cell_key as key, first_seen, CellResult};

/// One titled table of a report.
pub struct Section<'a> {
    pub title: String,
    pub note: String,
    pub results: &'a [CellResult],
    pub rows: Vec<String>,
    pub cols: Vec<String>,
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("chart: {e}")
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn chart(s: &Section<'_>) -> Result<String, String> {
    let xs = first_seen(s.results, &s.rows);
    let series = first_seen(s.results, &s.cols);
    let mut points: BTreeMap<(usize, usize), (f64, Option<f64>)> = BTreeMap::new();
    let mut max: f64 = 0.0;
    for r in s.results {
        let (Some(x), Some(c)) = (
            xs.iter().position(|k| *k == key(r, &s.rows)),
            series.iter().position(|k| *k == key(r, &s.cols)),
        ) else {
            continue;
        };
        let m = r.model.as_ref().map(|m| m.mb_per_s);
        max = max.max(r.measured.mb_per_s).max(m.unwrap_or(0.0));
        points.insert((c, x), (r.measured.mb_per_s, m));
    }
    let max = (max * 1.1).max(1e-3);
    let n = xs.len().max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut c = ChartBuilder::on(&root)
            .caption(format!("{} — MB/s", s.title), ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .right_y_label_area_size(10)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0..max)
            .map_err(err)?;
        let labels = xs.clone();
        c.configure_mesh()
            .x_labels(n)
            .x_label_formatter(&|v| {
                let i = v.round();
                if (v - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc(s.rows.join(","))
            .y_desc("MB/s (10^6 B/s)")
            .draw()
            .map_err(err)?;
        for (ci, name) in series.iter().enumerate() {
            let color = PALETTE.get(ci % PALETTE.len()).copied().unwrap_or(BLACK);
            let measured: Vec<(f64, f64)> = (0..n)
                .filter_map(|x| points.get(&(ci, x)).map(|p| (x as f64, p.0)))
                .collect();
            let model: Vec<(f64, f64)> = (0..n)
                .filter_map(|x| {
                    points
                        .get(&(ci, x))
                        .and_then(|p| p.1.map(|m| (x as f64, m)))
                })
                .collect();
            c.draw_series(LineSeries::new(measured.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            c.draw_series(
                measured
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
            )
            .map_err(err)?;
            if !model.is_empty() {
                c.draw_series(DashedLineSeries::new(model, 6, 4, color.stroke_width(1)))
                    .map_err(err)?;
            }
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
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
pub fn html(title: &str, intro: &str, sections: &[Section<'_>]) -> Result<String, String> {
    html_with(title, intro, "", sections)
}

/// One self-contained page with `lead`, already HTML, before the
/// sections.
pub fn html_with(
    title: &str,
    intro: &str,
    lead: &str,
    sections: &[Section<'_>],
) -> Result<String, String> {
    let mut h = format!(
        "<!doctype html><html><head><meta charset=utf-8><title>{t}</title><style>\
         body{{font-family:sans-serif;max-width:1000px;margin:auto}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}\
         td.off{{background:#fde0dc}}pre{{background:#f6f6f6;padding:8px}}</style></head><body>\
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
            h.push_str(&chart(s)?);
            h.push_str(&html_table(s));
        }
    }
    h.push_str("<p><small>MB/s = 10^6 bytes/s. Solid lines: measured; dashed: model. Cells more than 25 % from the model are shaded.</small></p></body></html>");
    Ok(h)
}
