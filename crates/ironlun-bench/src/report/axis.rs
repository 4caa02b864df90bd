//! Axes: a domain on a linear or log scale, its ticks and their labels.
//! Pure arithmetic, so every axis the report draws is tested here.

use super::format;

/// How values map onto an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Linear,
    Log,
}

/// A tick: where, and its label (`None`: a grid line only).
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    pub value: f64,
    pub label: Option<String>,
}

/// One axis of a plot.
#[derive(Clone, Debug)]
pub struct Axis {
    pub kind: Kind,
    pub lo: f64,
    pub hi: f64,
    pub ticks: Vec<Tick>,
    pub title: String,
}

impl Axis {
    /// Where `v` falls between the ends of the axis, 0.0 to 1.0 (outside
    /// when `v` is outside the domain; a log axis puts v ≤ 0 at its low
    /// end).
    pub fn fraction(&self, v: f64) -> f64 {
        let (v, lo, hi) = match self.kind {
            Kind::Linear => (v, self.lo, self.hi),
            Kind::Log => (v.max(self.lo).log10(), self.lo.log10(), self.hi.log10()),
        };
        if hi > lo {
            (v - lo) / (hi - lo)
        } else {
            0.0
        }
    }

    /// A linear axis from 0 to a round number at or above `max`, about
    /// five labelled ticks formatted by `fmt`.
    pub fn from_zero(max: f64, fmt: fn(f64) -> String, title: &str) -> Axis {
        let max = if max.is_finite() && max > 0.0 {
            max
        } else {
            1.0
        };
        let step = nice_step(max / 5.0);
        let hi = (max / step - 1e-9).ceil().max(1.0) * step;
        Axis::linear(0.0, hi, step, fmt, title)
    }

    /// A linear axis over exactly `lo..hi` with a labelled tick at every
    /// multiple of a round step (about five of them).
    pub fn over(lo: f64, hi: f64, fmt: fn(f64) -> String, title: &str) -> Axis {
        let hi = if hi > lo { hi } else { lo + 1.0 };
        Axis::linear(lo, hi, nice_step((hi - lo) / 5.0), fmt, title)
    }

    /// A linear axis of bytes over `lo..hi`, ticks at round numbers of
    /// the binary unit that fits (0, 2, 4, 6 GiB).
    pub fn over_bytes(lo: f64, hi: f64, fmt: fn(f64) -> String, title: &str) -> Axis {
        let hi = if hi > lo { hi } else { lo + 1.0 };
        let mut unit = 1.0;
        while hi / unit >= 1024.0 && unit < 1024f64.powi(4) {
            unit *= 1024.0;
        }
        Axis::linear(lo, hi, nice_step((hi - lo) / unit / 5.0) * unit, fmt, title)
    }

    fn linear(lo: f64, hi: f64, step: f64, fmt: fn(f64) -> String, title: &str) -> Axis {
        let first = (lo / step - 1e-9).ceil() as i64;
        let last = (hi / step + 1e-9).floor() as i64;
        let ticks = (first..=last)
            .map(|i| {
                let value = i as f64 * step;
                Tick {
                    value,
                    label: Some(fmt(value)),
                }
            })
            .collect();
        Axis {
            kind: Kind::Linear,
            lo,
            hi,
            ticks,
            title: title.to_owned(),
        }
    }

    /// An axis of named categories in order, the i-th at i, half a step
    /// of room at each end. When the labels would not fit side by side
    /// across a plot, every k-th is labelled and the rest are grid lines.
    pub fn categories(labels: &[String], title: &str) -> Axis {
        let widest = labels
            .iter()
            .map(|l| l.chars().count().saturating_add(2))
            .max()
            .unwrap_or(1);
        let every = labels.len().div_ceil((CHARS_ACROSS / widest).max(1)).max(1);
        let ticks = labels
            .iter()
            .enumerate()
            .map(|(i, l)| Tick {
                value: i as f64,
                label: (i % every == 0).then(|| l.clone()),
            })
            .collect();
        Axis {
            kind: Kind::Linear,
            lo: -0.5,
            hi: labels.len().max(1) as f64 - 0.5,
            ticks,
            title: title.to_owned(),
        }
    }

    /// A log axis over the 1-2-5 values around `min..max` (both > 0),
    /// labelled at each 1-2-5 value when there are at most `labels` of
    /// them, else at each power of ten with the rest as grid lines.
    pub fn log(min: f64, max: f64, labels: usize, fmt: fn(f64) -> String, title: &str) -> Axis {
        let min = if min.is_finite() && min > 0.0 {
            min
        } else {
            1.0
        };
        let max = if max.is_finite() && max > min {
            max
        } else {
            min * 2.0
        };
        let lo = one_two_five(min, false);
        let hi = one_two_five(max, true);
        let mut ticks = Vec::new();
        let mut e = lo.log10().floor() as i32;
        while 10f64.powi(e) <= hi * (1.0 + 1e-9) {
            for m in [1.0, 2.0, 5.0] {
                let value = m * 10f64.powi(e);
                if value < lo * (1.0 - 1e-9) || value > hi * (1.0 + 1e-9) {
                    continue;
                }
                ticks.push(Tick { value, label: None });
            }
            e += 1;
        }
        let few = ticks.len() <= labels;
        for t in &mut ticks {
            let m = t.value / 10f64.powf(t.value.log10().floor());
            if few || (m - 1.0).abs() < 1e-6 {
                t.label = Some(fmt(t.value));
            }
        }
        // Fewer than three decades labelled: the ends too.
        if ticks.iter().filter(|t| t.label.is_some()).count() < 3 {
            let last = ticks.len().saturating_sub(1);
            for (i, t) in ticks.iter_mut().enumerate() {
                if i == 0 || i == last {
                    t.label = Some(fmt(t.value));
                }
            }
        }
        Axis {
            kind: Kind::Log,
            lo,
            hi,
            ticks,
            title: title.to_owned(),
        }
    }

    /// The percentile axis of an exceedance plot: log scale of
    /// 1/(1-p) from the median (2) to the power of ten at or above
    /// `max_r` (at least 99 %, at most 99.999 %), labelled 50%, 90%,
    /// 99%, 99.9% ...
    pub fn exceedance(max_r: f64) -> Axis {
        let decades = max_r.log10().ceil().clamp(2.0, 5.0) as i32;
        let hi = 10f64.powi(decades);
        let mut ticks = vec![Tick {
            value: 2.0,
            label: Some("50%".into()),
        }];
        for e in 1..=decades {
            let r = 10f64.powi(e);
            ticks.push(Tick {
                value: r,
                label: Some(format::percentile(100.0 * (1.0 - 1.0 / r))),
            });
        }
        Axis {
            kind: Kind::Log,
            lo: 2.0,
            hi,
            ticks,
            title: "percentile (log scale of 1/(1 − p))".into(),
        }
    }
}

/// Characters of tick labels that fit across a plot's frame (378 px, at
/// about 7 px a character).
const CHARS_ACROSS: usize = 54;

/// 1/(1-p) for a percentile `pct` (in %): 50 → 2, 99.9 → 1000.
pub fn exceedance_r(pct: f64) -> f64 {
    1.0 / (1.0 - pct / 100.0).max(1e-12)
}

/// A round step (1, 2, 2.5 or 5 times a power of ten) at or above `raw`.
pub fn nice_step(raw: f64) -> f64 {
    let raw = if raw.is_finite() && raw > 0.0 {
        raw
    } else {
        1.0
    };
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let n = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|n| m <= n * (1.0 + 1e-9))
        .unwrap_or(10.0);
    n * p
}

/// The 1-2-5 value at or below `v` (`up`: at or above).
fn one_two_five(v: f64, up: bool) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    let m = v / p;
    let steps = [1.0, 2.0, 5.0, 10.0];
    let chosen = if up {
        steps.into_iter().find(|s| m <= s * (1.0 + 1e-9))
    } else {
        steps.into_iter().rev().find(|s| m >= s * (1.0 - 1e-9))
    };
    chosen.unwrap_or(1.0) * p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(a: &Axis) -> Vec<String> {
        a.ticks.iter().filter_map(|t| t.label.clone()).collect()
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(2.2), 2.5);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(23_000.0), 25_000.0);
        assert_eq!(nice_step(0.0), 1.0);
    }

    #[test]
    fn a_count_axis_reads_in_k() {
        let a = Axis::from_zero(117_000.0, format::count, "IOPS");
        assert_eq!(a.lo, 0.0);
        assert_eq!(a.hi, 125_000.0);
        assert_eq!(labels(&a), ["0", "25K", "50K", "75K", "100K", "125K"]);
        assert_eq!(a.fraction(62_500.0), 0.5);
    }

    #[test]
    fn an_empty_axis_still_has_a_range() {
        let a = Axis::from_zero(0.0, format::count, "IOPS");
        assert!(a.hi > a.lo);
        assert!(a.ticks.len() >= 2);
    }

    #[test]
    fn a_byte_axis_steps_in_binary_units() {
        let gib = 1024f64.powi(3);
        let a = Axis::over_bytes(0.0, 7.0 * gib, format::bytes, "offset");
        assert_eq!(labels(&a), ["0 B", "2 GiB", "4 GiB", "6 GiB"]);
    }

    #[test]
    fn a_latency_log_axis_labels_1_2_5_in_units() {
        let a = Axis::log(42.0, 3100.0, 10, format::latency_us, "latency");
        assert_eq!((a.lo, a.hi), (20.0, 5000.0));
        assert_eq!(
            labels(&a),
            ["20 µs", "50 µs", "100 µs", "200 µs", "500 µs", "1 ms", "2 ms", "5 ms"]
        );
        assert!((a.fraction(a.lo)).abs() < 1e-12);
        assert!((a.fraction(a.hi) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_wide_log_axis_labels_decades_only() {
        let a = Axis::log(3.0, 250_000.0, 10, format::latency_us, "latency");
        assert_eq!(labels(&a), ["10 µs", "100 µs", "1 ms", "10 ms", "100 ms"]);
        // The 2s and 5s are still grid lines.
        assert!(a.ticks.len() > labels(&a).len());
        // Fewer labels allowed: 20 µs to 5 ms gets its decades and ends.
        let a = Axis::log(42.0, 3100.0, 7, format::latency_us, "latency");
        assert_eq!(labels(&a), ["20 µs", "100 µs", "1 ms", "5 ms"]);
    }

    #[test]
    fn the_exceedance_axis_spreads_the_nines_evenly() {
        let a = Axis::exceedance(30_000.0);
        assert_eq!(
            labels(&a),
            ["50%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
        );
        let f99 = a.fraction(exceedance_r(99.0));
        let f999 = a.fraction(exceedance_r(99.9));
        let f9999 = a.fraction(exceedance_r(99.99));
        assert!((f999 - f99 - (f9999 - f999)).abs() < 1e-9);
        assert_eq!(a.fraction(2.0), 0.0);
        assert!((a.fraction(1e5) - 1.0).abs() < 1e-12);
        // A short run still shows up to 99 %.
        assert_eq!(Axis::exceedance(30.0).hi, 100.0);
    }
}
