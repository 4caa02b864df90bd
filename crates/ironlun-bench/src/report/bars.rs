//! Horizontal bars of one figure per workload, one bar per run in the
//! run's colour, the value written at the end of each bar.

use std::fmt::Write as _;

use super::axis::Axis;
use super::format::esc;
use super::svg::{self, colour, Frame, WIDTH};

/// One bar chart.
pub struct Bars<'a> {
    pub kind: &'static str,
    pub title: String,
    /// The value axis's title (with its unit).
    pub unit: String,
    pub fmt: fn(f64) -> String,
    /// Workload names, one group of bars each.
    pub groups: Vec<String>,
    /// `values[group][run]`; `None` where a run has no such value.
    pub values: Vec<Vec<Option<f64>>>,
    pub runs: &'a [String],
    /// A reference line at a value, with its label.
    pub rule: Option<(f64, String)>,
    /// The axis's end when values cannot exceed it (100 %).
    pub limit: Option<f64>,
}

const BAR: f64 = 12.0;
const GAP: f64 = 2.0;
const GROUP_GAP: f64 = 10.0;

impl Bars<'_> {
    /// The value axis: from zero to the limit, or past the largest value
    /// (and the rule) with room for the longest bar's label.
    fn axis(&self) -> Axis {
        let max = self
            .values
            .iter()
            .flatten()
            .flatten()
            .copied()
            .chain(self.rule.as_ref().map(|r| r.0))
            .fold(0.0f64, f64::max);
        Axis::from_zero(self.limit.unwrap_or(max * 1.15), self.fmt, &self.unit)
    }

    pub fn svg(&self) -> String {
        let n = self.runs.len().max(1) as f64;
        let group_h = n * BAR + (n - 1.0) * GAP + GROUP_GAP;
        let x = self.axis();
        let f = Frame {
            left: 140.0,
            top: 30.0,
            width: WIDTH - 140.0 - 30.0,
            height: group_h * self.groups.len().max(1) as f64,
        };
        let used: Vec<usize> = (0..self.runs.len()).collect();
        let (legend, legend_h) = svg::legend(self.runs, &used, f.top + f.height + 44.0);
        let mut s = svg::open(self.kind, &self.title, f.top + f.height + 44.0 + legend_h);
        s.push_str(&svg::grid_x(&f, &x));
        svg::frame(&mut s, &f);
        for (g, name) in self.groups.iter().enumerate() {
            let top = f.top + GROUP_GAP / 2.0 + g as f64 * group_h;
            s.push_str(&self.group(&f, &x, g, name, top, group_h));
        }
        if let Some((v, label)) = &self.rule {
            let px = f.x(&x, *v);
            let _ = write!(
                s,
                "<line class=\"rule\" x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\"/>\
                 <text class=\"rule\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                f.top,
                f.top + f.height,
                px + 3.0,
                f.top + 10.0,
                esc(label)
            );
        }
        s.push_str(&legend);
        s.push_str("</svg>");
        s
    }

    /// Group `g` (a workload) from `top`: its name and a bar per run.
    fn group(&self, f: &Frame, x: &Axis, g: usize, name: &str, top: f64, group_h: f64) -> String {
        let shown: String = name.chars().take(20).collect();
        let mut s = format!(
            "<text class=\"group\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\"><title>{}</title>{}</text>",
            f.left - 6.0,
            top + (group_h - GROUP_GAP) / 2.0 + 4.0,
            esc(name),
            esc(&shown)
        );
        let row = self.values.get(g).map_or(&[][..], Vec::as_slice);
        for (run, v) in row.iter().enumerate() {
            if let Some(v) = v {
                s.push_str(&self.bar(f, x, top + run as f64 * (BAR + GAP), run, name, *v));
            }
        }
        s
    }

    fn bar(&self, f: &Frame, x: &Axis, top: f64, run: usize, group: &str, v: f64) -> String {
        let end = f.x(x, v);
        let name = self.runs.get(run).map_or("?", String::as_str);
        let label = (self.fmt)(v);
        // A label that would leave the frame goes inside the bar's end.
        let inside = end + 6.5 * label.chars().count() as f64 > f.left + f.width;
        let (tx, anchor, class) = if inside {
            (end - 3.0, "end", "value inside")
        } else {
            (end + 3.0, "start", "value")
        };
        format!(
            "<g class=\"run\" data-run=\"{run}\"><rect class=\"bar\" data-run=\"{run}\" x=\"{:.1}\" y=\"{top:.1}\" \
             width=\"{:.1}\" height=\"{BAR}\" fill=\"{}\"><title>{}: {}: {}</title></rect>\
             <text class=\"{class}\" x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text></g>",
            f.left,
            (end - f.left).max(0.5),
            colour(run),
            esc(name),
            esc(group),
            esc(&label),
            top + BAR - 2.0,
            esc(&label)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::format;

    #[test]
    fn one_bar_per_run_and_value_with_its_label() {
        let runs = vec!["a".to_owned(), "b".to_owned()];
        let svg = Bars {
            kind: "iops",
            title: "IOPS".into(),
            unit: "I/Os per second".into(),
            fmt: format::count,
            groups: vec!["w1".into(), "w2".into()],
            values: vec![vec![Some(120_000.0), Some(60_000.0)], vec![None, Some(5.0)]],
            runs: &runs,
            rule: Some((8.0, "8 %".into())),
            limit: None,
        }
        .svg();
        assert_eq!(svg.matches("class=\"bar\"").count(), 3);
        assert!(svg.contains(">120K</text>") && svg.contains(">60K</text>"));
        // The longest bar's label fits in the frame: the axis runs on.
        assert!(!svg.contains("value inside"));
        assert!(svg.contains("class=\"rule\""));
        assert!(svg.contains(&format!("fill=\"{}\"", svg::PALETTE[1])));
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;
    use crate::report::format;

    #[test]
    fn a_limited_axis_ends_at_its_limit_and_labels_go_inside() {
        let runs = vec!["a".to_owned()];
        let svg = Bars {
            kind: "cpu",
            title: "CPU".into(),
            unit: "%".into(),
            fmt: format::count,
            groups: vec!["w".into()],
            values: vec![vec![Some(98.0)]],
            runs: &runs,
            rule: None,
            limit: Some(100.0),
        }
        .svg();
        assert!(
            svg.contains(">100</text>") && !svg.contains(">120</text>"),
            "{svg}"
        );
        assert!(svg.contains("class=\"value inside\""), "{svg}");
    }
}
