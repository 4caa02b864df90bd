//! Fitting a testbed's free knobs to published values: a coordinate
//! search in log space that minimises a robust (Cauchy) loss of the log
//! ratio of model to published value over the training cells it is given:
//! near a match it is the squared log ratio, and a cell far off (one the
//! model cannot describe, a copy served from a cache, say) weighs only
//! logarithmically more, so it cannot drag the others. The first round
//! scans each knob's whole range, later ones narrow around the best. It
//! sees only the cells passed to it: the split into training and held-out
//! cells is the caller's (`super::apply`), so held-out cells cannot move
//! the fit.

use super::load::{predict, Shape};
use super::profile::{Knob, Testbed};

/// A training cell: its shape and the published value (canonical unit).
#[derive(Clone, Debug)]
pub struct Sample {
    pub shape: Shape,
    pub published: f64,
}

/// The loss's scale: log ratios well below it count squared, well above
/// it logarithmically (a factor of two).
const CAP: f64 = std::f64::consts::LN_2;
/// Points tried along a knob per round.
const GRID: u32 = 16;
/// Rounds at most; each halves the span searched around a knob whose
/// best point was inside it.
const ROUNDS: u32 = 200;
/// Searches after the first, at most.
const RESTARTS: u32 = 12;
/// Span a restart searches around each knob (log units: a factor of 4).
const RESTART_SPAN: f64 = 1.386_294_361_119_890_6;
/// Stop once every span is below this (log units: 0.1 %).
const SPAN_DONE: f64 = 1e-3;

/// Loss of a model with no value (zero): as if off by a factor of 1000.
const NO_VALUE: f64 = 6.907_755_278_982_137;

/// The robust loss of one cell: CAP² ln(1 + (ln ratio / CAP)²).
fn term(model: f64, published: f64) -> f64 {
    if published <= 0.0 || !published.is_finite() {
        return 0.0;
    }
    let e = if model <= 0.0 || !model.is_finite() {
        NO_VALUE
    } else {
        (model / published).ln()
    };
    CAP * CAP * (1.0 + (e / CAP).powi(2)).ln()
}

/// The fit's objective over `samples` under `tb`.
pub fn cost(tb: &Testbed, samples: &[Sample]) -> f64 {
    samples
        .iter()
        .map(|s| term(predict(tb, &s.shape), s.published))
        .sum()
}

/// `start` with its free knobs moved to minimise [`cost`] over
/// `training`: a search from `start` and from `STARTS` − 1 other
/// points spread over the knobs' ranges (a Halton sequence in log
/// space), the best kept. Deterministic; knobs whose bounds are not
/// positive stay where they are (the search is in log space).
pub fn fit(start: &Testbed, training: &[Sample]) -> Testbed {
    let knobs: Vec<_> = start
        .free_knobs()
        .into_iter()
        .filter_map(|k| match start.setting(k).bounds {
            Some((lo, hi)) if lo > 0.0 && hi > lo => Some((k, (hi / lo).ln())),
            _ => None,
        })
        .collect();
    let mut best: Option<(Testbed, f64)> = None;
    for n in 0..STARTS {
        let mut tb = start.clone();
        if n > 0 {
            for (i, (k, span)) in knobs.iter().enumerate() {
                let lo = tb.setting(*k).bounds.map_or(0.0, |b| b.0);
                tb.set(
                    *k,
                    lo * (span * halton(n, PRIMES.get(i).copied().unwrap_or(2))).exp(),
                );
            }
        }
        let (tb, c) = from(tb, &knobs, training);
        if best.as_ref().is_none_or(|(_, b)| c < *b) {
            best = Some((tb, c));
        }
    }
    best.map_or_else(|| start.clone(), |(tb, _)| tb)
}

/// Starting points of the search.
const STARTS: u32 = 4;
/// Bases of the Halton sequence, one per knob.
const PRIMES: [u32; 10] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29];

/// The `n`th point of the Halton sequence in `base`, in 0..1.
fn halton(mut n: u32, base: u32) -> f64 {
    let (mut f, mut r) = (1.0, 0.0);
    while n > 0 {
        f /= f64::from(base);
        r += f * f64::from(n % base);
        n /= base;
    }
    r
}

/// The search from one starting point, with restarts while they help.
fn from(mut tb: Testbed, knobs: &[(Knob, f64)], training: &[Sample]) -> (Testbed, f64) {
    let full: Vec<f64> = knobs.iter().map(|(_, s)| *s).collect();
    let mut best = cost(&tb, training);
    // Restarts with a wider search while one still finds a better point:
    // coordinate steps crawl along a valley where knobs trade off.
    for restart in 0..RESTARTS {
        let start_cost = best;
        let spans = full
            .iter()
            .map(|s| {
                if restart == 0 {
                    *s
                } else {
                    s.min(RESTART_SPAN)
                }
            })
            .collect();
        (tb, best) = search(tb, knobs, spans, best, training, restart == 0);
        if best >= start_cost - 1e-12 && restart > 0 {
            break;
        }
    }
    (tb, best)
}

/// Rounds of coordinate search from `tb` with `spans` (log units) per
/// knob; the first round scans each knob's whole range when `scan`.
fn search(
    mut tb: Testbed,
    knobs: &[(Knob, f64)],
    mut spans: Vec<f64>,
    mut best: f64,
    training: &[Sample],
    scan: bool,
) -> (Testbed, f64) {
    for round in 0..ROUNDS {
        let before = tb.clone();
        for ((k, _), span) in knobs.iter().zip(spans.iter_mut()) {
            let x = tb.value(*k);
            let lo = tb.setting(*k).bounds.map_or(x, |b| b.0);
            let mut edge = false;
            for i in 0..=GRID {
                let at = f64::from(i) / f64::from(GRID);
                let v = if round == 0 && scan {
                    lo * (*span * at).exp()
                } else {
                    x * (*span * (at - 0.5)).exp()
                };
                let mut trial = tb.clone();
                trial.set(*k, v);
                let c = cost(&trial, training);
                if c < best - 1e-15 {
                    best = c;
                    tb = trial;
                    edge = i == 0 || i == GRID;
                }
            }
            // A best point inside the grid narrows the search; one at its
            // edge keeps the span, to walk on.
            if !edge {
                *span *= 0.5;
            }
        }
        // Pattern move (Hooke and Jeeves): go on the way the round went,
        // which walks along valleys where two knobs trade off.
        let mut trial = tb.clone();
        for (k, _) in knobs {
            let (a, b) = (before.value(*k), tb.value(*k));
            if a > 0.0 && b > 0.0 {
                trial.set(*k, b * (b / a));
            }
        }
        let c = cost(&trial, training);
        if c < best - 1e-15 {
            best = c;
            tb = trial;
        }
        if spans.iter().all(|s| *s < SPAN_DONE) {
            break;
        }
    }
    (tb, best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::load::{Load, Quantity};
    use crate::testbed::profile::Declared;

    /// Unequal cores, so the busier host is told apart from the sum of
    /// both hosts' times.
    fn declared() -> Declared {
        Declared {
            line_bits_per_s: 1e9,
            mtu: 1500,
            tcp_options: 0,
            initiator_cores: 1,
            target_cores: 2,
        }
    }

    /// Cells that pin down round trip, both host costs and the per-byte
    /// cost: one and many outstanding, small and large.
    fn cells(truth: &Testbed) -> Vec<Sample> {
        let mut out = Vec::new();
        for bytes in [512.0, 4096.0, 65536.0, 262_144.0] {
            for qd in [1.0, 32.0] {
                for read in [true, false] {
                    for (rtt, trips) in [(0.0, 1.0), (0.002, 1.0), (0.0, 2.0)] {
                        let mut l = Load::simple(read, bytes, qd);
                        l.added_rtt_s = rtt;
                        l.write_round_trips = trips;
                        let shape = Shape::Io(l, Quantity::Iops);
                        let published = predict(truth, &shape);
                        out.push(Sample { shape, published });
                    }
                }
            }
        }
        out
    }

    #[test]
    fn the_fit_recovers_known_parameters_from_their_own_cells() {
        let truth = Testbed::new(declared())
            .fix(Knob::BaseRtt, 120.0)
            .fix(Knob::HostInitiator, 45.0)
            .fix(Knob::HostTarget, 25.0)
            .fix(Knob::HostPerByte, 3.0);
        let start = Testbed::new(declared())
            .free(Knob::BaseRtt, 10.0, 1.0, 10_000.0)
            .free(Knob::HostInitiator, 500.0, 1.0, 10_000.0)
            .free(Knob::HostTarget, 1.0, 1.0, 10_000.0)
            .free(Knob::HostPerByte, 0.1, 0.01, 100.0);
        let samples = cells(&truth);
        let got = fit(&start, &samples);
        for k in [
            Knob::BaseRtt,
            Knob::HostInitiator,
            Knob::HostTarget,
            Knob::HostPerByte,
        ] {
            let (g, t) = (got.value(k), truth.value(k));
            assert!((g / t - 1.0).abs() < 0.05, "{}: {g} vs {t}", k.name());
        }
        assert!(cost(&got, &samples) < 1e-4);
        assert!(cost(&start, &samples) > 1.0);
    }

    #[test]
    fn fixed_knobs_stay_and_free_ones_keep_their_bounds() {
        let truth = Testbed::new(declared()).fix(Knob::HostTarget, 400.0);
        let start = Testbed::new(declared()).fix(Knob::BaseRtt, 77.0).free(
            Knob::HostTarget,
            10.0,
            1.0,
            100.0,
        );
        let got = fit(&start, &cells(&truth));
        assert_eq!(got.value(Knob::BaseRtt), 77.0);
        assert!((got.value(Knob::HostTarget) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn a_cell_far_off_weighs_little_more_than_one_a_factor_of_two_off() {
        let two = term(2.0, 1.0);
        assert!((term(0.5, 1.0) - two).abs() < 1e-12);
        assert!(term(1000.0, 1.0) < 10.0 * two);
        assert!((term(0.0, 1.0) - term(1000.0, 1.0)).abs() < 1e-9);
        assert_eq!(term(5.0, 0.0), 0.0);
        // Near a match: the squared log ratio.
        assert!((term(1.1, 1.0) - 1.1f64.ln().powi(2)).abs() < 1e-3);
        assert_eq!(term(1.0, 1.0), 0.0);
    }
}
