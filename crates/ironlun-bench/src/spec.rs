//! The workload model: IOMeter's access specification.
//!
//! An access specification is a list of lines; each I/O first picks a line
//! by its share of accesses, then decides read or write and random or
//! sequential by that line's percentages, independently per I/O. A
//! sequential I/O starts where the worker's previous I/O ended ("next
//! offset = previous offset + previous size"); a random one starts at a
//! uniformly chosen aligned offset in the seek range
//! ([`AccessLine::offset_align`]: by default a multiple of the transfer
//! size, as fio's `blockalign` defaults to `bs`; IOMeter's sector
//! alignment on request). After `burst` I/Os of a line the worker waits
//! `delay_ms` before the next.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::access::Access;
use crate::mix::Mix;
use crate::pattern;
use crate::steady::Rule;

/// One line of an access specification.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessLine {
    /// Transfer size in bytes.
    pub size: u32,
    /// Share of all accesses, percent (the lines' shares sum to 100).
    #[serde(default = "hundred")]
    pub share: u32,
    /// Percent reads (the rest are writes).
    pub read: u32,
    /// Percent random (the rest are sequential).
    pub random: u32,
    /// Random offsets are multiples of this many bytes, rounded up to
    /// whole LUN blocks ([`AccessLine::offset_align`]): 0 (the default)
    /// aligns to the transfer size, [`SECTOR`] to the LUN's block.
    #[serde(default)]
    pub align: u32,
    /// I/Os issued back to back before a delay.
    #[serde(default = "one")]
    pub burst: u32,
    /// Delay between bursts, milliseconds.
    #[serde(default)]
    pub delay_ms: u32,
}

impl AccessLine {
    /// One line taking every access, aligned to its transfer size, no
    /// bursts or delay.
    pub fn simple(size: u32, read: u32, random: u32) -> Self {
        AccessLine {
            size,
            share: 100,
            read,
            random,
            align: 0,
            burst: 1,
            delay_ms: 0,
        }
    }
}

/// `align` for IOMeter's sector-aligned offsets (`--align sector`): 512
/// bytes, which [`AccessLine::offset_align`] raises to the LUN's block.
pub const SECTOR: u32 = 512;

impl AccessLine {
    /// The alignment of this line's random offsets on a LUN of `bs`-byte
    /// blocks, in bytes: `align`, or the transfer size when it is 0 (fio's
    /// `blockalign=bs`, so that a 4 KiB write never straddles a 4 KiB
    /// block of the store), rounded up to whole blocks.
    pub fn offset_align(&self, bs: u64) -> u64 {
        let bs = bs.max(1);
        let want = match self.align {
            0 => u64::from(self.size),
            a => u64::from(a),
        };
        want.max(bs).div_ceil(bs) * bs
    }

    /// How [`AccessLine::offset_align`] aligns, in words.
    fn alignment(&self) -> String {
        match self.align {
            0 => "transfer size".into(),
            SECTOR => "sector".into(),
            a => format!("{a} bytes"),
        }
    }
}

fn hundred() -> u32 {
    100
}

fn one() -> u32 {
    1
}

/// Where on the LUN I/O goes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeekRange {
    /// Start, bytes from the beginning of the LUN.
    #[serde(default)]
    pub start: u64,
    /// Length in bytes; 0 means to the end of the LUN.
    #[serde(default)]
    pub length: u64,
}

/// A whole test: the access specification plus how it is run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub lines: Vec<AccessLine>,
    /// Outstanding I/Os per worker.
    pub queue_depth: u32,
    /// Workers per LUN.
    #[serde(default = "one")]
    pub workers: u32,
    #[serde(default)]
    pub seek: SeekRange,
    /// Ramp-up before measuring, seconds.
    #[serde(default)]
    pub ramp_s: f64,
    /// Measured run time, seconds (with `ios`, whichever comes first).
    #[serde(default = "ten")]
    pub time_s: f64,
    /// Stop after this many measured I/Os.
    #[serde(default)]
    pub ios: Option<u64>,
    /// Target rate per worker (IOPS); latency counts from the intended
    /// start time, so a slow period is not under-sampled.
    #[serde(default)]
    pub rate_iops: Option<f64>,
    /// Sweep the LUN in zones and report the rate per zone (disk
    /// benchmark "sustained transfer rate").
    #[serde(default)]
    pub zones: Option<u32>,
    /// Skewed access, data patterns, command mixes, the steady-state
    /// rule (`[workload.shape]`; none by default).
    #[serde(default, skip_serializing_if = "Shape::is_plain")]
    pub shape: Shape,
}

/// The workload shapes fio users expect, each optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Where random I/Os land ([`Access`]).
    #[serde(default, skip_serializing_if = "Access::is_uniform")]
    pub access: Access,
    /// Percent of each block that compresses away ([`crate::pattern`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compress_pct: u32,
    /// Percent of writes that repeat an earlier write.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dedupe_pct: u32,
    /// Commands and their shares, in place of the lines' read share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<Mix>,
    /// Stop early once steady ([`crate::steady`]); the run time bounds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<Rule>,
}

impl Shape {
    pub fn is_plain(&self) -> bool {
        *self == Shape::default()
    }

    /// The write data's shape.
    pub fn data(&self) -> pattern::Shape {
        pattern::Shape {
            compress_pct: self.compress_pct,
            dedupe_pct: self.dedupe_pct,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn ten() -> f64 {
    10.0
}

/// Largest transfer one I/O may ask for.
pub const MAX_TRANSFER: u32 = 16 << 20;
/// Largest queue depth per worker.
pub const MAX_QUEUE_DEPTH: u32 = 1024;
/// Largest number of workers per LUN.
pub const MAX_WORKERS: u32 = 256;

impl Workload {
    /// A one-line workload with short default timing (1 s ramp, 10 s run).
    pub fn simple(name: &str, description: &str, line: AccessLine, queue_depth: u32) -> Self {
        Workload {
            name: name.to_owned(),
            description: description.to_owned(),
            lines: vec![line],
            queue_depth,
            workers: 1,
            seek: SeekRange::default(),
            ramp_s: 1.0,
            time_s: 10.0,
            ios: None,
            rate_iops: None,
            zones: None,
            shape: Shape::default(),
        }
    }

    /// Checks the specification; every error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let w = &self.name;
        if self.lines.is_empty() {
            return Err(format!("workload '{w}': no access lines"));
        }
        let total: u32 = self.lines.iter().map(|l| l.share).sum();
        if total != 100 {
            return Err(format!(
                "workload '{w}': line shares sum to {total}%, not 100%"
            ));
        }
        for (i, l) in self.lines.iter().enumerate() {
            if l.size == 0 || l.size > MAX_TRANSFER {
                return Err(format!(
                    "workload '{w}' line {i}: size {} outside 1..={MAX_TRANSFER}",
                    l.size
                ));
            }
            if l.read > 100 || l.random > 100 {
                return Err(format!(
                    "workload '{w}' line {i}: read and random are percentages (0..=100)"
                ));
            }
            if l.burst == 0 {
                return Err(format!("workload '{w}' line {i}: burst must be at least 1"));
            }
        }
        if self.queue_depth == 0 || self.queue_depth > MAX_QUEUE_DEPTH {
            return Err(format!(
                "workload '{w}': queue depth {} outside 1..={MAX_QUEUE_DEPTH}",
                self.queue_depth
            ));
        }
        if self.workers == 0 || self.workers > MAX_WORKERS {
            return Err(format!(
                "workload '{w}': workers {} outside 1..={MAX_WORKERS}",
                self.workers
            ));
        }
        if !(self.time_s.is_finite() && self.time_s > 0.0) && self.ios.is_none() {
            return Err(format!("workload '{w}': needs a run time or an I/O count"));
        }
        if !(self.ramp_s.is_finite() && self.ramp_s >= 0.0) {
            return Err(format!("workload '{w}': bad ramp-up time"));
        }
        self.shape
            .data()
            .validate()
            .map_err(|e| format!("workload '{w}': {e}"))?;
        if let Some(r) = self.rate_iops {
            if !(r.is_finite() && r > 0.0) {
                return Err(format!("workload '{w}': rate must be positive"));
            }
        }
        Ok(())
    }

    pub fn run_time(&self) -> Duration {
        Duration::from_secs_f64(self.time_s.max(0.0))
    }

    /// The ramp before measuring; none for a zone sweep, whose rate
    /// counts from its first I/O (a sweep that ended inside the ramp
    /// would otherwise report no I/O at all).
    pub fn ramp(&self) -> Duration {
        if self.zones.is_some() {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(self.ramp_s.max(0.0))
    }

    /// Largest transfer of any line.
    pub fn max_size(&self) -> u32 {
        self.lines.iter().map(|l| l.size).max().unwrap_or(0)
    }

    /// How random offsets are aligned, as the output says it:
    /// `transfer size`, `sector` (the LUN's block) or `N bytes`; per line
    /// (`line 0: ...; line 1: ...`) when the lines differ.
    pub fn alignment(&self) -> String {
        let each: Vec<String> = self.lines.iter().map(AccessLine::alignment).collect();
        match each.first() {
            Some(first) if each.iter().all(|a| a == first) => first.clone(),
            _ => each
                .iter()
                .enumerate()
                .map(|(i, a)| format!("line {i}: {a}"))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    /// Percent of all I/Os that are reads, over the lines by their share
    /// (rounded down).
    pub fn read_pct(&self) -> u32 {
        self.share_weighted(|l| l.read)
    }

    /// Percent of all I/Os that are random, as [`Workload::read_pct`].
    pub fn random_pct(&self) -> u32 {
        self.share_weighted(|l| l.random)
    }

    fn share_weighted(&self, f: fn(&AccessLine) -> u32) -> u32 {
        self.lines.iter().map(|l| f(l) * l.share).sum::<u32>() / 100
    }
}

/// A workload file: `[[workload]]` tables.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    pub workload: Vec<Workload>,
}

impl WorkloadFile {
    pub fn parse(text: &str) -> Result<Vec<Workload>, String> {
        let f: WorkloadFile = toml::from_str(text).map_err(|e| e.to_string())?;
        for w in &f.workload {
            w.validate()?;
        }
        Ok(f.workload)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn toml_workloads_parse_and_validate() {
        let text = r#"
[[workload]]
name = "mix"
queue_depth = 8
time_s = 5
lines = [
  { size = 4096, share = 60, read = 80, random = 100 },
  { size = 65536, share = 40, read = 50, random = 0, burst = 4, delay_ms = 2 },
]
"#;
        let w = WorkloadFile::parse(text).unwrap();
        assert_eq!(w[0].lines[1].burst, 4);
        assert_eq!(w[0].workers, 1);
        let bad = text.replace("share = 40", "share = 30");
        assert!(WorkloadFile::parse(&bad)
            .unwrap_err()
            .contains("sum to 90%"));
        let bad = text.replace("queue_depth = 8", "queue_depth = 0");
        assert!(WorkloadFile::parse(&bad).is_err());
        let bad = text.replace("time_s = 5", "time_s = 5\nbogus = 1");
        assert!(WorkloadFile::parse(&bad).is_err());
        // 60 % of I/Os at 80 % reads and 40 % at 50 %: 68 % reads.
        assert_eq!(w[0].read_pct(), 68);
        assert_eq!(w[0].random_pct(), 60);
    }

    /// 4 KiB transfers on 512-byte blocks: aligned to 4 KiB by default,
    /// to 512 with `sector`; never below the LUN's block.
    #[test]
    fn offsets_align_to_the_transfer_unless_told() {
        let mut l = AccessLine::simple(4096, 0, 100);
        assert_eq!(l.offset_align(512), 4096);
        assert_eq!(l.offset_align(4096), 4096);
        l.align = SECTOR;
        assert_eq!(l.offset_align(512), 512);
        assert_eq!(l.offset_align(4096), 4096, "a sector is the LUN's block");
        l.align = 1000;
        assert_eq!(l.offset_align(512), 1024, "whole blocks");
        let l = AccessLine::simple(6000, 0, 100);
        assert_eq!(l.offset_align(512), 6144);
        assert_eq!(AccessLine::simple(512, 0, 100).offset_align(0), 512);
    }

    #[test]
    fn alignment_in_words() {
        let mut w = Workload::simple("a", "", AccessLine::simple(4096, 0, 100), 1);
        assert_eq!(w.alignment(), "transfer size");
        w.lines[0].align = SECTOR;
        assert_eq!(w.alignment(), "sector");
        w.lines.push(AccessLine::simple(8192, 0, 100));
        w.lines[0].share = 50;
        w.lines[1].share = 50;
        assert_eq!(w.alignment(), "line 0: sector; line 1: transfer size");
        w.lines[0].align = 8192;
        w.lines[1].align = 8192;
        assert_eq!(w.alignment(), "8192 bytes");
    }

    #[test]
    fn a_zone_sweep_has_no_ramp() {
        let mut w = Workload::simple("z", "", AccessLine::simple(65536, 100, 0), 4);
        w.ramp_s = 0.5;
        assert_eq!(w.ramp(), Duration::from_millis(500));
        w.zones = Some(16);
        assert_eq!(w.ramp(), Duration::ZERO);
    }

    #[test]
    fn shapes_in_toml_and_back() {
        let text = r#"
[[workload]]
name = "skewed"
queue_depth = 4
lines = [{ size = 4096, read = 70, random = 100 }]
shape = { access = "zipf:1.2", compress_pct = 50, mix = "read=70,write=20,unmap=10", steady = "iops:5%@30s" }
"#;
        let w = WorkloadFile::parse(text).unwrap();
        assert_eq!(w[0].shape.access, Access::Zipf(1.2));
        assert_eq!(w[0].shape.steady.unwrap().window_s, 30);
        let json = serde_json::to_string(&w[0]).unwrap();
        let back: Workload = serde_json::from_str(&json).unwrap();
        assert_eq!(back, w[0]);
        // A plain workload writes no shape, and old files still read.
        let plain = Workload::simple("p", "", AccessLine::simple(4096, 100, 100), 1);
        assert!(!serde_json::to_string(&plain).unwrap().contains("shape"));
        for bad in [
            "mix = \"read=70\"",
            "compress_pct = 101",
            "access = \"zipf:0\"",
        ] {
            let t = text.replace("compress_pct = 50", bad);
            assert!(WorkloadFile::parse(&t).is_err(), "{bad}");
        }
    }
}
