//! Reference lines across a plot (y = x, the edges of a tolerance band,
//! a threshold): a segment between two points in data units, clipped
//! where it leaves the frame, its label a tooltip. On log axes a line
//! y = k·x is straight, so two end points draw it exactly.

use std::fmt::Write as _;

use super::axis::Axis;
use super::format::esc;
use super::svg::Frame;

/// A reference line from `from` to `to` (x, y in the axes' units).
#[derive(Clone, Debug)]
pub struct Rule {
    pub from: (f64, f64),
    pub to: (f64, f64),
    /// What it marks, shown as its tooltip.
    pub label: String,
    /// Dashed (a band's edge) or solid (the line itself).
    pub dashed: bool,
}

impl Rule {
    /// The line's SVG on frame `f`, or nothing when it misses the frame.
    pub fn svg(&self, f: &Frame, x: &Axis, y: &Axis) -> String {
        let at = |(vx, vy): (f64, f64)| (x.fraction(vx), y.fraction(vy));
        let Some((a, b)) = clip(at(self.from), at(self.to)) else {
            return String::new();
        };
        let ((x1, y1), (x2, y2)) = (f.at(a), f.at(b));
        let mut s = String::new();
        let _ = write!(
            s,
            "<line class=\"rule{}\" x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\">\
             <title>{}</title></line>",
            if self.dashed { "" } else { " solid" },
            esc(&self.label)
        );
        s
    }
}

/// The part of the segment `a`-`b` (fractions of the axes) inside the
/// unit square, by Liang and Barsky's parametric clipping; `None` when
/// none of it is, or it only touches a corner or an edge at one point.
pub fn clip(a: (f64, f64), b: (f64, f64)) -> Option<((f64, f64), (f64, f64))> {
    if ![a.0, a.1, b.0, b.1].iter().all(|v| v.is_finite()) {
        return None;
    }
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    // Each edge as p·t ≤ q: left, right, bottom, top.
    for (p, q) in [(-dx, a.0), (dx, 1.0 - a.0), (-dy, a.1), (dy, 1.0 - a.1)] {
        if p == 0.0 {
            if q < 0.0 {
                return None;
            }
        } else if p < 0.0 {
            t0 = t0.max(q / p);
        } else {
            t1 = t1.min(q / p);
        }
    }
    let at = |t: f64| (a.0 + t * dx, a.1 + t * dy);
    (t0 < t1).then_some((at(t0), at(t1)))
}
