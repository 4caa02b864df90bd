//! What a reproduction returns, and its forms: text tables, the JSON
//! records, the HTML report, the cells far from their model.

use serde::Serialize;

use ironlun_units::format_size;

use super::initiators::InitiatorStudy;
use crate::fs_rows::{self, FsRow};
use crate::model::Prediction;
use crate::published::{self, Comparison};
use crate::report::Section;
use crate::runner::DISTURBED_STEAL_PCT;
use crate::sweep::{self, CellResult};

/// One TCP baseline cell.
#[derive(Clone, Debug, Serialize)]
pub struct TcpCell {
    pub rtt_ms: f64,
    pub window: u32,
    pub direction: &'static str,
    pub link_rate: u64,
    pub measured_mb_per_s: f64,
    pub model_mb_per_s: f64,
}

/// One table of a reproduction.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    pub title: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    pub cells: Vec<CellResult>,
}

/// Workload runs under one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadSet {
    pub title: String,
    pub results: Vec<ironlun_bench::WorkloadResult>,
    /// The model for each result (`None` where there is none), in order.
    pub models: Vec<Option<Prediction>>,
    /// Host steal during each run, %.
    pub steal_pct: Vec<Option<f64>>,
}

impl WorkloadSet {
    /// A set with no runs yet.
    pub fn new(title: String) -> WorkloadSet {
        WorkloadSet {
            title,
            results: Vec::new(),
            models: Vec::new(),
            steal_pct: Vec::new(),
        }
    }

    /// Adds a run, with its model (if any) and the host steal during it.
    pub fn push(
        &mut self,
        result: ironlun_bench::WorkloadResult,
        model: Option<Prediction>,
        steal_pct: Option<f64>,
    ) {
        self.results.push(result);
        self.models.push(model);
        self.steal_pct.push(steal_pct);
    }

    /// Runs without a model.
    pub fn measured(title: String, results: Vec<ironlun_bench::WorkloadResult>) -> WorkloadSet {
        let n = results.len();
        WorkloadSet {
            title,
            results,
            models: vec![None; n],
            steal_pct: vec![None; n],
        }
    }

    fn rows(
        &self,
    ) -> impl Iterator<
        Item = (
            &ironlun_bench::WorkloadResult,
            Option<&Prediction>,
            Option<f64>,
        ),
    > {
        self.results.iter().enumerate().map(|(i, r)| {
            (
                r,
                self.models.get(i).and_then(Option::as_ref),
                self.steal_pct.get(i).copied().flatten(),
            )
        })
    }
}

/// Everything a reproduction measured.
#[derive(Clone, Debug, Serialize)]
pub struct Reproduction {
    pub reproduction: String,
    pub description: String,
    pub elapsed_s: f64,
    /// CPU time the hypervisor stole over the whole run, percent of all
    /// (a contended virtual machine disturbs every timing).
    pub steal_pct: Option<f64>,
    pub tcp: Vec<TcpCell>,
    pub tables: Vec<Table>,
    /// Whole-workload runs (mixes, profiles), by scenario.
    pub workloads: Vec<WorkloadSet>,
    /// Rows measured through ext4 on the Linux kernel initiator in a VM.
    pub fs_rows: Vec<FsRow>,
    /// Other targets' rows (target-backends: tgt and istgt beside
    /// ironlun), measured or skipped with why.
    pub peers: Vec<super::peers::PeerRow>,
    /// What could not be reproduced as published, and what ran instead.
    pub notes: Vec<String>,
    /// The study's published values beside these rows (set by
    /// [`super::run`] once the study has run).
    pub comparison: Option<Comparison>,
    /// The initiator study's CPU comparison (app-profiles only).
    pub initiators: Option<InitiatorStudy>,
}

/// One JSON record per cell: its parameters, `measured_mb_per_s`,
/// `model_mb_per_s`.
#[derive(Serialize)]
struct Record<'a> {
    section: &'a str,
    #[serde(flatten)]
    params: serde_json::Value,
    measured_mb_per_s: f64,
    model_mb_per_s: Option<f64>,
    model_bound: Option<&'static str>,
    /// Host CPU stolen by the hypervisor during the reported run, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    steal_pct: Option<f64>,
    /// Runs of the cell (the one with the least steal is reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    runs: Option<u32>,
}

#[cfg(test)]
impl Reproduction {
    /// A reproduction named `name` with nothing measured, for tests to
    /// fill.
    pub(crate) fn bare(name: &str) -> Reproduction {
        Reproduction {
            reproduction: name.into(),
            description: String::new(),
            elapsed_s: 0.0,
            steal_pct: None,
            tcp: Vec::new(),
            tables: Vec::new(),
            workloads: Vec::new(),
            fs_rows: Vec::new(),
            peers: Vec::new(),
            notes: Vec::new(),
            comparison: None,
            initiators: None,
        }
    }
}

impl Reproduction {
    /// `{"reproduction": ..., "agreement": {...}, "fit": {...}, "cells":
    /// [...]}`: `cells` are the published | measured | model rows (each
    /// with `published`, `measured`, `model` in one unit and `where`,
    /// `training`, and `profile`, the model under the fitted testbed);
    /// `fit` the fitted profile (`parameters` name → value and unit,
    /// `training_cells`, `in_sample`, `out_of_sample`);
    /// `measured_cells` the per-cell records of the runs themselves.
    pub fn json(&self) -> Result<String, String> {
        let mut cells = Vec::new();
        for t in &self.tcp {
            cells.push(Record {
                section: "tcp",
                params: serde_json::json!({
                    "rtt_ms": t.rtt_ms, "tcp_window": t.window,
                    "direction": t.direction, "link_rate": t.link_rate }),
                measured_mb_per_s: t.measured_mb_per_s,
                model_mb_per_s: Some(t.model_mb_per_s),
                model_bound: None,
                steal_pct: None,
                runs: None,
            });
        }
        for tb in &self.tables {
            for c in &tb.cells {
                cells.push(Record {
                    section: &tb.title,
                    params: serde_json::to_value(&c.params).map_err(|e| e.to_string())?,
                    measured_mb_per_s: c.measured.mb_per_s,
                    model_mb_per_s: c.model.as_ref().map(|m| m.mb_per_s),
                    model_bound: c.model.as_ref().map(|m| m.bound),
                    steal_pct: c.measured.steal_pct,
                    runs: Some(c.runs),
                });
            }
        }
        for set in &self.workloads {
            for (r, model, steal) in set.rows() {
                if let Some(m) = model {
                    cells.push(Record {
                        section: &set.title,
                        params: serde_json::json!({ "workload": r.name }),
                        measured_mb_per_s: r.mb_per_s,
                        model_mb_per_s: Some(m.mb_per_s),
                        model_bound: Some(m.bound),
                        steal_pct: steal,
                        runs: None,
                    });
                }
            }
        }
        serde_json::to_string_pretty(&serde_json::json!({
            "reproduction": self.reproduction,
            "description": self.description,
            "elapsed_s": self.elapsed_s,
            "steal_pct": self.steal_pct,
            "notes": self.notes,
            "agreement": self.comparison.as_ref().map(|c| serde_json::json!({
                "source": c.source,
                "convention": c.convention,
                "stand_ins": c.stand_ins,
                "tolerance": published::TOLERANCE,
                "compared": c.compared,
                "within_25pct": c.within,
                "share_within_25pct": c.share_within_25pct,
                "published_cells": c.published_cells,
                "not_measured": c.not_measured,
                "not_published": c.not_published,
            })),
            "fit": self.comparison.as_ref().and_then(|c| c.fit.as_ref()),
            "cells": self.comparison.as_ref().map_or(&[][..], |c| &c.cells[..]),
            "measured_cells": cells,
            "workloads": self.workloads,
            "fs_rows": self.fs_rows,
            "peer_rows": self.peers,
            "initiators": self.initiators,
        }))
        .map_err(|e| e.to_string())
    }

    /// Cells more than `tolerance` (0.25 = 25 %) from their model.
    pub fn outliers(&self, tolerance: f64) -> Vec<String> {
        let mut out = Vec::new();
        for t in &self.tcp {
            let e = t.measured_mb_per_s / t.model_mb_per_s - 1.0;
            if e.abs() > tolerance {
                out.push(format!(
                    "tcp {} rtt {} ms window {}: {:.2} vs model {:.2} ({:+.0} %)",
                    t.direction,
                    t.rtt_ms,
                    t.window,
                    t.measured_mb_per_s,
                    t.model_mb_per_s,
                    e * 100.0
                ));
            }
        }
        for tb in &self.tables {
            for c in &tb.cells {
                if let (Some(e), Some(m)) = (c.model_error, &c.model) {
                    if e.abs() > tolerance {
                        let p = |k: &str| c.params.get(k).cloned().unwrap_or_default();
                        out.push(format!(
                            "{}: bs {} qd {} rtt {}: {:.2} vs model {:.2} ({:+.0} %, bound: {}; host steal {}{}) — {}",
                            tb.title,
                            p("bs"),
                            p("qd"),
                            p("rtt"),
                            c.measured.mb_per_s,
                            m.mb_per_s,
                            e * 100.0,
                            m.bound,
                            c.measured
                                .steal_pct
                                .map_or("unknown".into(), |s| format!("{s:.0} %")),
                            if c.runs > 1 {
                                format!(" in the least disturbed of {} runs", c.runs)
                            } else {
                                String::new()
                            },
                            explain(c, e)
                        ));
                    }
                }
            }
        }
        for set in &self.workloads {
            for (r, model, steal) in set.rows() {
                let Some(m) = model.filter(|m| m.mb_per_s > 0.0) else {
                    continue;
                };
                let e = r.mb_per_s / m.mb_per_s - 1.0;
                if e.abs() > tolerance {
                    out.push(format!(
                        "{}: {}: {:.2} vs model {:.2} ({:+.0} %, bound: {}; host steal {}) — {}",
                        set.title,
                        r.name,
                        r.mb_per_s,
                        m.mb_per_s,
                        e * 100.0,
                        m.bound,
                        steal.map_or("unknown".into(), |s| format!("{s:.0} %")),
                        if steal.unwrap_or(0.0) >= DISTURBED_STEAL_PCT {
                            "the hypervisor stole CPU time during the run, disturbing its timing"
                        } else {
                            "a mix is modelled from two calibration sizes per direction; see the notes"
                        }
                    ));
                }
            }
        }
        out
    }

    /// Cells that have a model prediction.
    pub fn modelled(&self) -> usize {
        self.tcp.len()
            + self
                .tables
                .iter()
                .flat_map(|t| &t.cells)
                .filter(|c| c.model.is_some())
                .count()
            + self
                .workloads
                .iter()
                .flat_map(|w| &w.models)
                .filter(|m| m.is_some())
                .count()
    }

    /// Text tables as printed.
    pub fn text(&self) -> String {
        let mut s = format!("{}: {}\n", self.reproduction, self.description);
        if let Some(f) = self.comparison.as_ref().and_then(|c| c.fit.as_ref()) {
            s.push_str(&published::render::fit_line(f));
        }
        if let Some(st) = self.steal_pct {
            s.push_str(&format!(
                "host CPU stolen by the hypervisor during the run: {st:.1} % (above a few percent, timings are disturbed)\n"
            ));
        }
        let again = self
            .tables
            .iter()
            .flat_map(|t| &t.cells)
            .filter(|c| c.runs > 1)
            .count();
        if again > 0 {
            s.push_str(&format!(
                "{again} cells lost at least {DISTURBED_STEAL_PCT} % of the CPU to the hypervisor and were measured again; each shows its least disturbed run (chosen by steal, not by result)\n"
            ));
        }
        if !self.tcp.is_empty() {
            s.push_str("\nTCP throughput, MB/s (model in parentheses)\n");
            s.push_str(&format!("{:<8} {:<10}", "rtt", "window"));
            for d in ["up", "down"] {
                s.push_str(&format!(" {d:>16}"));
            }
            s.push('\n');
            let mut keys: Vec<(String, u32)> = Vec::new();
            for t in &self.tcp {
                let k = (format!("{}ms", t.rtt_ms), t.window);
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            for (rtt, w) in keys {
                s.push_str(&format!("{rtt:<8} {:<10}", format_size(u64::from(w))));
                for d in ["up", "down"] {
                    let v = self
                        .tcp
                        .iter()
                        .find(|t| {
                            format!("{}ms", t.rtt_ms) == rtt && t.window == w && t.direction == d
                        })
                        .map_or("-".to_owned(), |t| {
                            format!("{:.2} ({:.2})", t.measured_mb_per_s, t.model_mb_per_s)
                        });
                    s.push_str(&format!(" {v:>16}"));
                }
                s.push('\n');
            }
        }
        for tb in &self.tables {
            s.push_str(&format!("\n{} — MB/s (model in parentheses)\n", tb.title));
            s.push_str(&sweep::table(&tb.cells, &tb.rows, &tb.cols));
        }
        for w in &self.workloads {
            s.push_str(&format!("\n{}\n", w.title));
            s.push_str(&ironlun_bench::output::table(&w.results));
            for (r, model, _) in w.rows() {
                if let Some(m) = model {
                    s.push_str(&format!(
                        "  model {:<28} {:>8.1} MB/s measured, {:>8.1} model ({})\n",
                        r.name, r.mb_per_s, m.mb_per_s, m.bound
                    ));
                }
            }
        }
        if !self.fs_rows.is_empty() {
            s.push_str(&format!("\n{FS_TITLE}\n"));
            s.push_str(&fs_rows::table(&self.fs_rows));
        }
        if !self.peers.is_empty() {
            s.push_str(&format!("\n{PEERS_TITLE}\n"));
            s.push_str(&super::peers::table(&self.peers));
        }
        if let Some(i) = &self.initiators {
            s.push_str(&i.text());
        }
        for n in &self.notes {
            s.push_str(&format!("\nnote: {n}\n"));
        }
        if let Some(c) = &self.comparison {
            s.push_str(&published::render::text(c));
        }
        s
    }

    /// The workload runs as bench reports (for ironlun-bench's HTML).
    pub fn workload_reports(&self) -> Vec<ironlun_bench::RunReport> {
        self.workloads
            .iter()
            .map(|w| {
                ironlun_bench::RunReport::new(
                    format!("ironlun reproduce {}", self.reproduction),
                    String::new(),
                    Some(w.title.clone()),
                    w.results.clone(),
                )
            })
            .collect()
    }

    /// The HTML report.
    pub fn html(&self) -> String {
        let mut sections: Vec<Section<'_>> = self
            .tables
            .iter()
            .map(|t| Section {
                title: t.title.clone(),
                note: String::new(),
                results: &t.cells,
                rows: t.rows.clone(),
                cols: t.cols.clone(),
            })
            .collect();
        let mut tcp_note =
            String::from("TCP baseline (tcpbench through the relay), MB/s measured / model: ");
        for t in &self.tcp {
            tcp_note.push_str(&format!(
                "{} rtt {} ms window {} = {:.2} / {:.2}; ",
                t.direction,
                t.rtt_ms,
                format_size(u64::from(t.window)),
                t.measured_mb_per_s,
                t.model_mb_per_s
            ));
        }
        sections.insert(
            0,
            Section {
                title: "TCP baseline".into(),
                note: tcp_note,
                results: &[],
                rows: Vec::new(),
                cols: Vec::new(),
            },
        );
        let out = self.outliers(0.25);
        let outliers = if out.is_empty() {
            format!(
                "All {} modelled cells are within 25 % of their model.",
                self.modelled()
            )
        } else {
            format!(
                "{} of {} modelled cells are more than 25 % from their model: {}",
                out.len(),
                self.modelled(),
                out.join("; ")
            )
        };
        if !self.fs_rows.is_empty() {
            let rows: Vec<String> = self
                .fs_rows
                .iter()
                .map(|r| {
                    format!(
                        "{} on {}: {:.1} MB/s ({:.2} s)",
                        r.label, r.backend, r.mb_per_s, r.seconds
                    )
                })
                .collect();
            sections.push(Section {
                title: FS_TITLE.into(),
                note: rows.join("; "),
                results: &[],
                rows: Vec::new(),
                cols: Vec::new(),
            });
        }
        if !self.peers.is_empty() {
            sections.push(Section {
                title: PEERS_TITLE.into(),
                note: super::peers::summary(&self.peers),
                results: &[],
                rows: Vec::new(),
                cols: Vec::new(),
            });
        }
        if let Some(i) = &self.initiators {
            sections.push(Section {
                title: i.title(),
                note: i.summary(),
                results: &[],
                rows: Vec::new(),
                cols: Vec::new(),
            });
        }
        sections.push(Section {
            title: "Cells far from the model".into(),
            note: outliers,
            results: &[],
            rows: Vec::new(),
            cols: Vec::new(),
        });
        let intro = format!(
            "{} ({:.0} s; host CPU stolen by the hypervisor: {}). {}",
            self.description,
            self.elapsed_s,
            self.steal_pct
                .map_or("unknown".into(), |s| format!("{s:.1} %")),
            self.notes.join(" ")
        );
        let comparison = match &self.comparison {
            Some(c) => published::render::html(c),
            None => String::new(),
        };
        crate::report::html_with(
            &format!("ironlun reproduce {}", self.reproduction),
            &intro,
            &comparison,
            &sections,
        )
    }
}

/// Heading of the file-system rows, wherever they appear.
const FS_TITLE: &str = "Through ext4 on the Linux kernel initiator in an emulated VM (QEMU; guest clock; bounded by the emulation, not the target)";

/// Heading of the other targets' rows.
const PEERS_TITLE: &str = "Other targets, dd-style sequential 512 KiB, queue depth 1, 1 Gbit/s (MB/s; tgt stands in for STGT, istgt for IET, `ironlun target` serves ironlun's block and FILEIO rows; same initiator and link as ironlun's rows)";

/// Why a cell may be far from its model (a reading of the evidence, not
/// a proof).
fn explain(c: &CellResult, error: f64) -> &'static str {
    let steal = c.measured.steal_pct.unwrap_or(0.0);
    let small = c.cell.bs <= 8192;
    let many = c.cell.qd * c.cell.workers * c.cell.sessions >= 8;
    if steal >= DISTURBED_STEAL_PCT {
        "the hypervisor stole CPU time during the cell, disturbing its timing"
    } else if error < 0.0 && small && many {
        "host-bound: many small commands keep both cores busy (initiator, target and the relay pacing every delivery); the model's host rate is measured through an unpaced relay and overstates it"
    } else if small && c.cell.qd == 1 {
        "per-command host time dominates; the model's t0 comes from a 0.3 s calibration run whose median response time varies from run to run on this machine"
    } else {
        "not explained by host steal or host-bound small requests"
    }
}
