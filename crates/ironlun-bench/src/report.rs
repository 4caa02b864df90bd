//! `ironlun report`: one self-contained HTML page from result files, with
//! SVG charts drawn by plotters: IOPS and MB/s bars with CPU % beside them
//! per workload (like the published figures), latency histograms and
//! per-second time series.

use std::fmt::Write as _;

use plotters::prelude::*;

use crate::result::{RunReport, WorkloadResult};

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

type Draw<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("chart: {e}")
}

/// Bars of one value per workload, with host CPU % as a second series.
fn bars(title: &str, unit: &str, rows: &[(&str, f64, Option<f64>)]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root: Draw =
            SVGBackend::with_string(&mut svg, (900, 60 + 34 * rows.len().max(1) as u32))
                .into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (left, right) = root.split_horizontally(640);
        let max = rows.iter().map(|r| r.1).fold(0.0f64, f64::max).max(1e-9) * 1.1;
        let n = rows.len().max(1);
        let mut c = ChartBuilder::on(&left)
            .caption(format!("{title} ({unit})"), ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(170)
            .build_cartesian_2d(0.0..max, (0..n).into_segmented())
            .map_err(err)?;
        let names: Vec<String> = rows.iter().map(|r| r.0.to_owned()).collect();
        c.configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .draw()
            .map_err(err)?;
        c.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let mut b = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (r.1, SegmentValue::Exact(i + 1)),
                ],
                BLUE.mix(0.6).filled(),
            );
            b.set_margin(4, 4, 0, 0);
            b
        }))
        .map_err(err)?;
        let mut cpu = ChartBuilder::on(&right)
            .caption("host CPU %", ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(10)
            .build_cartesian_2d(0.0..100.0, (0..n).into_segmented())
            .map_err(err)?;
        // (plotters loops forever on y_labels(0): ask for some, print none.)
        cpu.configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&|_| String::new())
            .draw()
            .map_err(err)?;
        cpu.draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
            r.2.map(|p| {
                let mut b = Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(i)),
                        (p.min(100.0), SegmentValue::Exact(i + 1)),
                    ],
                    RED.mix(0.5).filled(),
                );
                b.set_margin(4, 4, 0, 0);
                b
            })
        }))
        .map_err(err)?;
        // The "acceptable" CPU line of the initiator study (8 %).
        cpu.draw_series(std::iter::once(PathElement::new(
            vec![(8.0, SegmentValue::Exact(0)), (8.0, SegmentValue::Exact(n))],
            BLACK.stroke_width(1),
        )))
        .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn histogram(r: &WorkloadResult) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root: Draw = SVGBackend::with_string(&mut svg, (440, 260)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let pts: Vec<(f64, u64)> = r.histogram_us.iter().filter(|p| p.1 > 0).cloned().collect();
        let lo = pts.first().map_or(1.0, |p| p.0 / 1.5).max(0.5);
        let hi = pts.last().map_or(10.0, |p| p.0 * 1.5);
        let max = pts.iter().map(|p| p.1).max().unwrap_or(1) as f64 * 1.1;
        let mut c = ChartBuilder::on(&root)
            .caption(format!("{}: latency histogram", r.name), ("sans-serif", 14))
            .margin(6)
            .x_label_area_size(28)
            .y_label_area_size(50)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..max)
            .map_err(err)?;
        c.configure_mesh()
            .x_desc("µs")
            .y_desc("I/Os")
            .draw()
            .map_err(err)?;
        c.draw_series(pts.iter().map(|(up, n)| {
            let low = up / std::f64::consts::SQRT_2;
            Rectangle::new([(low, 0.0), (*up, *n as f64)], GREEN.mix(0.6).filled())
        }))
        .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn series(r: &WorkloadResult) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root: Draw = SVGBackend::with_string(&mut svg, (440, 260)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let n = r.series.len().max(1) as f64;
        let max = r
            .series
            .iter()
            .map(|s| s.iops)
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.1;
        let mut c = ChartBuilder::on(&root)
            .caption(format!("{}: IOPS per second", r.name), ("sans-serif", 14))
            .margin(6)
            .x_label_area_size(28)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..n, 0.0..max)
            .map_err(err)?;
        c.configure_mesh().x_desc("s").draw().map_err(err)?;
        c.draw_series(LineSeries::new(
            r.series.iter().map(|s| (f64::from(s.t) + 1.0, s.iops)),
            BLUE.stroke_width(2),
        ))
        .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn zones(r: &WorkloadResult) -> Result<Option<String>, String> {
    let Some(z) = &r.zones else { return Ok(None) };
    let mut svg = String::new();
    {
        let root: Draw = SVGBackend::with_string(&mut svg, (440, 260)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let max = z.iter().map(|z| z.mb_per_s).fold(0.0f64, f64::max).max(1.0) * 1.1;
        let mut c = ChartBuilder::on(&root)
            .caption(format!("{}: MB/s per zone", r.name), ("sans-serif", 14))
            .margin(6)
            .x_label_area_size(28)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..z.len().max(1) as f64, 0.0..max)
            .map_err(err)?;
        c.configure_mesh().x_desc("zone").draw().map_err(err)?;
        c.draw_series(LineSeries::new(
            z.iter().map(|z| (f64::from(z.zone) + 0.5, z.mb_per_s)),
            RED.stroke_width(2),
        ))
        .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(Some(svg))
}

/// The whole page.
pub fn html(reports: &[RunReport]) -> Result<String, String> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>ironlun report</title>\
         <style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         th:first-child,td:first-child{{text-align:left}}.charts svg{{margin:4px}}</style></head><body>\
         <h1>ironlun benchmark report</h1>"
    );
    for rep in reports {
        let _ = write!(
            h,
            "<h2>{} {} — {}</h2><p>Host: {} ({} CPUs, kernel {}). Target: {}.</p>",
            esc(&rep.tool),
            esc(&rep.version),
            esc(&rep.started),
            esc(&rep.host.cpu_model),
            rep.host.cpus,
            esc(&rep.host.kernel),
            esc(rep.target.as_deref().unwrap_or("-"))
        );
        let _ = write!(
            h,
            "<table><tr><th>workload</th><th>IOPS</th><th>read IOPS</th><th>write IOPS</th>\
             <th>MB/s (10<sup>6</sup>)</th><th>MiB/s (2<sup>20</sup>)</th><th>mean µs</th><th>p99 µs</th>\
             <th>p99.9 µs</th><th>max µs</th><th>initiator CPU %</th><th>target CPU %</th><th>errors</th></tr>"
        );
        let cell = |v: Option<f64>| v.map_or("-".to_owned(), |x| format!("{x:.1}"));
        for r in &rep.workloads {
            let _ = write!(
                h,
                "<tr><td title=\"{}\">{}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{:.1}</td><td>{:.1}</td>\
                 <td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&r.description),
                esc(&r.name),
                r.iops,
                r.read_iops,
                r.write_iops,
                r.mb_per_s,
                r.mib_per_s,
                r.latency_us.mean,
                r.latency_us.p99,
                r.latency_us.p999,
                r.latency_us.max,
                cell(r.cpu.initiator_pct),
                cell(r.cpu.target_pct),
                r.errors
            );
        }
        h.push_str("</table>");
        let iops: Vec<(&str, f64, Option<f64>)> = rep
            .workloads
            .iter()
            .map(|r| (r.name.as_str(), r.iops, r.cpu.initiator_pct))
            .collect();
        let mbs: Vec<(&str, f64, Option<f64>)> = rep
            .workloads
            .iter()
            .map(|r| (r.name.as_str(), r.mb_per_s, r.cpu.initiator_pct))
            .collect();
        h.push_str("<div class=\"charts\">");
        h.push_str(&bars("IOPS", "I/Os per second", &iops)?);
        h.push_str(&bars("Throughput", "MB/s, 10^6 bytes", &mbs)?);
        h.push_str("</div><div class=\"charts\">");
        for r in &rep.workloads {
            h.push_str(&histogram(r)?);
            h.push_str(&series(r)?);
            if let Some(z) = zones(r)? {
                h.push_str(&z);
            }
        }
        h.push_str("</div>");
    }
    h.push_str("</body></html>\n");
    Ok(h)
}
