//! Command mixes: besides READ and WRITE, UNMAP, WRITE SAME, COMPARE AND
//! WRITE and EXTENDED COPY, each with its share of the I/Os
//! (`read=60,write=30,unmap=5,writesame=5`, shares summing to 100).
//!
//! An access line still gives each I/O its size, alignment and whether
//! its offset is random or sequential; the mix replaces the line's read
//! percentage. What each command does with the I/O's range:
//!
//! | op          | command                         | range                                   |
//! |-------------|---------------------------------|-----------------------------------------|
//! | `read`      | READ(10/16)                     | the range                               |
//! | `write`     | WRITE(10/16)                    | the range                               |
//! | `unmap`     | UNMAP (SBC-4 §5.30)             | the range, one descriptor               |
//! | `writesame` | WRITE SAME(16) (SBC-4 §5.50)    | the range, one block of the write data  |
//! | `caw`       | COMPARE AND WRITE (SBC-4 §5.3)  | the range's first block                 |
//! | `xcopy`     | EXTENDED COPY(LID1) (SPC-4 §6.4)| the range, to a second offset of the LU |
//!
//! COMPARE AND WRITE compares the block with the first block of the
//! shared write data and writes that same block back (VMware's ATS on a
//! heartbeat does the same kind of exchange). A block that holds
//! anything else answers MISCOMPARE: that is the command's outcome, not a
//! failure, and is counted as the op's `miscompares`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use bytes::Bytes;
use hdrhistogram::Histogram;
use ironlun_initiator::{scsi, xcopy, ScsiRequest, SenseData, SenseKey};
use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

use crate::result::Latency;

/// A command kind of a mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    Read,
    Write,
    Unmap,
    WriteSame,
    CompareAndWrite,
    Xcopy,
}

impl Op {
    pub const ALL: [Op; 6] = [
        Op::Read,
        Op::Write,
        Op::Unmap,
        Op::WriteSame,
        Op::CompareAndWrite,
        Op::Xcopy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Unmap => "unmap",
            Op::WriteSame => "writesame",
            Op::CompareAndWrite => "caw",
            Op::Xcopy => "xcopy",
        }
    }

    fn index(self) -> usize {
        Op::ALL.iter().position(|o| *o == self).unwrap_or(0)
    }

    /// Bytes the command carries as data (for MB/s): what it reads or
    /// writes over the wire.
    pub fn wire_bytes(self, size: u32, block: u32) -> u32 {
        match self {
            Op::Read | Op::Write => size,
            Op::WriteSame => block,
            Op::CompareAndWrite => block.saturating_mul(2),
            Op::Unmap | Op::Xcopy => 0,
        }
    }
}

impl FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Op, String> {
        match s.trim() {
            "read" => Ok(Op::Read),
            "write" => Ok(Op::Write),
            "unmap" | "trim" => Ok(Op::Unmap),
            "writesame" | "write_same" => Ok(Op::WriteSame),
            "caw" | "compareandwrite" | "compare_and_write" => Ok(Op::CompareAndWrite),
            "xcopy" | "extendedcopy" => Ok(Op::Xcopy),
            o => Err(format!(
                "mix: unknown op '{o}' (read, write, unmap, writesame, caw, xcopy)"
            )),
        }
    }
}

/// Ops with their shares, in percent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Mix(Vec<(Op, u32)>);

impl Mix {
    /// Draws the next I/O's op by share.
    pub fn pick<R: Rng>(&self, rng: &mut R) -> Op {
        let mut x = rng.random_range(0..100u32);
        for (op, share) in &self.0 {
            if x < *share {
                return *op;
            }
            x -= share;
        }
        self.0.last().map_or(Op::Read, |(op, _)| *op)
    }

    /// True when the mix has an op other than read and write.
    pub fn has_other(&self) -> bool {
        self.0
            .iter()
            .any(|(op, s)| *s > 0 && !matches!(op, Op::Read | Op::Write))
    }

    pub fn has(&self, op: Op) -> bool {
        self.0.iter().any(|(o, s)| *o == op && *s > 0)
    }
}

impl FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Mix, String> {
        let mut v: Vec<(Op, u32)> = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (name, pct) = part
                .split_once('=')
                .ok_or_else(|| format!("mix: '{part}' is not OP=PCT"))?;
            let op: Op = name.parse()?;
            let pct: u32 = pct
                .trim()
                .trim_end_matches('%')
                .parse()
                .map_err(|_| format!("mix: '{part}': the share is a whole percentage"))?;
            if v.iter().any(|(o, _)| *o == op) {
                return Err(format!("mix: '{}' given twice", op.name()));
            }
            v.push((op, pct));
        }
        let total: u32 = v.iter().map(|(_, p)| p).sum();
        if total != 100 {
            return Err(format!("mix '{s}': shares sum to {total}%, not 100%"));
        }
        Ok(Mix(v))
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(op, p)| format!("{}={p}", op.name()))
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

impl TryFrom<String> for Mix {
    type Error = String;
    fn try_from(s: String) -> Result<Mix, String> {
        s.parse()
    }
}

impl From<Mix> for String {
    fn from(m: Mix) -> String {
        m.to_string()
    }
}

/// Where a command of a mix goes.
pub struct Place<'a> {
    pub lun: u16,
    pub lba: u64,
    pub blocks: u32,
    pub block_size: u32,
    /// Where an EXTENDED COPY writes to.
    pub dst_lba: u64,
    /// The LU's NAA designator (EXTENDED COPY names the LU by it).
    pub naa: Option<[u8; 8]>,
    /// The shared write data (at least one block).
    pub payload: &'a Bytes,
}

/// The command of an op other than read and write.
pub fn command(op: Op, p: &Place<'_>) -> Result<ScsiRequest, String> {
    let bs = p.block_size as usize;
    let block = || p.payload.slice(..bs.min(p.payload.len()));
    Ok(match op {
        Op::Unmap => scsi::unmap(p.lun, &[(p.lba, p.blocks)]),
        Op::WriteSame => scsi::write_same16(p.lun, p.lba, p.blocks, block(), false),
        Op::CompareAndWrite => {
            let mut both = Vec::with_capacity(2 * bs);
            both.extend_from_slice(&block());
            both.extend_from_slice(&block());
            scsi::compare_and_write(p.lun, p.lba, 1, Bytes::from(both))
        }
        Op::Xcopy => {
            let naa = p.naa.ok_or("EXTENDED COPY: the LU has no NAA designator")?;
            let blocks = u16::try_from(p.blocks)
                .map_err(|_| format!("EXTENDED COPY: {} blocks in one segment", p.blocks))?;
            let seg = xcopy::Segment {
                src_lba: p.lba,
                dst_lba: p.dst_lba,
                blocks,
            };
            xcopy::extended_copy(p.lun, naa, naa, p.block_size, &[seg])
                .map_err(|e| e.to_string())?
        }
        Op::Read | Op::Write => return Err(format!("{} is not a mix command", op.name())),
    })
}

/// True when a failed command's error is a MISCOMPARE (SBC-4 §5.3: the
/// compare of COMPARE AND WRITE did not match).
pub fn is_miscompare(e: &ironlun_initiator::Error) -> bool {
    matches!(e, ironlun_initiator::Error::Check(SenseData { code, .. })
        if code.key == SenseKey::MISCOMPARE)
}

/// One op's count and latency in a result.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OpResult {
    pub ios: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub miscompares: u64,
    pub latency_us: Latency,
}

/// The ops of a result on one line: `read 1200 (mean 85.0 µs), caw 30
/// (mean 120.0 µs, 3 miscompares)`.
pub fn describe(ops: &BTreeMap<String, OpResult>) -> String {
    let parts: Vec<String> = ops
        .iter()
        .map(|(name, o)| {
            let mis = if o.miscompares > 0 {
                format!(", {} miscompares", o.miscompares)
            } else {
                String::new()
            };
            format!("{name} {} (mean {:.1} µs{mis})", o.ios, o.latency_us.mean)
        })
        .collect();
    parts.join(", ")
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Two results' ops as one (agents' parts of a run): counts and means
/// are exact; the percentiles and the maximum are the larger of the two
/// (an upper bound: the parts carry no histogram per op).
pub fn merge(
    mut a: BTreeMap<String, OpResult>,
    b: &BTreeMap<String, OpResult>,
) -> BTreeMap<String, OpResult> {
    for (name, o) in b {
        let m = a.entry(name.clone()).or_default();
        let n = m.ios + o.ios;
        let mean = if n == 0 {
            0.0
        } else {
            (m.latency_us.mean * m.ios as f64 + o.latency_us.mean * o.ios as f64) / n as f64
        };
        let (x, y) = (&mut m.latency_us, &o.latency_us);
        for (p, q) in [
            (&mut x.p50, y.p50),
            (&mut x.p90, y.p90),
            (&mut x.p99, y.p99),
            (&mut x.p999, y.p999),
            (&mut x.p9999, y.p9999),
            (&mut x.max, y.max),
        ] {
            *p = p.max(q);
        }
        x.mean = mean;
        m.ios = n;
        m.miscompares += o.miscompares;
    }
    a
}

/// Counts and latencies by op over the measured interval.
pub struct OpMeter {
    hist: Vec<Histogram<u64>>,
    miscompares: [u64; 6],
}

impl OpMeter {
    pub fn new() -> Result<OpMeter, String> {
        let h = Histogram::<u64>::new_with_bounds(1_000, 100_000_000_000, 3)
            .map_err(|e| e.to_string())?;
        Ok(OpMeter {
            hist: vec![h; Op::ALL.len()],
            miscompares: [0; 6],
        })
    }

    /// An op measured at `ns`; `miscompare` for a COMPARE AND WRITE that
    /// did not match.
    pub fn record(&mut self, op: Op, ns: u64, miscompare: bool) {
        if let Some(h) = self.hist.get_mut(op.index()) {
            let _ = h.record(ns.clamp(1_000, 100_000_000_000));
        }
        if miscompare {
            if let Some(m) = self.miscompares.get_mut(op.index()) {
                *m += 1;
            }
        }
    }

    /// Adds `other`'s counts and latencies (another thread's part of a
    /// run): exact, histogram by histogram.
    pub fn add(&mut self, other: &OpMeter) -> Result<(), String> {
        for (h, o) in self.hist.iter_mut().zip(&other.hist) {
            h.add(o)
                .map_err(|e| format!("merging latency histograms: {e:?}"))?;
        }
        for (m, o) in self.miscompares.iter_mut().zip(other.miscompares) {
            *m += o;
        }
        Ok(())
    }

    pub fn reset(&mut self) {
        self.hist.iter_mut().for_each(Histogram::reset);
        self.miscompares = [0; 6];
    }

    /// Every op that ran, by name.
    pub fn result(&self) -> BTreeMap<String, OpResult> {
        Op::ALL
            .iter()
            .zip(&self.hist)
            .zip(&self.miscompares)
            .filter(|((_, h), _)| !h.is_empty())
            .map(|((op, h), m)| {
                let r = OpResult {
                    ios: h.len(),
                    miscompares: *m,
                    latency_us: Latency::from_histogram(h),
                };
                (op.name().to_owned(), r)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn mixes_parse_and_pick_by_share() {
        let m: Mix = "read=60,write=30,unmap=5,writesame=5".parse().unwrap();
        assert_eq!(m.to_string(), "read=60,write=30,unmap=5,writesame=5");
        assert!(m.has_other() && m.has(Op::Unmap) && !m.has(Op::Xcopy));
        let mut rng = SmallRng::seed_from_u64(5);
        let mut n = [0u32; 6];
        for _ in 0..100_000 {
            n[m.pick(&mut rng).index()] += 1;
        }
        // 100,000 draws: sd at most 160; tolerance 1,000.
        for (i, want) in [60_000, 30_000, 5_000, 5_000, 0, 0].iter().enumerate() {
            assert!((i64::from(n[i]) - want).abs() < 1_000, "{n:?}");
        }
        for bad in [
            "read=60,write=30",
            "read=50,read=50",
            "read=x",
            "copy=100",
            "read",
        ] {
            assert!(bad.parse::<Mix>().is_err(), "{bad}");
        }
        assert!(!"read=70,write=30".parse::<Mix>().unwrap().has_other());
    }

    #[test]
    fn commands_of_the_mix() {
        let payload = Bytes::from(vec![7u8; 8192]);
        let p = Place {
            lun: 1,
            lba: 100,
            blocks: 8,
            block_size: 512,
            dst_lba: 900,
            naa: Some([0x30, 0, 0, 0, 0, 0, 0, 1]),
            payload: &payload,
        };
        let ws = command(Op::WriteSame, &p).unwrap();
        assert_eq!((ws.cdb[0], ws.write.len(), ws.cdb[13]), (0x93, 512, 8));
        let caw = command(Op::CompareAndWrite, &p).unwrap();
        assert_eq!((caw.cdb[0], caw.write.len(), caw.cdb[13]), (0x89, 1024, 1));
        let um = command(Op::Unmap, &p).unwrap();
        assert_eq!(um.cdb[0], 0x42);
        let xc = command(Op::Xcopy, &p).unwrap();
        assert_eq!(xc.cdb[0], 0x83);
        assert!(command(Op::Xcopy, &Place { naa: None, ..p }).is_err());
        assert!(command(Op::Read, &Place { naa: None, ..p }).is_err());
    }

    #[test]
    fn op_meter_reports_what_ran() {
        let mut m = OpMeter::new().unwrap();
        m.record(Op::Unmap, 50_000, false);
        m.record(Op::CompareAndWrite, 80_000, true);
        let r = m.result();
        assert_eq!(r.len(), 2);
        assert_eq!(r["caw"].miscompares, 1);
        assert_eq!(r["unmap"].ios, 1);
        assert_eq!(
            describe(&r),
            "caw 1 (mean 80.1 µs, 1 miscompares), unmap 1 (mean 49.9 µs)"
        );
        let mut other = OpMeter::new().unwrap();
        other.record(Op::Unmap, 150_000, false);
        let both = merge(r.clone(), &other.result());
        assert_eq!(both["unmap"].ios, 2);
        assert!((both["unmap"].latency_us.mean - 100.0).abs() < 0.5);
        assert_eq!(both["caw"].miscompares, 1);
        m.reset();
        assert!(m.result().is_empty());
    }
}
