//! Published beside measured: each published cell matched to the
//! measured row of the same metric and conditions, the ratio measured /
//! published, the ±25 % flag, and the share of compared cells within it.
//! Measured rows no published cell names are kept, with no published
//! value; published cells the reproduction does not measure are listed
//! as such, with the nearest measured row's differences as the reason.

use std::collections::BTreeMap;

use serde::Serialize;

use super::data::{conditions_text, Metric, StandIn, StudyFile};

/// The band a measured value must fall in to agree: measured / published
/// within 1 ± this.
pub const TOLERANCE: f64 = 0.25;

/// One measured row as the comparison sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub metric: Metric,
    pub conditions: BTreeMap<String, String>,
    /// In the metric's canonical unit (MB/s, IOPS, µs, s, %).
    pub value: f64,
    /// The model's value for the row, same unit, where there is one.
    pub model: Option<f64>,
}

impl Observation {
    pub fn new(metric: Metric, conditions: &[(&str, &str)], value: f64) -> Observation {
        Observation {
            metric,
            conditions: conditions
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            value,
            model: None,
        }
    }

    pub fn with_model(mut self, model: Option<f64>) -> Observation {
        self.model = model;
        self
    }
}

/// How a cell came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Published and measured: has a ratio and a flag.
    Compared,
    /// Published; the reproduction has no row of the same conditions.
    NotMeasured,
    /// Measured; the study published no value for it.
    NotPublished,
}

/// One row of the side-by-side table (and one JSON cell).
#[derive(Clone, Debug, Serialize)]
pub struct Compared {
    /// Where the published value stands ("not published" when none).
    #[serde(rename = "where")]
    pub at: String,
    pub metric: &'static str,
    pub conditions: BTreeMap<String, String>,
    /// The unit of `published`, `measured` and `model`.
    pub unit: &'static str,
    pub published: Option<f64>,
    /// The published value as printed, with its own unit.
    pub published_as: Option<String>,
    pub measured: Option<f64>,
    pub model: Option<f64>,
    /// measured / published.
    pub ratio: Option<f64>,
    /// Whether the ratio is within 1 ± 0.25.
    pub within_25pct: Option<bool>,
    pub status: Status,
    /// Whether the testbed profile was fitted on this cell (false: held
    /// out, or not published).
    pub training: bool,
    /// The model's value under the fitted testbed profile, same unit.
    pub profile: Option<f64>,
    /// profile / published.
    pub profile_ratio: Option<f64>,
    /// Whether `profile_ratio` is within 1 ± 0.25.
    pub profile_within_25pct: Option<bool>,
    /// Why the profile has no value for the cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_note: Option<String>,
    /// Stand-ins used, why a cell is not measured, the study's own note.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// A study's cells with their agreement.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub study: String,
    pub source: String,
    pub convention: String,
    pub stand_ins: Vec<StandIn>,
    /// Published cells with a measured value.
    pub compared: usize,
    /// Of those, within ±25 %.
    pub within: usize,
    /// within / compared (`None` when nothing was compared).
    pub share_within_25pct: Option<f64>,
    pub published_cells: usize,
    pub not_measured: usize,
    pub not_published: usize,
    pub cells: Vec<Compared>,
    /// The fitted testbed profile and its agreement (set by
    /// `crate::testbed::apply`).
    pub fit: Option<crate::testbed::Fit>,
}

/// measured / published, when both are there and published is not zero.
pub fn ratio(published: Option<f64>, measured: Option<f64>) -> Option<f64> {
    match (published, measured) {
        (Some(p), Some(m)) if p != 0.0 && p.is_finite() && m.is_finite() => Some(m / p),
        _ => None,
    }
}

/// Whether a ratio is within 1 ± [`TOLERANCE`].
pub fn within(ratio: f64) -> bool {
    (ratio - 1.0).abs() <= TOLERANCE + 1e-12
}

/// Share of compared cells within the band (`None` when none compared).
pub fn share(cells: &[Compared]) -> Option<f64> {
    let compared: Vec<bool> = cells.iter().filter_map(|c| c.within_25pct).collect();
    if compared.is_empty() {
        return None;
    }
    let n = compared.iter().filter(|w| **w).count();
    Some(n as f64 / compared.len() as f64)
}

/// Whether a published condition value is met by a measured one: equal,
/// or a declared stand-in.
fn value_matches(stand_ins: &[StandIn], key: &str, published: &str, measured: &str) -> bool {
    published == measured
        || stand_ins
            .iter()
            .any(|s| s.key == key && s.published == published && s.measured == measured)
}

/// Keys on which a published cell's conditions and a row's differ.
fn differences(
    stand_ins: &[StandIn],
    published: &BTreeMap<String, String>,
    measured: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in published {
        match measured.get(k) {
            Some(m) if value_matches(stand_ins, k, v, m) => {}
            Some(m) => out.push(format!("{k} (study {v}, measured {m})")),
            None => out.push(format!("{k} (study {v}, not a measured condition)")),
        }
    }
    for (k, m) in measured {
        if !published.contains_key(k) {
            out.push(format!("{k} (measured {m}, not in the study's cell)"));
        }
    }
    out
}

/// The stand-ins a match relied on, as a note.
fn stand_ins_used(
    published: &BTreeMap<String, String>,
    measured: &BTreeMap<String, String>,
) -> String {
    let used: Vec<String> = published
        .iter()
        .filter_map(|(k, v)| {
            let m = measured.get(k)?;
            (m != v).then(|| format!("{m} stands in for {v}"))
        })
        .collect();
    used.join("; ")
}

/// Matches `observed` against a study's published cells.
pub fn compare(file: &StudyFile, observed: &[Observation]) -> Comparison {
    let si = &file.stand_in;
    let mut used = vec![false; observed.len()];
    let mut cells = Vec::new();
    for p in &file.cell {
        let unit = p.metric.canonical_unit();
        let published = p.canonical();
        let hit = observed.iter().enumerate().find(|(_, o)| {
            o.metric == p.metric && differences(si, &p.conditions, &o.conditions).is_empty()
        });
        let mut notes: Vec<String> = Vec::new();
        let (measured, model) = match hit {
            Some((i, o)) => {
                if let Some(u) = used.get_mut(i) {
                    *u = true;
                }
                let s = stand_ins_used(&p.conditions, &o.conditions);
                if !s.is_empty() {
                    notes.push(s);
                }
                (Some(o.value), o.model)
            }
            None => {
                notes.push(not_measured_reason(file, p.metric, &p.conditions, observed));
                (None, None)
            }
        };
        notes.extend(p.note.clone());
        let r = ratio(published, measured);
        cells.push(Compared {
            at: p.at.to_string(),
            metric: p.metric.name(),
            conditions: p.conditions.clone(),
            unit: unit.name(),
            published,
            published_as: Some(p.as_printed()),
            measured,
            model,
            ratio: r,
            within_25pct: r.map(within),
            status: if measured.is_some() {
                Status::Compared
            } else {
                Status::NotMeasured
            },
            training: file
                .fit
                .as_ref()
                .is_some_and(|f| f.is_training(&p.conditions)),
            profile: None,
            profile_ratio: None,
            profile_within_25pct: None,
            profile_note: None,
            note: notes.join("; "),
        });
    }
    for (o, _) in observed.iter().zip(&used).filter(|(_, u)| !**u) {
        cells.push(Compared {
            at: "not published".into(),
            metric: o.metric.name(),
            conditions: o.conditions.clone(),
            unit: o.metric.canonical_unit().name(),
            published: None,
            published_as: None,
            measured: Some(o.value),
            model: o.model,
            ratio: None,
            within_25pct: None,
            status: Status::NotPublished,
            training: false,
            profile: None,
            profile_ratio: None,
            profile_within_25pct: None,
            profile_note: None,
            note: String::new(),
        });
    }
    let count = |s: Status| cells.iter().filter(|c| c.status == s).count();
    let compared = cells.iter().filter(|c| c.within_25pct.is_some()).count();
    Comparison {
        study: file.study.clone(),
        source: file.source.clone(),
        convention: file.convention.clone(),
        stand_ins: file.stand_in.clone(),
        compared,
        within: cells
            .iter()
            .filter(|c| c.within_25pct == Some(true))
            .count(),
        share_within_25pct: share(&cells),
        published_cells: file.cell.len(),
        not_measured: count(Status::NotMeasured),
        not_published: count(Status::NotPublished),
        cells,
        fit: None,
    }
}

/// Why a published cell has no measured row: what the nearest row of the
/// same metric differs in.
fn not_measured_reason(
    file: &StudyFile,
    metric: Metric,
    conditions: &BTreeMap<String, String>,
    observed: &[Observation],
) -> String {
    let nearest = observed
        .iter()
        .filter(|o| o.metric == metric)
        .map(|o| differences(&file.stand_in, conditions, &o.conditions))
        .min_by_key(Vec::len);
    match nearest {
        None => format!(
            "not measured: the reproduction measures no {}",
            metric.name()
        ),
        Some(d) => format!(
            "not measured: the nearest measured row differs in {}",
            d.join(", ")
        ),
    }
}

/// Unit-less text of a row's conditions (for tables).
pub fn conditions_of(c: &Compared) -> String {
    conditions_text(&c.conditions)
}
