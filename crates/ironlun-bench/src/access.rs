//! Where a random I/O lands: skewed offset distributions, named and
//! meant as fio's `random_distribution`.
//!
//! | ironlun `--access`   | fio `random_distribution`          | hot set                                   |
//! |----------------------|------------------------------------|-------------------------------------------|
//! | `uniform` (default)  | `random`                           | none                                      |
//! | `zipf:THETA`         | `zipf:THETA`                       | rank r drawn with weight 1/r^THETA        |
//! | `pareto:H`           | `pareto:H`                         | the first H of the ranks take 1-H of I/Os |
//! | `hotspot:SHARE/FRAC` | `zoned:SHARE/FRAC:(100-SHARE)/(100-FRAC)` | SHARE % of I/Os to the first FRAC % |
//!
//! Zipf and Pareto draw a *rank* (0 is the hottest slot) and then spread
//! the ranks over the range with a fixed bijection, so the hot slots are
//! scattered as fio's hashed ranks are (fio's hash may map two ranks to
//! one slot; the bijection here never does, so the hot set's size is
//! exact). Zipf is sampled by rejection-inversion (`rand_distr::Zipf`),
//! Pareto by fio's formula `rank = (n-1)·u^(ln H / ln(1-H))`. A hot spot
//! is contiguous at the start of the range, as fio's zones are.

use std::fmt;
use std::str::FromStr;

use rand::{Rng, RngExt};
use rand_distr::{Distribution, Zipf};
use serde::{Deserialize, Serialize};

/// An offset distribution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Access {
    #[default]
    Uniform,
    /// Zipf with exponent theta (> 0).
    Zipf(f64),
    /// Pareto with hot fraction h (0 < h < 1).
    Pareto(f64),
    /// `share` percent of I/Os go to the first `fraction` percent.
    Hotspot { share: u32, fraction: u32 },
}

impl Access {
    pub fn is_uniform(&self) -> bool {
        *self == Access::Uniform
    }
}

impl FromStr for Access {
    type Err = String;

    fn from_str(s: &str) -> Result<Access, String> {
        let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
        let num = |what: &str| -> Result<f64, String> {
            arg.trim()
                .parse::<f64>()
                .map_err(|_| format!("access '{s}': {what} must be a number"))
        };
        match kind.trim() {
            "uniform" | "random" if arg.is_empty() => Ok(Access::Uniform),
            "zipf" => match num("theta")? {
                t if t.is_finite() && t > 0.0 && t <= 100.0 => Ok(Access::Zipf(t)),
                _ => Err(format!("access '{s}': zipf theta must be in (0, 100]")),
            },
            "pareto" => match num("h")? {
                h if h > 0.0 && h < 1.0 => Ok(Access::Pareto(h)),
                _ => Err(format!("access '{s}': pareto h must be in (0, 1)")),
            },
            "hotspot" => parse_hotspot(s, arg),
            _ => Err(format!(
                "access '{s}': expected uniform, zipf:THETA, pareto:H or hotspot:SHARE/FRACTION"
            )),
        }
    }
}

fn parse_hotspot(s: &str, arg: &str) -> Result<Access, String> {
    let bad = || format!("access '{s}': hotspot:SHARE/FRACTION takes two percentages in 1..=99");
    let (a, b) = arg.split_once('/').ok_or_else(bad)?;
    let share: u32 = a.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
    let fraction: u32 = b.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
    if !(1..=99).contains(&share) || !(1..=99).contains(&fraction) {
        return Err(bad());
    }
    Ok(Access::Hotspot { share, fraction })
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Access::Uniform => write!(f, "uniform"),
            Access::Zipf(t) => write!(f, "zipf:{t}"),
            Access::Pareto(h) => write!(f, "pareto:{h}"),
            Access::Hotspot { share, fraction } => write!(f, "hotspot:{share}/{fraction}"),
        }
    }
}

impl TryFrom<String> for Access {
    type Error = String;
    fn try_from(s: String) -> Result<Access, String> {
        s.parse()
    }
}

impl From<Access> for String {
    fn from(a: Access) -> String {
        a.to_string()
    }
}

/// Draws slots in `0..slots` by an [`Access`].
#[derive(Clone, Debug)]
pub struct Picker {
    access: Access,
    slots: u64,
    zipf: Option<Zipf<f64>>,
    spread: Spread,
}

impl Picker {
    /// A picker over `slots` slots (at least one).
    pub fn new(access: Access, slots: u64) -> Result<Picker, String> {
        let slots = slots.max(1);
        let zipf = match access {
            // n as a float (rand_distr samples in f64; slot counts are far below
            // 2^53, so exactly).
            Access::Zipf(t) => Some(Zipf::new(slots as f64, t).map_err(|e| format!("zipf: {e}"))?),
            _ => None,
        };
        Ok(Picker {
            access,
            slots,
            zipf,
            spread: Spread::new(slots),
        })
    }

    /// The number of slots drawn from.
    pub fn slots(&self) -> u64 {
        self.slots
    }

    /// The next slot.
    pub fn slot<R: Rng>(&self, rng: &mut R) -> u64 {
        match self.access {
            Access::Zipf(_) | Access::Pareto(_) => self.spread.map(self.rank(rng)),
            _ => self.rank(rng),
        }
    }

    /// The next rank: 0 is the hottest (for uniform and hot spot, the
    /// rank is the slot).
    pub fn rank<R: Rng>(&self, rng: &mut R) -> u64 {
        let n = self.slots;
        let r = match (self.access, &self.zipf) {
            (Access::Zipf(_), Some(z)) => (z.sample(rng) as u64).saturating_sub(1),
            (Access::Pareto(h), _) => {
                let u: f64 = rng.random();
                ((n - 1) as f64 * u.powf(h.ln() / (1.0 - h).ln())) as u64
            }
            (Access::Hotspot { share, fraction }, _) => {
                let hot = (n * u64::from(fraction) / 100).clamp(1, n);
                if hot == n || rng.random_range(0..100) < share {
                    rng.random_range(0..hot)
                } else {
                    rng.random_range(hot..n)
                }
            }
            _ => rng.random_range(0..n),
        };
        r.min(n - 1)
    }
}

/// A bijection of `0..n`: `r ↦ (a·r + b) mod n` with `a` coprime to `n`,
/// `a` near n/φ so neighbouring ranks land far apart.
#[derive(Clone, Copy, Debug)]
struct Spread {
    n: u64,
    a: u64,
    b: u64,
}

impl Spread {
    fn new(n: u64) -> Spread {
        let mut a = ((n as f64 / 1.618_033_988_75) as u64).max(1);
        while gcd(a, n) != 1 {
            a += 1;
        }
        Spread { n, a, b: n / 3 }
    }

    fn map(&self, r: u64) -> u64 {
        ((u128::from(self.a) * u128::from(r) + u128::from(self.b)) % u128::from(self.n)) as u64
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    const N: u64 = 10_000;
    const SAMPLES: u32 = 200_000;

    /// The share of `SAMPLES` ranks below `hot`, seed fixed.
    fn hot_share(access: Access, hot: u64) -> f64 {
        let p = Picker::new(access, N).unwrap();
        let mut rng = SmallRng::seed_from_u64(42);
        let n = (0..SAMPLES).filter(|_| p.rank(&mut rng) < hot).count();
        n as f64 / f64::from(SAMPLES)
    }

    // The binomial standard deviation at 200,000 samples is at most
    // 0.0012; the tolerance 0.01 is eight of them.
    const TOL: f64 = 0.01;

    #[test]
    fn zipf_hot_set_takes_its_harmonic_share() {
        for theta in [0.8, 1.2, 2.0] {
            let h = |k: u64| (1..=k).map(|i| (i as f64).powf(-theta)).sum::<f64>();
            let expect = h(N / 10) / h(N);
            let got = hot_share(Access::Zipf(theta), N / 10);
            assert!(
                (got - expect).abs() < TOL,
                "zipf:{theta}: {got} vs {expect}"
            );
        }
    }

    #[test]
    fn pareto_first_h_takes_one_minus_h() {
        for h in [0.1, 0.2, 0.3] {
            let got = hot_share(Access::Pareto(h), (N as f64 * h) as u64);
            assert!((got - (1.0 - h)).abs() < TOL, "pareto:{h}: {got}");
        }
    }

    #[test]
    fn hotspot_and_uniform_shares() {
        let hs = Access::Hotspot {
            share: 90,
            fraction: 10,
        };
        let got = hot_share(hs, N / 10);
        assert!((got - 0.9).abs() < TOL, "hotspot: {got}");
        let got = hot_share(Access::Uniform, N / 10);
        assert!((got - 0.1).abs() < TOL, "uniform: {got}");
    }

    #[test]
    fn slots_stay_in_range_and_spread_is_a_bijection() {
        for n in [1u64, 2, 7, 64, 1000, 4096, 9973] {
            let s = Spread::new(n);
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let m = s.map(r) as usize;
                assert!(!seen[m], "n={n}: {m} twice");
                seen[m] = true;
            }
            let p = Picker::new(Access::Zipf(1.1), n).unwrap();
            let mut rng = SmallRng::seed_from_u64(1);
            assert!((0..1000).all(|_| p.slot(&mut rng) < n));
        }
    }

    #[test]
    fn names_parse_and_print_back() {
        for s in ["uniform", "zipf:1.2", "pareto:0.2", "hotspot:90/10"] {
            let a: Access = s.parse().unwrap();
            assert_eq!(a.to_string(), s);
        }
        for bad in [
            "zipf",
            "zipf:0",
            "zipf:x",
            "pareto:1",
            "hotspot:90",
            "hotspot:100/10",
            "hotspot:90/0",
            "lognormal:1",
            "uniform:3",
        ] {
            assert!(bad.parse::<Access>().is_err(), "{bad} accepted");
        }
    }
}
