//! What a simple model predicts for a cell, to print beside each
//! measurement. Per command: host time `t0` (measured on loopback at
//! queue depth 1, through the relay when the cell has a link), `k` round
//! trips (1 for reads and unsolicited writes, one more when the write, or
//! its part beyond FirstBurstLength, waits for an R2T), and the bytes on
//! the wire at the link rate, plus the host time a fitted profile has the
//! relay hold each command (`Cell::imposed`). Throughput is the least of:
//! the command window over the cycle time, the link rate (less PDU
//! headers), the TCP window per round trip, the host's own rate measured
//! on loopback, and the profile's cores over its whole host time.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cell::{Cell, Digest, Op};

/// Bytes of a Basic Header Segment (RFC 7143 §11.2.1).
const BHS: u64 = 48;
/// A CRC32C digest.
const DIGEST: u64 = 4;
/// The embedded target's MaxRecvDataSegmentLength (Data-Out PDU size).
const TARGET_MRDSL: u64 = 262_144;

/// Host costs measured on loopback for one (op, request size).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct HostCost {
    /// Mean response time at queue depth 1, seconds.
    pub t0_s: f64,
    /// Throughput with many commands outstanding, bytes/s.
    pub max_bytes_per_s: f64,
}

/// Host costs by (op, request size, digest, via relay).
#[derive(Clone, Debug, Default)]
pub struct Calibration {
    pub costs: BTreeMap<(Op, u32, Digest, bool), HostCost>,
}

impl Calibration {
    pub fn get(&self, cell: &Cell) -> Option<HostCost> {
        self.costs
            .get(&(cell.op, cell.bs, cell.digest, cell.link().is_some()))
            .copied()
    }
}

/// A prediction and what bounds it.
#[derive(Clone, Debug, Serialize)]
pub struct Prediction {
    pub mb_per_s: f64,
    /// commands (window over cycle), link, tcp-window, host or
    /// profile-host.
    pub bound: &'static str,
    /// Round trips per command the model counted.
    pub round_trips: u32,
    pub cycle_ms: f64,
}

/// Bytes on the wire in the data direction for one command.
pub fn wire_bytes(cell: &Cell) -> f64 {
    let s = u64::from(cell.bs);
    let seg = if cell.op.is_read() {
        u64::from(cell.max_recv_dsl.unwrap_or(262_144)).max(512)
    } else {
        TARGET_MRDSL
    };
    let pdus = s.div_ceil(seg) + 1;
    let hd = if matches!(cell.digest, Digest::Header | Digest::Both) {
        DIGEST
    } else {
        0
    };
    let dd = if matches!(cell.digest, Digest::Data | Digest::Both) {
        DIGEST
    } else {
        0
    };
    (s + pdus * (BHS + hd) + (pdus - 1) * dd) as f64
}

/// Round trips a command needs (RFC 7143 §4.2.5.2: data beyond the
/// unsolicited part waits for an R2T).
pub fn round_trips(cell: &Cell) -> u32 {
    let offers = cell.offers();
    match cell.op {
        Op::Read => 1,
        Op::SolicitedWrite => 2,
        Op::UnsolicitedWrite | Op::Write => {
            // Unsolicited data (immediate, or Data-Out without R2T) goes
            // up to FirstBurstLength; ironlun's embedded target accepts
            // any FirstBurstLength the initiator offers.
            let unsolicited = offers.immediate_data || !offers.initial_r2t;
            let fb = if unsolicited {
                offers.first_burst_length
            } else {
                0
            };
            if cell.bs <= fb {
                1
            } else {
                2
            }
        }
    }
}

/// The least of several bounds on throughput, and which one it is.
struct Least {
    bytes_per_s: f64,
    why: &'static str,
}

impl Default for Least {
    fn default() -> Least {
        Least {
            bytes_per_s: f64::INFINITY,
            why: "commands",
        }
    }
}

impl Least {
    fn offer(&mut self, v: f64, why: &'static str) {
        if v < self.bytes_per_s {
            self.bytes_per_s = v;
            self.why = why;
        }
    }

    fn bytes_per_s(&self) -> Option<f64> {
        self.bytes_per_s.is_finite().then_some(self.bytes_per_s)
    }
}

/// Bytes per second one session's TCP window allows over the cell's
/// link: the window per round trip, where the relay's chunking adds one
/// chunk's serialisation to the round trip (see LinkSpec::chunk_bytes).
fn window_rate(cell: &Cell) -> Option<f64> {
    let rtt = cell.link_rtt().as_secs_f64();
    let (w, l) = (cell.link_window()?, cell.link()?);
    if rtt <= 0.0 {
        return None;
    }
    let chunk = cell
        .relay_rate()
        .map_or(0.0, |r| l.chunk_bytes() as f64 / (r as f64 / 8.0));
    Some(f64::from(w) / (rtt + chunk))
}

pub fn predict(cell: &Cell, host: Option<HostCost>) -> Prediction {
    let s = f64::from(cell.bs);
    let wire = wire_bytes(cell);
    let rtt = cell.link_rtt().as_secs_f64();
    let k = round_trips(cell);
    // Mixed I/O: reads take one round trip, writes what the op needs.
    let reads = f64::from(cell.read_pct()) / 100.0;
    let k_mean = if cell.op.is_read() {
        f64::from(k)
    } else {
        reads + (1.0 - reads) * f64::from(k)
    };
    let rate = cell.relay_rate().map(|r| r as f64 / 8.0);
    // A profile's host time per command (held by the relay) adds to
    // this host's own.
    let held = cell.imposed.host_delay.as_secs_f64();
    let t0 = host.map_or(0.0, |h| h.t0_s) + held;
    let cycle = t0 + k_mean * rtt + rate.map_or(0.0, |r| wire / r);
    let n = f64::from(cell.depth()) * f64::from(cell.sessions) * f64::from(cell.workers);
    let mut best = Least::default();
    let mut bound = |v: f64, why: &'static str| best.offer(v, why);
    if cycle > 0.0 {
        bound(n * s / cycle, "commands");
    }
    if let Some(r) = rate {
        // Each session has its own link, full duplex: reads fill one
        // direction and writes the other.
        let busiest = reads.max(1.0 - reads).max(1e-9);
        bound(r * f64::from(cell.sessions) * s / wire / busiest, "link");
    }
    if let Some(w) = window_rate(cell) {
        bound(w * f64::from(cell.sessions) * s / wire, "tcp-window");
    }
    if let Some(h) = host {
        bound(h.max_bytes_per_s, "host");
    }
    if let Some(v) = profile_host_rate(cell, s) {
        bound(v, "profile-host");
    }
    Prediction {
        mb_per_s: best.bytes_per_s().map_or(0.0, |v| v / 1e6),
        bound: best.why,
        round_trips: k,
        cycle_ms: cycle * 1e3,
    }
}

/// Bytes/s the profile's cores allow commands of `size` (each session's
/// relay has `host_servers` of them, each busy `host_busy` per command).
fn profile_host_rate(cell: &Cell, size: f64) -> Option<f64> {
    let busy = cell.imposed.host_busy.as_secs_f64();
    let cores = f64::from(cell.imposed.host_servers.max(1)) * f64::from(cell.sessions.max(1));
    (busy > 0.0).then(|| cores * size / busy)
}

/// Host time per command at queue depth 1, by direction: `a + b ×
/// bytes`, fitted through two calibration sizes (what a mix needs without
/// calibrating each of its sizes).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HostLine {
    pub read: (f64, f64),
    pub write: (f64, f64),
}

impl HostLine {
    /// The line through (s1, t1) and (s2, t2); a negative slope (noise)
    /// is taken as flat.
    pub fn fit(p1: (f64, f64), p2: (f64, f64)) -> (f64, f64) {
        let (s1, t1) = p1;
        let (s2, t2) = p2;
        let b = if (s2 - s1).abs() > 0.0 {
            ((t2 - t1) / (s2 - s1)).max(0.0)
        } else {
            0.0
        };
        ((t1 - b * s1).max(0.0), b)
    }

    pub fn t0(&self, size: u32, read: bool) -> f64 {
        let (a, b) = if read { self.read } else { self.write };
        a + b * f64::from(size)
    }
}

/// What the model predicts for a whole workload (a mix of access lines)
/// run over the link and sessions `link` describes. Per command, mean
/// over the mix: host time + round trips × RTT + wire bytes / rate, plus
/// a line's transfer delay (a worker waits that long after issuing the
/// last command of a burst, so a burst of commands takes at least the
/// delay). Throughput is the least of: commands outstanding × mean size
/// / mean cycle, the link rate in the busier direction, the TCP window
/// per round trip, and a per-worker rate limit. No host-rate bound: a
/// mix's host limit is not calibrated.
pub fn predict_mix(
    w: &ironlun_bench::Workload,
    link: &Cell,
    host: Option<&HostLine>,
) -> Option<Prediction> {
    let total: f64 = w.lines.iter().map(|l| f64::from(l.share)).sum();
    if total <= 0.0 {
        return None;
    }
    let rtt = link.link_rtt().as_secs_f64();
    let rate = link.relay_rate().map(|r| r as f64 / 8.0);
    let (mut size, mut cycle, mut wire, mut read_bytes) = (0.0, 0.0, 0.0, 0.0);
    for l in &w.lines {
        let p = f64::from(l.share) / total;
        let r = f64::from(l.read.min(100)) / 100.0;
        let s = f64::from(l.size);
        let mut per_op = 0.0;
        let mut wire_line = 0.0;
        for (op, share) in [(Op::Read, r), (Op::Write, 1.0 - r)] {
            if share <= 0.0 {
                continue;
            }
            let c = Cell {
                op,
                bs: l.size,
                ..link.clone()
            };
            let bytes = wire_bytes(&c);
            // A profile's host time held per command adds to this host's.
            let t0 = host.map_or(0.0, |h| h.t0(l.size, op.is_read()))
                + link.imposed.host_delay.as_secs_f64();
            let service = t0 + f64::from(round_trips(&c)) * rtt + rate.map_or(0.0, |r| bytes / r);
            per_op += share * service;
            wire_line += share * bytes;
        }
        // A worker issues `burst` commands, then waits `delay` from the
        // last issue: a command slot's cycle is at least the delay.
        let delay = f64::from(l.delay_ms) / 1e3 / f64::from(l.burst.max(1));
        cycle += p * per_op.max(delay);
        size += p * s;
        wire += p * wire_line;
        read_bytes += p * r * s;
    }
    let n = f64::from(w.queue_depth) * f64::from(w.workers) * f64::from(link.sessions);
    let mut best = Least::default();
    let mut bound = |v: f64, why: &'static str| best.offer(v, why);
    if cycle > 0.0 {
        bound(n * size / cycle, "commands");
    }
    let busiest = (read_bytes / size).max(1.0 - read_bytes / size).max(1e-9);
    if let Some(r) = rate {
        bound(r * f64::from(link.sessions) * size / wire / busiest, "link");
    }
    if let Some(win) = window_rate(link) {
        bound(
            win * f64::from(link.sessions) * size / wire / busiest,
            "tcp-window",
        );
    }
    if let Some(v) = profile_host_rate(link, size) {
        bound(v, "profile-host");
    }
    if let Some(iops) = w.rate_iops {
        bound(
            iops * f64::from(w.workers) * f64::from(link.sessions) * size,
            "rate limit",
        );
    }
    best.bytes_per_s().map(|v| Prediction {
        mb_per_s: v / 1e6,
        bound: best.why,
        round_trips: 1,
        cycle_ms: cycle * 1e3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cell(op: Op, bs: u32, qd: u32, rtt_ms: u64) -> Cell {
        Cell {
            op,
            bs,
            qd,
            rtt: Duration::from_millis(rtt_ms),
            link_rate: Some(155_000_000),
            tcp_window: Some(10_000_000),
            ..Cell::default()
        }
    }

    #[test]
    fn solicited_writes_cost_one_more_round_trip() {
        assert_eq!(round_trips(&cell(Op::Read, 8192, 1, 10)), 1);
        assert_eq!(round_trips(&cell(Op::UnsolicitedWrite, 262_144, 1, 10)), 1);
        assert_eq!(round_trips(&cell(Op::SolicitedWrite, 1024, 1, 10)), 2);
        // Default negotiation: 512 KiB unsolicited, the rest solicited.
        assert_eq!(round_trips(&cell(Op::Write, 524_288, 1, 10)), 1);
        assert_eq!(round_trips(&cell(Op::Write, 1_048_576, 1, 10)), 2);
    }

    #[test]
    fn window_of_one_is_bounded_by_the_round_trip() {
        let p = predict(&cell(Op::Read, 65536, 1, 50), None);
        // 64 KiB per (50 ms + 3.4 ms at 155 Mbit/s).
        let expected = 65536.0 / (0.050 + wire_bytes(&cell(Op::Read, 65536, 1, 50)) / 19.375e6);
        assert!((p.mb_per_s - expected / 1e6).abs() < 1e-9);
        assert_eq!(p.bound, "commands");
        let sol = predict(&cell(Op::SolicitedWrite, 65536, 1, 50), None);
        assert!(sol.mb_per_s < p.mb_per_s * 0.6);
    }

    #[test]
    fn a_mix_is_bounded_by_its_busier_direction_and_its_delays() {
        use ironlun_bench::{AccessLine, Workload};
        let link = Cell {
            link_rate: Some(1_000_000_000),
            rtt: Duration::from_micros(200),
            ..Cell::default()
        };
        // 80 % reads of 64 KiB at a deep queue: the read direction fills.
        let mut w = Workload::simple("m", "", AccessLine::simple(65536, 80, 100), 60);
        let p = predict_mix(&w, &link, None).unwrap();
        assert_eq!(p.bound, "link");
        let one_way = 125e6 * 65536.0
            / wire_bytes(&Cell {
                bs: 65536,
                ..link.clone()
            })
            / 0.8;
        assert!((p.mb_per_s - one_way / 1e6).abs() < 1e-6);
        // One outstanding command with a 1 ms delay after each: the delay
        // sets the cycle when it is longer than the command.
        w.queue_depth = 1;
        w.lines = vec![AccessLine {
            delay_ms: 1,
            ..AccessLine::simple(4096, 100, 0)
        }];
        let p = predict_mix(&w, &link, None).unwrap();
        assert_eq!(p.bound, "commands");
        assert!((p.cycle_ms - 1.0).abs() < 1e-9);
        // A rate limit per worker.
        w.lines = vec![AccessLine::simple(512, 100, 100)];
        w.rate_iops = Some(100.0);
        w.workers = 2;
        let p = predict_mix(&w, &link, None).unwrap();
        assert_eq!(p.bound, "rate limit");
        assert!((p.mb_per_s - 200.0 * 512.0 / 1e6).abs() < 1e-12);
    }

    #[test]
    fn host_time_is_a_line_through_two_sizes() {
        let (a, b) = HostLine::fit((4096.0, 100e-6), (262_144.0, 1.1e-3));
        let h = HostLine {
            read: (a, b),
            write: (a, b),
        };
        assert!((h.t0(4096, true) - 100e-6).abs() < 1e-12);
        assert!((h.t0(262_144, false) - 1.1e-3).abs() < 1e-12);
        // Noise that makes the larger size cheaper: flat, not negative.
        assert_eq!(HostLine::fit((4096.0, 2e-4), (65536.0, 1e-4)), (2e-4, 0.0));
    }

    #[test]
    fn a_deep_window_is_bounded_by_the_link() {
        let p = predict(&cell(Op::Read, 262_144, 32, 10), None);
        assert_eq!(p.bound, "link");
        assert!(p.mb_per_s < 19.375 && p.mb_per_s > 19.0);
        let mut small_window = cell(Op::Read, 262_144, 32, 50);
        small_window.tcp_window = Some(65536);
        assert_eq!(predict(&small_window, None).bound, "tcp-window");
    }
}
