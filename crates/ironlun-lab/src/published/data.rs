//! The published values as data: the schema of
//! `testdata/published/<study>.toml`, its units and metrics, and the
//! checks every file must pass (known units for each metric, a complete
//! location for each cell, no cell listed twice).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// How many cells one study file may hold.
pub const MAX_CELLS: usize = 1000;

/// A unit a study printed a value in (the fixed set; anything else is
/// refused when the file is read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub enum Unit {
    /// 10^6 bytes per second.
    #[serde(rename = "MB/s")]
    MbPerS,
    /// 2^20 bytes per second.
    #[serde(rename = "MiB/s")]
    MibPerS,
    #[serde(rename = "IOPS")]
    Iops,
    /// Events per second other than I/Os (IOMeter's transactions and
    /// connections).
    #[serde(rename = "1/s")]
    PerS,
    #[serde(rename = "ms")]
    Ms,
    #[serde(rename = "us")]
    Us,
    #[serde(rename = "s")]
    S,
    #[serde(rename = "%")]
    Pct,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::MbPerS => "MB/s",
            Unit::MibPerS => "MiB/s",
            Unit::Iops => "IOPS",
            Unit::PerS => "1/s",
            Unit::Ms => "ms",
            Unit::Us => "us",
            Unit::S => "s",
            Unit::Pct => "%",
        }
    }

    /// The unit values of this kind are compared in (MB/s for
    /// throughput, µs for times below a second), and the factor that
    /// takes a value there.
    pub fn canonical(self) -> (Unit, f64) {
        match self {
            Unit::MibPerS => (Unit::MbPerS, 1_048_576.0 / 1e6),
            Unit::Ms => (Unit::Us, 1e3),
            u => (u, 1.0),
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a value measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    Throughput,
    ReadThroughput,
    WriteThroughput,
    Iops,
    ReadIops,
    WriteIops,
    Transactions,
    Connections,
    /// Mean response time.
    Latency,
    ReadLatency,
    WriteLatency,
    TransactionTime,
    /// A disk benchmark's mean random access time.
    AccessTime,
    /// Host CPU utilisation.
    Cpu,
    /// Total time of a fixed job.
    Duration,
    /// A percentage one result is above (or below) another.
    Gain,
    /// Share of a link's capacity in use.
    Utilisation,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::ReadThroughput => "read-throughput",
            Metric::WriteThroughput => "write-throughput",
            Metric::Iops => "iops",
            Metric::ReadIops => "read-iops",
            Metric::WriteIops => "write-iops",
            Metric::Transactions => "transactions",
            Metric::Connections => "connections",
            Metric::Latency => "latency",
            Metric::ReadLatency => "read-latency",
            Metric::WriteLatency => "write-latency",
            Metric::TransactionTime => "transaction-time",
            Metric::AccessTime => "access-time",
            Metric::Cpu => "cpu",
            Metric::Duration => "duration",
            Metric::Gain => "gain",
            Metric::Utilisation => "utilisation",
        }
    }

    /// The units a value of this metric may be given in.
    pub fn units(self) -> &'static [Unit] {
        use Metric::*;
        match self {
            Throughput | ReadThroughput | WriteThroughput => &[Unit::MbPerS, Unit::MibPerS],
            Iops | ReadIops | WriteIops => &[Unit::Iops],
            Transactions | Connections => &[Unit::PerS],
            Latency | ReadLatency | WriteLatency | TransactionTime | AccessTime => {
                &[Unit::Ms, Unit::Us]
            }
            Duration => &[Unit::S],
            Cpu | Gain | Utilisation => &[Unit::Pct],
        }
    }

    /// The unit measured values of this metric are given in.
    pub fn canonical_unit(self) -> Unit {
        self.units().first().map_or(Unit::Pct, |u| u.canonical().0)
    }
}

/// Where a value stands in the published text: a table's row and column,
/// or a section's paragraph for a number given in the running text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Where {
    pub section: Option<String>,
    pub page: Option<u32>,
    pub table: Option<String>,
    pub row: Option<String>,
    pub column: Option<String>,
    /// Which paragraph, in a few words of our own.
    pub paragraph: Option<String>,
}

impl Where {
    /// A table cell needs its row and column; a number in the text needs
    /// its section (or page) and paragraph.
    pub fn check(&self) -> Result<(), String> {
        let named = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.trim().is_empty());
        if named(&self.table) {
            if named(&self.row) && named(&self.column) {
                return Ok(());
            }
            return Err(format!("{self}: a table cell needs its row and column"));
        }
        if (named(&self.section) || self.page.is_some()) && named(&self.paragraph) {
            return Ok(());
        }
        Err(format!(
            "{self}: needs a table with row and column, or a section (or page) and paragraph"
        ))
    }
}

impl fmt::Display for Where {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(t) = &self.table {
            parts.push(t.clone());
        }
        if let Some(r) = &self.row {
            parts.push(format!("row {r}"));
        }
        if let Some(c) = &self.column {
            parts.push(format!("column {c}"));
        }
        if let Some(p) = &self.paragraph {
            parts.push(format!("text: {p}"));
        }
        if let Some(s) = &self.section {
            parts.push(format!("section {s}"));
        }
        if let Some(p) = self.page {
            parts.push(format!("page {p}"));
        }
        if parts.is_empty() {
            return f.write_str("(nowhere)");
        }
        f.write_str(&parts.join(", "))
    }
}

/// One published value.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedCell {
    pub metric: Metric,
    /// The value as printed (exclusive with `range`).
    pub value: Option<f64>,
    /// A range as printed, low and high (compared at its midpoint).
    pub range: Option<[f64; 2]>,
    pub unit: Unit,
    /// Printed as "about", "around" or "~".
    #[serde(default)]
    pub approx: bool,
    #[serde(rename = "where")]
    pub at: Where,
    /// Other places the text gives the same value.
    #[serde(default)]
    pub also: Vec<Where>,
    /// What identifies the cell (block size, operation, queue depth,
    /// round trip, target, ...), in the vocabulary the reproduction's
    /// measured rows use.
    pub conditions: BTreeMap<String, String>,
    pub note: Option<String>,
}

impl PublishedCell {
    /// The value to compare, in its metric's canonical unit: the printed
    /// value, or a range's midpoint.
    pub fn canonical(&self) -> Option<f64> {
        let (_, k) = self.unit.canonical();
        match (self.value, self.range) {
            (Some(v), None) => Some(v * k),
            (None, Some([lo, hi])) => Some((lo + hi) / 2.0 * k),
            _ => None,
        }
    }

    /// As printed, with its unit ("94-98 MiB/s", "about 165 MiB/s").
    pub fn as_printed(&self) -> String {
        let v = match (self.value, self.range) {
            (Some(v), _) => format!("{v}"),
            (None, Some([lo, hi])) => format!("{lo}-{hi}"),
            _ => "?".into(),
        };
        format!(
            "{}{v} {}",
            if self.approx { "about " } else { "" },
            self.unit
        )
    }

    /// "k=v, k=v" in key order.
    pub fn conditions_text(&self) -> String {
        conditions_text(&self.conditions)
    }

    fn check(&self) -> Result<(), String> {
        let at = &self.at;
        at.check()?;
        for a in &self.also {
            a.check()?;
        }
        if !self.metric.units().contains(&self.unit) {
            return Err(format!(
                "{at}: {} is not a unit of {} (one of: {})",
                self.unit,
                self.metric.name(),
                self.metric
                    .units()
                    .iter()
                    .map(|u| u.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let values = match (self.value, self.range) {
            (Some(v), None) => vec![v],
            (None, Some([lo, hi])) if lo <= hi => vec![lo, hi],
            (None, Some(_)) => return Err(format!("{at}: a range runs from low to high")),
            _ => return Err(format!("{at}: give either value or range")),
        };
        for v in values {
            if !v.is_finite() || (v < 0.0 && self.metric != Metric::Gain) {
                return Err(format!("{at}: {v} is not a {} value", self.metric.name()));
            }
        }
        if self.conditions.is_empty() {
            return Err(format!("{at}: no conditions identify the cell"));
        }
        Ok(())
    }
}

/// Declares that one of the lab's condition values stands beside a
/// published one (ironlun's target for the study's ISCSI-SCST, say).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StandIn {
    pub key: String,
    pub published: String,
    pub measured: String,
    pub why: String,
}

/// Which cells the testbed profile is fitted on (`crate::testbed`): a
/// cell is a training cell when its conditions hold every key and value
/// of one of the `training` entries; every other cell is held out.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FitDecl {
    /// Why these cells: what each entry pins down.
    pub why: String,
    pub training: Vec<BTreeMap<String, String>>,
}

impl FitDecl {
    /// Whether `conditions` are in the training subset.
    pub fn is_training(&self, conditions: &BTreeMap<String, String>) -> bool {
        self.training
            .iter()
            .any(|t| t.iter().all(|(k, v)| conditions.get(k) == Some(v)))
    }

    /// Each entry names something and matches at least one cell (a typo
    /// would silently leave a cell out of training).
    fn check(&self, cells: &[PublishedCell]) -> Result<(), String> {
        if self.training.is_empty() {
            return Err("fit: no training entries".into());
        }
        for t in &self.training {
            if t.is_empty() {
                return Err("fit: an empty training entry would take every cell".into());
            }
            let hit = cells
                .iter()
                .any(|c| t.iter().all(|(k, v)| c.conditions.get(k) == Some(v)));
            if !hit {
                return Err(format!(
                    "fit: training entry {} matches no cell",
                    conditions_text(t)
                ));
            }
        }
        Ok(())
    }
}

/// A level the study drew to judge its rows, which is not a result (the
/// initiator study's 8 % CPU line): its value, the host it was drawn
/// for, and how the study applied it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    pub name: String,
    pub metric: Metric,
    pub value: f64,
    pub unit: Unit,
    /// CPUs of the host a CPU % line was drawn on (the % is of all of
    /// them, averaged).
    pub host_cpus: Option<u32>,
    /// How the study read a row against it, in our words.
    pub meaning: String,
    #[serde(rename = "where")]
    pub at: Where,
}

/// One published column of a condition (an initiator, say): what it
/// was, and whether this lab has its hardware. A column whose hardware
/// the lab lacks is shown as published only.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Column {
    pub key: String,
    pub value: String,
    pub label: String,
    pub in_lab: bool,
    pub why: String,
}

/// One study's published values.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFile {
    /// As `ironlun reproduce` names it.
    pub study: String,
    /// Which text, in a line.
    pub source: String,
    /// The units the text uses and how they were read.
    pub convention: String,
    #[serde(default)]
    pub stand_in: Vec<StandIn>,
    /// The testbed profile's training subset.
    pub fit: Option<FitDecl>,
    /// Levels the study judged its rows by.
    #[serde(default)]
    pub threshold: Vec<Threshold>,
    /// What each published column of a condition was.
    #[serde(default)]
    pub column: Vec<Column>,
    pub cell: Vec<PublishedCell>,
}

impl StudyFile {
    /// Reads and checks a file's text.
    pub fn parse(text: &str) -> Result<StudyFile, String> {
        let f: StudyFile = toml::from_str(text).map_err(|e| e.to_string())?;
        f.check()?;
        Ok(f)
    }

    /// Every cell complete; no two cells with the same metric and
    /// conditions, none with the same table cell.
    pub fn check(&self) -> Result<(), String> {
        let names = crate::reproduce::NAMES;
        if !names.iter().any(|(n, _)| *n == self.study) {
            return Err(format!("unknown study '{}'", self.study));
        }
        if self.cell.is_empty() || self.cell.len() > MAX_CELLS {
            return Err(format!(
                "{}: {} cells (1 to {MAX_CELLS})",
                self.study,
                self.cell.len()
            ));
        }
        let mut keys = BTreeSet::new();
        let mut places = BTreeSet::new();
        for c in &self.cell {
            c.check().map_err(|e| format!("{}: {e}", self.study))?;
            if !keys.insert((c.metric, c.conditions.clone())) {
                return Err(format!(
                    "{}: {} at {} duplicates another cell's {} {}",
                    self.study,
                    c.metric.name(),
                    c.at,
                    c.metric.name(),
                    c.conditions_text()
                ));
            }
            if c.at.table.is_some() && !places.insert(c.at.to_string()) {
                return Err(format!("{}: two cells at {}", self.study, c.at));
            }
        }
        if let Some(f) = &self.fit {
            f.check(&self.cell)
                .map_err(|e| format!("{}: {e}", self.study))?;
        }
        self.check_columns()?;
        for t in &self.threshold {
            t.at.check()
                .map_err(|e| format!("{}: {}: {e}", self.study, t.name))?;
            if !t.metric.units().contains(&t.unit) || !t.value.is_finite() {
                return Err(format!(
                    "{}: threshold {}: bad value or unit",
                    self.study, t.name
                ));
            }
        }
        for s in &self.stand_in {
            if s.key.is_empty() || s.published.is_empty() || s.measured.is_empty() {
                return Err(format!(
                    "{}: a stand-in needs key, published, measured",
                    self.study
                ));
            }
        }
        Ok(())
    }
}

impl StudyFile {
    /// Each column names a condition value some cell has (a typo would
    /// leave a published column unlabelled).
    fn check_columns(&self) -> Result<(), String> {
        for c in &self.column {
            let hit = self
                .cell
                .iter()
                .any(|cell| cell.conditions.get(&c.key) == Some(&c.value));
            if !hit {
                return Err(format!(
                    "{}: column {}={} matches no cell",
                    self.study, c.key, c.value
                ));
            }
        }
        Ok(())
    }

    /// The threshold called `name`.
    pub fn threshold(&self, name: &str) -> Option<&Threshold> {
        self.threshold.iter().find(|t| t.name == name)
    }
}

/// "k=v, k=v" in key order.
pub fn conditions_text(c: &BTreeMap<String, String>) -> String {
    c.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
