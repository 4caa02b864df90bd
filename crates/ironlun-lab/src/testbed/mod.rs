//! The original testbeds as fitted profiles.
//!
//! **Owns:** a testbed as a few physical parameters with units
//! (`profile`: line rate and MTU with the framing they imply
//! (`framing`), host cost per command at initiator and target and per
//! byte, the testbed's round trip, the effective TCP window, the target's
//! cap on outstanding writes, disk rate), the model of a published cell
//! under a testbed (`load`), the fit of the free parameters on a study's
//! declared training cells (`fit`), each study's testbed and reading of
//! its cells (`study`), and the agreement of the model under the fitted
//! profile with the published values, in-sample (training cells) and
//! out-of-sample (held-out cells) apart, so a fit cannot hide a wrong
//! model.
//!
//! **Must not know:** how a reproduction runs its rows; the measured
//! rows are split by the same training rule, nothing more.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::published::compare::{ratio, within};
use crate::published::{Comparison, StudyFile};

pub mod fit;
pub mod framing;
pub mod load;
pub mod profile;
pub mod study;

pub use profile::{Declared, Knob, Parameter, Testbed};

/// What the profile column is, in the reports.
pub const BASIS: &str = "profile: the model's value under the testbed profile fitted on the training cells (in-sample) and predicted for the held-out cells (out-of-sample)";

/// Agreement over a set of cells.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Agreement {
    pub compared: usize,
    pub within_25pct: usize,
    pub share_within_25pct: Option<f64>,
}

impl Agreement {
    fn of(flags: impl Iterator<Item = bool>) -> Agreement {
        let (mut n, mut w) = (0, 0);
        for f in flags {
            n += 1;
            w += usize::from(f);
        }
        Agreement {
            compared: n,
            within_25pct: w,
            share_within_25pct: (n > 0).then(|| w as f64 / n as f64),
        }
    }

    /// "41 of 50 (82 %)".
    pub fn text(&self) -> String {
        match self.share_within_25pct {
            Some(s) => format!(
                "{} of {} within ±25 % ({:.0} %)",
                self.within_25pct,
                self.compared,
                s * 100.0
            ),
            None => "no cell compared".into(),
        }
    }
}

/// A parameter's value and unit, as the JSON names them.
#[derive(Clone, Debug, Serialize)]
pub struct ParamValue {
    pub value: f64,
    pub unit: &'static str,
    pub fitted: bool,
    pub what: &'static str,
}

/// Cells the profile has no value for, by reason.
#[derive(Clone, Debug, Serialize)]
pub struct NotModelled {
    pub reason: String,
    pub cells: usize,
}

/// A study's fitted profile and its agreement.
#[derive(Clone, Debug, Serialize)]
pub struct Fit {
    pub basis: &'static str,
    pub imposed: &'static str,
    /// Why the training cells were chosen.
    pub why: String,
    /// The training rule: a cell whose conditions hold one of these.
    pub training_rule: Vec<String>,
    /// name → value with its unit.
    pub parameters: BTreeMap<&'static str, ParamValue>,
    /// The same, in print order.
    #[serde(skip)]
    pub list: Vec<Parameter>,
    /// Published cells in the training subset.
    pub training_cells: usize,
    /// The profile against the published values, training cells.
    pub in_sample: Agreement,
    /// The profile against the published values, held-out cells.
    pub out_of_sample: Agreement,
    /// The profile over every modelled cell.
    pub all: Agreement,
    /// The measured rows against the published values, split the same way.
    pub measured_in_sample: Agreement,
    pub measured_out_of_sample: Agreement,
    pub not_modelled: Vec<NotModelled>,
}

/// One published cell under the fitted profile.
#[derive(Clone, Debug, PartialEq)]
pub struct CellFit {
    pub training: bool,
    /// The model's value, or why there is none.
    pub profile: Result<f64, String>,
}

/// A study's fitted testbed, the knobs its model uses, and each published
/// cell under it (in the file's order).
pub type Fitted = (Testbed, Vec<Knob>, Vec<CellFit>);

/// Fits `file`'s testbed on its training cells and predicts every cell
/// (`None` when the file declares no training subset).
pub fn fit_file(file: &StudyFile) -> Result<Option<Fitted>, String> {
    let Some(decl) = &file.fit else {
        return Ok(None);
    };
    let model =
        study::model(&file.study).ok_or_else(|| format!("{}: no testbed model", file.study))?;
    let shapes: Vec<_> = file.cell.iter().map(|c| model.shape(c)).collect();
    let training: Vec<fit::Sample> = file
        .cell
        .iter()
        .zip(&shapes)
        .filter(|(c, _)| decl.is_training(&c.conditions))
        .filter_map(|(c, s)| {
            Some(fit::Sample {
                shape: s.as_ref().ok()?.clone(),
                published: c.canonical()?,
            })
        })
        .collect();
    let fitted = fit::fit(&model.testbed, &training);
    let cells = file
        .cell
        .iter()
        .zip(shapes)
        .map(|(c, s)| CellFit {
            training: decl.is_training(&c.conditions),
            profile: s.map(|s| load::predict(&fitted, &s)),
        })
        .collect();
    Ok(Some((fitted, model.used, cells)))
}

/// Sets each published cell's profile value and `cmp.fit`.
pub fn apply(file: &StudyFile, cmp: &mut Comparison) -> Result<(), String> {
    let Some((tb, used, fits)) = fit_file(file)? else {
        return Ok(());
    };
    let mut reasons: Vec<NotModelled> = Vec::new();
    for ((p, f), out) in file.cell.iter().zip(&fits).zip(cmp.cells.iter_mut()) {
        if out.metric != p.metric.name() || out.conditions != p.conditions {
            return Err(format!("{}: cells out of order at {}", file.study, p.at));
        }
        out.training = f.training;
        match &f.profile {
            Ok(v) => {
                out.profile = Some(*v);
                out.profile_ratio = ratio(out.published, Some(*v));
                out.profile_within_25pct = out.profile_ratio.map(within);
            }
            Err(why) => {
                out.profile_note = Some(why.clone());
                match reasons.iter_mut().find(|r| r.reason == *why) {
                    Some(r) => r.cells += 1,
                    None => reasons.push(NotModelled {
                        reason: why.clone(),
                        cells: 1,
                    }),
                }
            }
        }
    }
    let decl = file.fit.as_ref();
    let split = |training: bool, measured: bool| {
        Agreement::of(
            cmp.cells
                .iter()
                .filter(|c| c.training == training && c.published.is_some())
                .filter_map(|c| {
                    if measured {
                        c.within_25pct
                    } else {
                        c.profile_within_25pct
                    }
                }),
        )
    };
    let list = tb.parameters(&used);
    cmp.fit = Some(Fit {
        basis: BASIS,
        imposed: study::imposed(&file.study),
        why: decl.map(|d| d.why.clone()).unwrap_or_default(),
        training_rule: decl
            .map(|d| {
                d.training
                    .iter()
                    .map(crate::published::data::conditions_text)
                    .collect()
            })
            .unwrap_or_default(),
        parameters: list
            .iter()
            .map(|p| {
                (
                    p.name,
                    ParamValue {
                        value: p.value,
                        unit: p.unit,
                        fitted: p.fitted,
                        what: p.what,
                    },
                )
            })
            .collect(),
        list,
        training_cells: fits.iter().filter(|f| f.training).count(),
        in_sample: split(true, false),
        out_of_sample: split(false, false),
        all: Agreement::of(cmp.cells.iter().filter_map(|c| c.profile_within_25pct)),
        measured_in_sample: split(true, true),
        measured_out_of_sample: split(false, true),
        not_modelled: reasons,
    });
    Ok(())
}

#[cfg(test)]
mod tests;
