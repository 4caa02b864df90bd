//! A declarative sweep: a base cell, axes of values for any parameters,
//! the cross product run in an order that reuses sessions, and results
//! shaped like the published tables.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ironlun_units::{parse_duration, parse_rate, parse_size};
use serde::{Deserialize, Serialize};

use crate::cell::{Cell, Digest, Op, SizeKey, PARAMS};
use crate::model::{predict, Calibration, Prediction};
use crate::report::Section;
use crate::runner::{Lab, Measured};

/// Most cells one sweep may have.
pub const MAX_CELLS: usize = 2000;

/// Sets one named parameter from its text form.
pub fn set_param(cell: &mut Cell, name: &str, value: &str) -> Result<(), String> {
    let v = value.trim();
    let size32 = |v: &str| -> Result<u32, String> {
        let n = parse_size(v)?;
        u32::try_from(n).map_err(|_| format!("{v} is too large"))
    };
    let opt_size = |v: &str| -> Result<Option<u32>, String> {
        if matches!(v, "default" | "none") {
            Ok(None)
        } else {
            size32(v).map(Some)
        }
    };
    let num = |v: &str| -> Result<u32, String> {
        v.parse::<u32>()
            .map_err(|_| format!("'{v}' is not a number"))
    };
    let r: Result<(), String> = (|| {
        match name {
            "op" => cell.op = Op::parse(v)?,
            "bs" => cell.bs = size32(v)?,
            "qd" => cell.qd = num(v)?,
            "random" => cell.random = num(v)?,
            "read" => cell.read = Some(num(v)?),
            "workers" => cell.workers = num(v)?,
            "rtt" => cell.rtt = parse_duration(v)?,
            "link_rate" => cell.link_rate = parse_rate(v)?,
            "tcp_window" => cell.tcp_window = opt_size(v)?,
            _ if SizeKey::named(name).is_some() => {
                if let Some(k) = SizeKey::named(name) {
                    *(k.slot)(cell) = opt_size(v)?;
                }
            }
            "digest" => cell.digest = Digest::parse(v)?,
            "sessions" => cell.sessions = num(v)?,
            "backend" => cell.backend = v.to_owned(),
            "connections" => {
                if v != "1" {
                    return Err("several connections per session (MC/S) are not supported: ironlun negotiates MaxConnections=1".into());
                }
            }
            _ => {
                return Err(format!(
                    "unknown parameter (one of: {}, connections)",
                    PARAMS.join(", ")
                ))
            }
        }
        Ok(())
    })();
    r.map_err(|e| format!("{name} = {value}: {e}"))
}

/// A sweep: what to vary, how long each cell runs, how to tabulate.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// Title for tables and the report.
    #[serde(default)]
    pub title: Option<String>,
    /// Measured time per cell (default 1s).
    #[serde(default)]
    pub time: Option<String>,
    /// Ramp-up per cell (default a fifth of the time).
    #[serde(default)]
    pub ramp: Option<String>,
    /// Parameters that label table rows and columns.
    #[serde(default)]
    pub rows: Vec<String>,
    #[serde(default)]
    pub cols: Vec<String>,
    /// Values every cell starts from.
    #[serde(default)]
    pub base: BTreeMap<String, toml::Value>,
    /// Parameters and the values they take, crossed in file order.
    #[serde(default)]
    pub axes: toml::Table,
}

impl SweepFile {
    /// Reads a sweep file's TOML.
    pub fn parse(text: &str) -> Result<SweepFile, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Sets a base value (as `[base] param = "value"` would).
    pub fn set(&mut self, param: &str, value: &str) {
        self.base.insert(
            param.trim().to_owned(),
            toml::Value::String(value.trim().to_owned()),
        );
    }

    /// Adds an axis, crossed after those already there (as
    /// `[axes] param = [values]` would).
    pub fn vary(&mut self, param: &str, values: Vec<String>) {
        let values = values.into_iter().map(toml::Value::String).collect();
        self.axes
            .insert(param.trim().to_owned(), toml::Value::Array(values));
    }
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A sweep ready to run.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub title: String,
    pub base: Cell,
    pub axes: Vec<(String, Vec<String>)>,
    pub time: Duration,
    pub ramp: Duration,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
}

impl Sweep {
    pub fn from_file(f: &SweepFile) -> Result<Sweep, String> {
        let mut base = Cell::default();
        for (k, v) in &f.base {
            set_param(&mut base, k, &value_text(v))?;
        }
        let mut axes = Vec::new();
        for (k, v) in &f.axes {
            let vals: Vec<String> = match v {
                toml::Value::Array(a) => a.iter().map(value_text).collect(),
                one => vec![value_text(one)],
            };
            axes.push((k.clone(), vals));
        }
        let time = parse_duration(f.time.as_deref().unwrap_or("1s"))?;
        let ramp = match &f.ramp {
            Some(r) => parse_duration(r)?,
            None => time / 5,
        };
        let s = Sweep {
            title: f.title.clone().unwrap_or_else(|| "sweep".into()),
            base,
            axes,
            time,
            ramp,
            rows: f.rows.clone(),
            cols: f.cols.clone(),
        };
        s.check()?;
        Ok(s)
    }

    pub fn check(&self) -> Result<(), String> {
        if self.time.is_zero() || self.time > Duration::from_secs(600) {
            return Err("time per cell: more than 0, at most 10 min".into());
        }
        for p in self.rows.iter().chain(&self.cols) {
            if !PARAMS.contains(&p.as_str()) {
                return Err(format!("rows/cols: unknown parameter '{p}'"));
            }
        }
        let cells = self.cells()?;
        if cells.len() > MAX_CELLS {
            return Err(format!(
                "{} cells: a sweep may have at most {MAX_CELLS}",
                cells.len()
            ));
        }
        Ok(())
    }

    /// Every cell, in axis order (the last axis varies fastest).
    pub fn cells(&self) -> Result<Vec<Cell>, String> {
        let mut cells = vec![self.base.clone()];
        for (name, values) in &self.axes {
            if values.is_empty() {
                return Err(format!("axis {name} has no values"));
            }
            let mut next = Vec::with_capacity(cells.len() * values.len());
            for c in &cells {
                for v in values {
                    let mut c = c.clone();
                    set_param(&mut c, name, v)?;
                    next.push(c);
                    if next.len() > MAX_CELLS {
                        return Err(format!("a sweep may have at most {MAX_CELLS} cells"));
                    }
                }
            }
            cells = next;
        }
        for c in &cells {
            c.validate()?;
        }
        Ok(cells)
    }

    /// Parameters that vary (the axes), for records and default tables.
    pub fn swept(&self) -> Vec<String> {
        self.axes.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Where the sweep does not say how to tabulate: the first axis down,
    /// the others across.
    pub fn default_layout(&mut self) {
        let swept = self.swept();
        if self.rows.is_empty() {
            self.rows = swept.first().cloned().into_iter().collect();
        }
        if self.cols.is_empty() {
            self.cols = swept.iter().skip(1).cloned().collect();
        }
    }

    /// The results file: `{"sweep": title, "cells": [CellResult, ...]}`.
    pub fn json(&self, results: &[CellResult]) -> Result<String, String> {
        let v = serde_json::json!({ "sweep": self.title, "cells": results });
        serde_json::to_string_pretty(&v).map_err(|e| e.to_string())
    }

    /// The HTML report: the table of `results` with its charts.
    pub fn html(&self, results: &[CellResult]) -> String {
        let sec = Section {
            title: self.title.clone(),
            note: String::new(),
            results,
            rows: self.rows.clone(),
            cols: self.cols.clone(),
        };
        crate::report::html(
            &self.title,
            "ironlun sweep against an embedded target.",
            &[sec],
        )
    }
}

/// One cell's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct CellResult {
    /// Every parameter of the cell, as text.
    pub params: BTreeMap<String, String>,
    #[serde(flatten)]
    pub measured: Measured,
    pub model: Option<Prediction>,
    /// measured / model − 1.
    pub model_error: Option<f64>,
    /// Times the cell was measured (more than one when a run was
    /// disturbed by host steal and measured again; the run with the
    /// least steal is the one reported).
    pub runs: u32,
    #[serde(skip)]
    pub cell: Cell,
}

impl CellResult {
    /// Takes `m`, a new measurement of the same cell, if the hypervisor
    /// stole less CPU during it than during the one held. Which run is
    /// kept depends on steal alone, never on the result.
    pub fn remeasured(&mut self, m: Measured) {
        self.runs += 1;
        let steal = |m: &Measured| m.steal_pct.unwrap_or(f64::INFINITY);
        if steal(&m) < steal(&self.measured) {
            self.model_error = self
                .model
                .as_ref()
                .filter(|p| p.mb_per_s > 0.0)
                .map(|p| m.mb_per_s / p.mb_per_s - 1.0);
            self.measured = m;
        }
    }
}

/// Progress: (cells done, cells in all, the cell just measured).
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &CellResult);

/// Per-cell time: long enough for enough commands when round trips are
/// long (at least 15 predicted cycles), capped at 3× the base; and a
/// ramp that covers filling the pipeline (the predicted response time
/// with the whole window outstanding), so the interval is steady state.
pub fn cell_time(base: Duration, cell: &Cell, p: Option<&Prediction>) -> (Duration, Duration) {
    let cycle = p.map_or(0.0, |p| p.cycle_ms / 1e3);
    let fill = p.filter(|p| p.mb_per_s > 0.0).map_or(0.0, |p| {
        f64::from(cell.depth()) * f64::from(cell.sessions) * f64::from(cell.bs) / (p.mb_per_s * 1e6)
    });
    let b = base.as_secs_f64();
    let t = b.max(15.0 * cycle).min(b * 3.0);
    let ramp = (t / 5.0).max(2.0 * cycle).max(1.5 * fill).min(t);
    (Duration::from_secs_f64(t), Duration::from_secs_f64(ramp))
}

/// Runs every cell (in an order that reuses sessions; results come back
/// in cell order) and the model beside each.
pub fn run(
    sweep: &Sweep,
    lab: &mut Lab,
    calibration: Option<&Calibration>,
    progress: Progress<'_>,
) -> Result<Vec<CellResult>, String> {
    run_cells(&sweep.cells()?, sweep.time, lab, calibration, progress)
}

/// Runs `cells` (a sweep's, perhaps changed after calibration: a fitted
/// profile imposed) for `base_time` each, as [`run`].
pub fn run_cells(
    cells: &[Cell],
    base_time: Duration,
    lab: &mut Lab,
    calibration: Option<&Calibration>,
    progress: Progress<'_>,
) -> Result<Vec<CellResult>, String> {
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by_key(|&i| cells.get(i).map(Cell::connection_key));
    let mut out: Vec<Option<CellResult>> = vec![None; cells.len()];
    let started = Instant::now();
    for (done, &i) in order.iter().enumerate() {
        let Some(cell) = cells.get(i) else { continue };
        let model = calibration.map(|cal| predict(cell, cal.get(cell)));
        let (time, ramp) = cell_time(base_time, cell, model.as_ref());
        let measured = lab.run(cell, time, ramp, false)?;
        let mut params = BTreeMap::new();
        for p in PARAMS {
            if let Some(v) = cell.param(p) {
                params.insert(p.to_owned(), v);
            }
        }
        let model_error = model
            .as_ref()
            .filter(|m| m.mb_per_s > 0.0)
            .map(|m| measured.mb_per_s / m.mb_per_s - 1.0);
        let r = CellResult {
            params,
            measured,
            model,
            model_error,
            runs: 1,
            cell: cell.clone(),
        };
        progress(done + 1, cells.len(), &r);
        if let Some(slot) = out.get_mut(i) {
            *slot = Some(r);
        }
    }
    lab.close();
    tracing::info!(
        "sweep of {} cells took {:?}",
        cells.len(),
        started.elapsed()
    );
    Ok(out.into_iter().flatten().collect())
}

/// The label of a cell along some parameters: the value alone for one
/// parameter, `name=value ...` for several.
pub fn cell_key(r: &CellResult, names: &[String]) -> String {
    names
        .iter()
        .map(|n| {
            let v = r.params.get(n).cloned().unwrap_or_default();
            if names.len() > 1 {
                format!("{n}={v}")
            } else {
                v
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The distinct labels of `results` along `names`, in first-seen order.
pub fn first_seen(results: &[CellResult], names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in results {
        let k = cell_key(r, names);
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// A table of MB/s: one row per combination of `rows` values, one column
/// per combination of `cols` values, in first-seen order; each entry
/// "measured (model)" when a model is present.
pub fn table(results: &[CellResult], rows: &[String], cols: &[String]) -> String {
    let row_keys = first_seen(results, rows);
    let col_keys = first_seen(results, cols);
    let mut cellmap: BTreeMap<(String, String), String> = BTreeMap::new();
    for r in results {
        let (rk, ck) = (cell_key(r, rows), cell_key(r, cols));
        let text = match &r.model {
            Some(m) => format!("{:.2} ({:.2})", r.measured.mb_per_s, m.mb_per_s),
            None => format!("{:.2}", r.measured.mb_per_s),
        };
        cellmap.insert((rk, ck), text);
    }
    let head = if rows.is_empty() {
        "".to_owned()
    } else {
        rows.join(",")
    };
    let w0 = row_keys
        .iter()
        .map(String::len)
        .chain([head.len()])
        .max()
        .unwrap_or(4);
    let widths: Vec<usize> = col_keys
        .iter()
        .map(|c| {
            row_keys
                .iter()
                .filter_map(|r| cellmap.get(&(r.clone(), c.clone())).map(String::len))
                .chain([c.len()])
                .max()
                .unwrap_or(8)
        })
        .collect();
    let mut s = format!("{head:<w0$}");
    for (c, w) in col_keys.iter().zip(&widths) {
        s.push_str(&format!("  {c:>w$}"));
    }
    s.push('\n');
    for r in &row_keys {
        s.push_str(&format!("{r:<w0$}"));
        for (c, w) in col_keys.iter().zip(&widths) {
            let v = cellmap
                .get(&(r.clone(), c.clone()))
                .map_or("-", String::as_str);
            s.push_str(&format!("  {v:>w$}"));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(text: &str) -> Result<Sweep, String> {
        Sweep::from_file(&SweepFile::parse(text)?)
    }

    #[test]
    fn values_set_and_varied_by_hand_and_the_default_layout() {
        let mut f = SweepFile::parse("title = \"t\"").unwrap();
        f.set(" op ", " read ");
        f.vary("bs", vec!["4KiB".into(), "8KiB".into()]);
        f.vary("qd", vec!["1".into(), "8".into()]);
        let mut s = Sweep::from_file(&f).unwrap();
        let cells = s.cells().unwrap();
        assert_eq!(cells.len(), 4);
        assert!(cells.iter().all(|c| c.op == Op::Read));
        assert_eq!((cells[1].bs, cells[1].qd), (4096, 8));
        s.default_layout();
        assert_eq!(
            (s.rows.clone(), s.cols.clone()),
            (vec!["bs".into()], vec!["qd".into()])
        );
        // A layout given is kept.
        s.rows = vec!["qd".into()];
        s.cols = vec!["bs".into()];
        s.default_layout();
        assert_eq!(s.rows, ["qd"]);
        assert!(SweepFile::parse("bogus = 1").is_err());
    }

    #[test]
    fn axes_cross_in_order_and_parameters_parse() {
        let s = sweep(
            r#"
            time = "500ms"
            rows = ["bs"]
            cols = ["rtt", "qd"]
            [base]
            op = "solicited-write"
            link_rate = "155Mbit"
            tcp_window = "10MB"
            [axes]
            bs = ["1KiB", "8KiB"]
            qd = [1, 32]
            rtt = ["0ms", "50ms"]
            "#,
        )
        .unwrap();
        let cells = s.cells().unwrap();
        assert_eq!(cells.len(), 8);
        assert_eq!(cells[0].bs, 1024);
        assert_eq!(cells[1].rtt, Duration::from_millis(50));
        assert_eq!(cells[2].qd, 32);
        assert!(cells.iter().all(|c| c.op == Op::SolicitedWrite
            && c.link_rate == Some(155_000_000)
            && c.tcp_window == Some(10_000_000)));
        assert_eq!(s.time, Duration::from_millis(500));
        assert_eq!(s.ramp, Duration::from_millis(100));
    }

    #[test]
    fn bad_sweeps_say_what_is_wrong() {
        assert!(sweep("[axes]\nbs = [\"3\"]").unwrap_err().contains("bs 3"));
        assert!(sweep("[axes]\nbs = [\"lots\"]")
            .unwrap_err()
            .contains("bs = lots"));
        assert!(sweep("[axes]\nwidth = [1]")
            .unwrap_err()
            .contains("unknown parameter"));
        assert!(sweep("[axes]\nconnections = [2]")
            .unwrap_err()
            .contains("MC/S"));
        assert!(sweep("rows = [\"colour\"]").unwrap_err().contains("colour"));
        assert!(sweep("[axes]\nqd = [0]").unwrap_err().contains("qd"));
        assert!(sweep("[axes]\nbs = []").unwrap_err().contains("no values"));
        let many = format!(
            "[axes]\nqd = [{}]\nbs = [{}]",
            vec!["1"; 50].join(","),
            vec!["512"; 50].join(",")
        );
        assert!(sweep(&many).unwrap_err().contains("at most"));
    }

    #[test]
    fn a_remeasured_cell_keeps_the_run_with_less_steal_whatever_it_measured() {
        let run = |mb: f64, steal: Option<f64>| Measured {
            mb_per_s: mb,
            steal_pct: steal,
            ..Measured::default()
        };
        let cell = Cell {
            link_rate: Some(155_000_000),
            ..Cell::default()
        };
        let mut r = CellResult {
            params: BTreeMap::new(),
            measured: run(5.0, Some(30.0)),
            model: Some(predict(&cell, None)),
            model_error: None,
            runs: 1,
            cell,
        };
        let model = r.model.as_ref().map_or(0.0, |m| m.mb_per_s);
        assert!(model > 0.0);
        // Less steal: taken, though further from the model.
        r.remeasured(run(1.0, Some(2.0)));
        assert_eq!((r.runs, r.measured.mb_per_s), (2, 1.0));
        assert_eq!(r.model_error, Some(1.0 / model - 1.0));
        // More steal: kept out, though it matches the model exactly.
        r.remeasured(run(model, Some(9.0)));
        assert_eq!((r.runs, r.measured.mb_per_s), (3, 1.0));
        // Unknown steal never replaces a known one.
        r.remeasured(run(model, None));
        assert_eq!(r.measured.mb_per_s, 1.0);
    }

    #[test]
    fn tables_put_rows_and_columns_where_asked() {
        let mk = |bs: &str, qd: &str, v: f64| CellResult {
            params: [
                ("bs".to_owned(), bs.to_owned()),
                ("qd".to_owned(), qd.to_owned()),
            ]
            .into_iter()
            .collect(),
            measured: Measured {
                mb_per_s: v,
                ..Measured::default()
            },
            model: None,
            model_error: None,
            runs: 1,
            cell: Cell::default(),
        };
        let t = table(
            &[
                mk("1KiB", "1", 1.5),
                mk("1KiB", "32", 9.0),
                mk("8KiB", "1", 2.25),
            ],
            &["bs".into()],
            &["qd".into()],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("bs") && lines[0].contains('1') && lines[0].contains("32"));
        assert!(
            lines[1].starts_with("1KiB") && lines[1].contains("1.50") && lines[1].contains("9.00")
        );
        assert!(lines[2].starts_with("8KiB") && lines[2].trim_end().ends_with('-'));
    }
}
