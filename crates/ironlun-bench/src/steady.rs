//! The steady-state stop rule, as fio's `steadystate` and `ss_dur`: the
//! run stops once the last WINDOW seconds of IOPS (or of mean latency)
//! are steady, and at the workload's run time otherwise.
//!
//! | rule                | fio                                | steady when, over the window                       |
//! |---------------------|------------------------------------|----------------------------------------------------|
//! | `iops:5%@30s`       | `steadystate=iops:5%`, `ss_dur=30` | every second's IOPS within ±5 % of the window mean  |
//! | `iops_slope:1%@30s` | `steadystate=iops_slope:1%`        | least-squares slope within ±1 % of the mean per s  |
//! | `lat:5%@30s`        | `steadystate=lat:5%`               | as `iops`, on each second's mean latency           |
//! | `lat_slope:1%@30s`  | `steadystate=lat_slope:1%`         | as `iops_slope`, on mean latency                   |

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Longest window, seconds.
pub const MAX_WINDOW_S: u32 = 3600;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Iops,
    Lat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// Every sample within the bound of the mean.
    Range,
    /// The fitted slope within the bound of the mean, per second.
    Slope,
}

/// A steady-state rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Rule {
    pub metric: Metric,
    pub test: Test,
    /// The bound, percent of the window's mean.
    pub pct: f64,
    pub window_s: u32,
}

impl FromStr for Rule {
    type Err = String;
    fn from_str(s: &str) -> Result<Rule, String> {
        let bad = || {
            format!("steady '{s}': expected iops|lat|iops_slope|lat_slope:PCT%@WINDOW (e.g. iops:5%@30s)")
        };
        let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
        let (pct, window) = rest.split_once('@').ok_or_else(bad)?;
        let (metric, test) = match kind.trim() {
            "iops" => (Metric::Iops, Test::Range),
            "lat" => (Metric::Lat, Test::Range),
            "iops_slope" => (Metric::Iops, Test::Slope),
            "lat_slope" => (Metric::Lat, Test::Slope),
            _ => return Err(bad()),
        };
        let pct: f64 = pct
            .trim()
            .trim_end_matches('%')
            .parse()
            .map_err(|_| bad())?;
        let window = window.trim();
        let (num, unit) = window.split_at(window.trim_end_matches(['s', 'm']).len());
        let n: u32 = num.parse().map_err(|_| bad())?;
        let window_s = match unit {
            "s" | "" => n,
            "m" => n.saturating_mul(60),
            _ => return Err(bad()),
        };
        if !(pct.is_finite() && pct > 0.0 && pct <= 100.0) {
            return Err(format!("steady '{s}': the bound must be in (0, 100] %"));
        }
        if !(2..=MAX_WINDOW_S).contains(&window_s) {
            return Err(format!(
                "steady '{s}': the window must be 2..={MAX_WINDOW_S} s"
            ));
        }
        Ok(Rule {
            metric,
            test,
            pct,
            window_s,
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = match self.metric {
            Metric::Iops => "iops",
            Metric::Lat => "lat",
        };
        let t = match self.test {
            Test::Range => "",
            Test::Slope => "_slope",
        };
        write!(f, "{m}{t}:{}%@{}s", self.pct, self.window_s)
    }
}

impl TryFrom<String> for Rule {
    type Error = String;
    fn try_from(s: String) -> Result<Rule, String> {
        s.parse()
    }
}

impl From<Rule> for String {
    fn from(r: Rule) -> String {
        r.to_string()
    }
}

/// What a run with a steady-state rule found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SteadyResult {
    pub rule: String,
    pub reached: bool,
    /// Seconds into the measured interval when it was reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_s: Option<u32>,
    /// The window's mean of the metric then (IOPS, or µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_mean: Option<f64>,
}

impl SteadyResult {
    /// `iops:5%@30s reached at 42 s (window mean 10450)`, or `... not
    /// reached`.
    pub fn describe(&self) -> String {
        match (self.at_s, self.window_mean) {
            (Some(t), Some(m)) if self.reached => {
                format!("{} reached at {t} s (window mean {m:.1})", self.rule)
            }
            _ => format!("{} not reached", self.rule),
        }
    }
}

/// Two parts' steady states as one (agents' parts of a run): reached
/// when both were, at the later time; the window mean is the sum (IOPS)
/// or the larger (latency) of the two.
pub fn merge(a: Option<SteadyResult>, b: Option<SteadyResult>) -> Option<SteadyResult> {
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (a, b) => return a.or(b),
    };
    let lat = a.rule.starts_with("lat");
    let mean = match (a.window_mean, b.window_mean) {
        (Some(x), Some(y)) if lat => Some(x.max(y)),
        (Some(x), Some(y)) => Some(x + y),
        _ => None,
    };
    let reached = a.reached && b.reached;
    Some(SteadyResult {
        rule: a.rule,
        reached,
        at_s: if reached { a.at_s.max(b.at_s) } else { None },
        window_mean: if reached { mean } else { None },
    })
}

/// Follows a run's seconds against a rule.
#[derive(Debug)]
pub struct Tracker {
    rule: Rule,
    window: VecDeque<f64>,
    seconds: u32,
    reached: Option<(u32, f64)>,
}

impl Tracker {
    pub fn new(rule: Rule) -> Tracker {
        Tracker {
            rule,
            window: VecDeque::with_capacity(rule.window_s as usize),
            seconds: 0,
            reached: None,
        }
    }

    /// Takes one second's IOPS and mean latency (µs); true once steady.
    pub fn push(&mut self, iops: f64, mean_lat_us: f64) -> bool {
        if self.reached.is_some() {
            return true;
        }
        self.seconds += 1;
        if self.window.len() == self.rule.window_s as usize {
            self.window.pop_front();
        }
        self.window.push_back(match self.rule.metric {
            Metric::Iops => iops,
            Metric::Lat => mean_lat_us,
        });
        if self.window.len() < self.rule.window_s as usize {
            return false;
        }
        let (steady, mean) = judge(&self.window, self.rule);
        if steady {
            self.reached = Some((self.seconds, mean));
        }
        steady
    }

    /// Forgets the seconds so far (the ramp is over).
    pub fn reset(&mut self) {
        self.window.clear();
        self.seconds = 0;
        self.reached = None;
    }

    pub fn result(&self) -> SteadyResult {
        SteadyResult {
            rule: self.rule.to_string(),
            reached: self.reached.is_some(),
            at_s: self.reached.map(|r| r.0),
            window_mean: self.reached.map(|r| r.1),
        }
    }
}

/// Whether `v` is steady by `rule`, and its mean.
fn judge(v: &VecDeque<f64>, rule: Rule) -> (bool, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if !(mean.is_finite() && mean > 0.0) {
        return (false, mean);
    }
    let bound = rule.pct / 100.0 * mean;
    let steady = match rule.test {
        Test::Range => v.iter().all(|x| (x - mean).abs() <= bound),
        Test::Slope => {
            let xm = (n - 1.0) / 2.0;
            let (mut sxy, mut sxx) = (0.0, 0.0);
            for (i, y) in v.iter().enumerate() {
                let dx = i as f64 - xm;
                sxy += dx * (y - mean);
                sxx += dx * dx;
            }
            (sxy / sxx).abs() <= bound
        }
    };
    (steady, mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rule: &str, series: impl IntoIterator<Item = f64>) -> SteadyResult {
        let mut t = Tracker::new(rule.parse().unwrap());
        for x in series {
            if t.push(x, 1e6 / x.max(1.0)) {
                break;
            }
        }
        t.result()
    }

    #[test]
    fn a_warming_series_is_steady_once_the_window_is_flat() {
        // Rises 10 % a second for 20 s, then holds at 1000 ± 1 %.
        let warm = (0..20).map(|i| 100.0 * 1.1f64.powi(i));
        let flat = (0..40).map(|i| 1000.0 + if i % 2 == 0 { 10.0 } else { -10.0 });
        let r = run("iops:5%@10s", warm.chain(flat));
        assert!(r.reached);
        // The window is first free of the ramp at second 30, and the
        // ramp's last second (611) is far outside ±5 %.
        assert_eq!(r.at_s, Some(30));
        assert!((r.window_mean.unwrap() - 1000.0).abs() < 1.0);
    }

    #[test]
    fn noise_within_the_bound_but_a_trend_fails_the_slope() {
        // A steady climb of 0.5 % of the mean a second, inside ±5 % over
        // 10 s but a slope above 0.2 %/s.
        let climb: Vec<f64> = (0..60).map(|i| 1000.0 + 5.0 * f64::from(i)).collect();
        assert!(!run("iops_slope:0.2%@10s", climb.clone()).reached);
        assert!(run("iops_slope:1%@10s", climb.clone()).reached);
        // Alternating ±8 %: no slope, but outside a ±5 % range.
        let noisy: Vec<f64> = (0..60)
            .map(|i| if i % 2 == 0 { 1080.0 } else { 920.0 })
            .collect();
        assert!(run("iops_slope:1%@10s", noisy.clone()).reached);
        assert!(!run("iops:5%@10s", noisy).reached);
    }

    #[test]
    fn latency_rule_and_idle_seconds() {
        let r = run("lat:2%@5s", std::iter::repeat_n(500.0, 5));
        assert_eq!((r.reached, r.at_s), (true, Some(5)));
        assert_eq!(
            r.describe(),
            "lat:2%@5s reached at 5 s (window mean 2000.0)"
        );
        // No I/O at all is not a steady state.
        let idle = run("iops:5%@5s", std::iter::repeat_n(0.0, 20));
        assert_eq!(idle.describe(), "iops:5%@5s not reached");
        let five = run("iops:5%@5s", std::iter::repeat_n(100.0, 5));
        let six = run("iops:5%@5s", [10.0, 50.0, 50.0, 50.0, 50.0, 50.0]);
        let both = merge(Some(five.clone()), Some(six)).unwrap();
        assert_eq!((both.at_s, both.window_mean), (Some(6), Some(150.0)));
        assert!(!merge(Some(five), Some(idle)).unwrap().reached);
    }

    #[test]
    fn rules_parse_and_print_back() {
        for s in ["iops:5%@30s", "lat_slope:0.5%@60s", "iops_slope:1%@10s"] {
            assert_eq!(s.parse::<Rule>().unwrap().to_string(), s);
        }
        assert_eq!("lat:5%@2m".parse::<Rule>().unwrap().window_s, 120);
        for bad in [
            "iops",
            "iops:5%",
            "cpu:5%@30s",
            "iops:0%@30s",
            "iops:5%@1s",
            "iops:5%@2h",
        ] {
            assert!(bad.parse::<Rule>().is_err(), "{bad}");
        }
    }
}
