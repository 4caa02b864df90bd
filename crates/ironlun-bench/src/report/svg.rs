//! Line plots as inline SVG: a frame with grid lines and labelled ticks
//! from two [`Axis`]es, one path per run in the run's colour (solid,
//! dashed, or points alone for a scatter), a point with a tooltip
//! (`<title>`) per value, reference lines ([`Rule`]), and a legend naming
//! the runs. Every chart of every ironlun report is drawn here or in
//! `bars`.

use std::fmt::Write as _;

use super::axis::Axis;
use super::format::esc;
pub use super::rules::Rule;

/// Run colours (Tableau 10): distinct on white and for most colour
/// vision; runs past ten repeat them dashed.
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f",
    "#ff9da7", "#bab0ac",
];

/// The colour of run `run`.
pub fn colour(run: usize) -> &'static str {
    PALETTE.get(run % PALETTE.len()).copied().unwrap_or("#000")
}

/// The dash pattern of run `run` (none for the first ten).
pub fn dash(run: usize) -> &'static str {
    match run / PALETTE.len() {
        0 => "",
        1 => " stroke-dasharray=\"6 3\"",
        _ => " stroke-dasharray=\"2 2\"",
    }
}

/// The drawing width of every chart, in CSS pixels.
pub const WIDTH: f64 = 480.0;

/// Lines with more points than this draw no markers (they still have
/// tooltips).
const MARKERS_UP_TO: usize = 60;

/// The rectangle the data is drawn in.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
}

impl Frame {
    /// The pixel of `v` on `axis` across (x) or up (y) the frame, kept
    /// inside the frame.
    pub fn x(&self, axis: &Axis, v: f64) -> f64 {
        self.left + axis.fraction(v).clamp(0.0, 1.0) * self.width
    }

    pub fn y(&self, axis: &Axis, v: f64) -> f64 {
        self.top + (1.0 - axis.fraction(v).clamp(0.0, 1.0)) * self.height
    }

    /// The pixel at fractions `(fx, fy)` across and up the frame.
    pub fn at(&self, (fx, fy): (f64, f64)) -> (f64, f64) {
        (
            self.left + fx * self.width,
            self.top + (1.0 - fy) * self.height,
        )
    }

    fn bottom(&self) -> f64 {
        self.top + self.height
    }

    fn right(&self) -> f64 {
        self.left + self.width
    }
}

/// How a [`Line`] is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// A solid path through filled points.
    #[default]
    Solid,
    /// A dashed path through hollow points: a model or an estimate beside
    /// the solid measured line of the same run.
    Dashed,
    /// Filled points without a path: a scatter.
    Points,
}

/// One run's values in a plot, with one tooltip per point.
#[derive(Clone, Debug, Default)]
pub struct Line {
    pub run: usize,
    pub points: Vec<(f64, f64)>,
    pub tips: Vec<String>,
    pub style: Style,
}

/// A line plot of some runs.
pub struct Plot<'a> {
    /// What it shows, for the page's script and tests (`data-chart`).
    pub kind: &'static str,
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub lines: Vec<Line>,
    /// Reference lines, drawn under the runs.
    pub rules: Vec<Rule>,
    /// Every run's name, by run index.
    pub runs: &'a [String],
}

impl Plot<'_> {
    /// The SVG element.
    pub fn svg(&self) -> String {
        let f = Frame {
            left: 72.0,
            top: 30.0,
            width: WIDTH - 72.0 - 30.0,
            height: 210.0,
        };
        let used: Vec<usize> = self.lines.iter().map(|l| l.run).collect();
        let (legend, legend_h) = legend(self.runs, &used, f.bottom() + 44.0);
        let height = f.bottom() + 44.0 + legend_h;
        let mut s = open(self.kind, &self.title, height);
        s.push_str(&grid_x(&f, &self.x));
        s.push_str(&grid_y(&f, &self.y));
        frame(&mut s, &f);
        for r in &self.rules {
            s.push_str(&r.svg(&f, &self.x, &self.y));
        }
        let mut points = 0;
        for l in &self.lines {
            points += l.points.len();
            s.push_str(&path(&f, &self.x, &self.y, l));
        }
        if points == 0 {
            let _ = write!(
                s,
                "<text class=\"empty\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">no data</text>",
                f.left + f.width / 2.0,
                f.top + f.height / 2.0
            );
        }
        s.push_str(&legend);
        s.push_str("</svg>");
        s
    }
}

/// Title characters that fit across a chart (13 px bold, about 8 px a
/// character).
const TITLE_CHARS: usize = 56;

/// The opening tag and the title of a chart `height` pixels tall. A
/// title too long for the chart is cut short (at a word) with "…"; the
/// whole of it is the chart's label and the shown title's tooltip.
pub fn open(kind: &str, title: &str, height: f64) -> String {
    let shown = if title.chars().count() > TITLE_CHARS {
        let cut: String = title.chars().take(TITLE_CHARS.saturating_sub(1)).collect();
        // At the last word's start, unless that leaves too little.
        let cut = match cut.rfind(' ') {
            Some(at) if at > TITLE_CHARS / 2 => cut.get(..at).unwrap_or(&cut),
            _ => &cut,
        };
        format!("<title>{}</title>{}…", esc(title), esc(cut.trim_end()))
    } else {
        esc(title)
    };
    format!(
        "<svg class=\"chart\" data-chart=\"{kind}\" xmlns=\"http://www.w3.org/2000/svg\" \
         viewBox=\"0 0 {WIDTH} {height:.0}\" width=\"{WIDTH}\" height=\"{height:.0}\" role=\"img\" \
         aria-label=\"{}\"><text class=\"title\" x=\"{:.1}\" y=\"18\" text-anchor=\"middle\">{shown}</text>",
        esc(title),
        WIDTH / 2.0,
    )
}

/// The frame's border.
pub fn frame(s: &mut String, f: &Frame) {
    let _ = write!(
        s,
        "<rect class=\"frame\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"/>",
        f.left, f.top, f.width, f.height
    );
}

/// Vertical grid lines at the x axis's ticks, their labels below the
/// frame and the axis title under them.
pub fn grid_x(f: &Frame, x: &Axis) -> String {
    let mut s = String::from("<g class=\"axis x\">");
    for t in &x.ticks {
        let px = f.x(x, t.value);
        let class = if t.label.is_some() {
            "grid"
        } else {
            "grid minor"
        };
        let _ = write!(
            s,
            "<line class=\"{class}\" x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\"/>",
            f.top,
            f.bottom()
        );
        if let Some(l) = &t.label {
            let _ = write!(
                s,
                "<text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                f.bottom() + 15.0,
                esc(l)
            );
        }
    }
    let _ = write!(
        s,
        "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text></g>",
        f.left + f.width / 2.0,
        f.bottom() + 32.0,
        esc(&x.title)
    );
    s
}

/// Horizontal grid lines at the y axis's ticks, their labels left of the
/// frame and the axis title turned along it.
fn grid_y(f: &Frame, y: &Axis) -> String {
    let mut s = String::from("<g class=\"axis y\">");
    for t in &y.ticks {
        let py = f.y(y, t.value);
        let class = if t.label.is_some() {
            "grid"
        } else {
            "grid minor"
        };
        let _ = write!(
            s,
            "<line class=\"{class}\" x1=\"{:.1}\" y1=\"{py:.1}\" x2=\"{:.1}\" y2=\"{py:.1}\"/>",
            f.left,
            f.right()
        );
        if let Some(l) = &t.label {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                f.left - 5.0,
                py + 4.0,
                esc(l)
            );
        }
    }
    let (cx, cy) = (14.0, f.top + f.height / 2.0);
    let _ = write!(
        s,
        "<text class=\"label\" x=\"{cx}\" y=\"{cy:.1}\" text-anchor=\"middle\" \
         transform=\"rotate(-90 {cx} {cy:.1})\">{}</text></g>",
        esc(&y.title)
    );
    s
}

/// One run's path (none for [`Style::Points`]), and its points with
/// tooltips.
fn path(f: &Frame, x: &Axis, y: &Axis, l: &Line) -> String {
    let c = colour(l.run);
    let mut d = String::new();
    let mut dots = String::new();
    let (r, marker) = marker(l, c);
    for (i, &(vx, vy)) in l.points.iter().enumerate() {
        let (px, py) = (f.x(x, vx), f.y(y, vy));
        let _ = write!(d, "{}{px:.1} {py:.1}", if i == 0 { "M" } else { " L" });
        let tip = l.tips.get(i).map_or(String::new(), |t| esc(t));
        let _ = write!(
            dots,
            "<circle class=\"pt\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"{r}\"{marker}><title>{tip}</title></circle>"
        );
    }
    let (line, dash) = match l.style {
        Style::Points => return format!("<g class=\"run\" data-run=\"{}\">{dots}</g>", l.run),
        Style::Dashed => ("line model", " stroke-dasharray=\"6 4\""),
        Style::Solid => ("line", dash(l.run)),
    };
    format!(
        "<g class=\"run\" data-run=\"{}\"><path class=\"{line}\" data-run=\"{}\" d=\"{d}\" \
         stroke=\"{c}\"{dash}/>{dots}</g>",
        l.run, l.run,
    )
}

/// The radius and paint of a line's points in colour `c`: hollow on a
/// dashed line, unpainted (a tooltip only) where a solid path has too
/// many to mark.
fn marker(l: &Line, c: &str) -> (f64, String) {
    match l.style {
        Style::Points => (3.5, format!(" fill=\"{c}\"")),
        Style::Dashed => (2.5, format!(" fill=\"#fff\" stroke=\"{c}\"")),
        Style::Solid if l.points.len() <= MARKERS_UP_TO => (2.5, format!(" fill=\"{c}\"")),
        Style::Solid => (1.5, format!(" fill=\"{c}\" fill-opacity=\"0\"")),
    }
}

/// The legend for runs `used` (indexes into `runs`), flowing in rows from
/// `top`; returns the SVG and its height.
pub fn legend(runs: &[String], used: &[usize], top: f64) -> (String, f64) {
    let mut seen: Vec<usize> = used.to_vec();
    seen.sort_unstable();
    seen.dedup();
    let mut s = String::from("<g class=\"legend\">");
    let (mut x, mut y) = (12.0, top);
    let mut rows = if seen.is_empty() { 0.0 } else { 1.0 };
    for run in seen {
        let name = runs.get(run).map_or("?", String::as_str);
        let shown: String = name.chars().take(40).collect();
        let w = 26.0 + 6.6 * shown.chars().count() as f64 + 14.0;
        if x + w > WIDTH && x > 12.0 {
            x = 12.0;
            y += 17.0;
            rows += 1.0;
        }
        let _ = write!(
            s,
            "<g class=\"key\" data-run=\"{run}\"><title>{}</title><rect x=\"{x:.1}\" y=\"{:.1}\" width=\"18\" \
             height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            esc(name),
            y - 9.0,
            colour(run),
            x + 23.0,
            y,
            esc(&shown)
        );
        x += w;
    }
    s.push_str("</g>");
    (s, rows * 17.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::format;

    fn plot(lines: Vec<Line>, runs: &[String]) -> String {
        Plot {
            kind: "test",
            title: "t <1>".into(),
            x: Axis::over(0.0, 10.0, format::seconds, "time"),
            y: Axis::from_zero(100.0, format::count, "IOPS"),
            lines,
            rules: Vec::new(),
            runs,
        }
        .svg()
    }

    #[test]
    fn each_run_is_a_path_in_its_colour_with_its_points() {
        let runs = vec!["a".to_owned(), "b".to_owned()];
        let svg = plot(
            vec![
                Line {
                    run: 0,
                    points: vec![(0.0, 0.0), (10.0, 100.0)],
                    tips: vec!["first".into(), "second".into()],
                    style: Style::Solid,
                },
                Line {
                    run: 1,
                    points: vec![(5.0, 50.0)],
                    tips: vec![],
                    style: Style::Solid,
                },
            ],
            &runs,
        );
        // x 0 is the frame's left, y 100 its top.
        assert!(svg.contains("d=\"M72.0 240.0 L450.0 30.0\""), "{svg}");
        assert!(svg.contains(&format!("stroke=\"{}\"", PALETTE[0])));
        assert!(svg.contains(&format!("stroke=\"{}\"", PALETTE[1])));
        assert_eq!(svg.matches("class=\"pt\"").count(), 3);
        assert!(svg.contains("<title>second</title>"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert_eq!(svg.matches("class=\"key\"").count(), 2);
        assert!(!svg.contains("no data"));
    }

    #[test]
    fn a_plot_without_points_says_so() {
        let runs = vec!["a".to_owned()];
        let svg = plot(vec![Line::default()], &runs);
        assert!(svg.contains("no data"));
    }

    #[test]
    fn points_outside_the_axes_stay_in_the_frame() {
        let runs = vec!["a".to_owned()];
        let svg = plot(
            vec![Line {
                run: 0,
                points: vec![(-5.0, 1e9)],
                tips: vec![],
                style: Style::Solid,
            }],
            &runs,
        );
        assert!(svg.contains("d=\"M72.0 30.0\""), "{svg}");
    }

    #[test]
    fn a_long_legend_wraps() {
        let runs: Vec<String> = (0..12)
            .map(|i| format!("a fairly long run name {i}"))
            .collect();
        let used: Vec<usize> = (0..12).collect();
        let (_, h) = legend(&runs, &used, 0.0);
        assert!(h >= 17.0 * 4.0, "{h}");
        let (_, none) = legend(&runs, &[], 0.0);
        assert_eq!(none, 0.0);
        assert_eq!(dash(11), " stroke-dasharray=\"6 3\"");
    }
}
