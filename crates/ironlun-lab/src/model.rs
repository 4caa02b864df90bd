//! What a simple model predicts for a cell, to print beside each
//! measurement. Per command: host time `t0` (measured on loopback at
//! queue depth 1, through the relay when the cell has a link), `k` round
//! trips (1 for reads and unsolicited writes, one more when the write, or
//! its part beyond FirstBurstLength, waits for an R2T), and the bytes on
//! the wire at the link rate. Throughput is the least of: the command
//! window over the cycle time, the link rate (less PDU headers), the TCP
//! window per round trip, and the host's own rate measured on loopback.

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
    /// commands (window over cycle), link, tcp-window or host.
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

pub fn predict(cell: &Cell, host: Option<HostCost>) -> Prediction {
    let s = f64::from(cell.bs);
    let wire = wire_bytes(cell);
    let rtt = cell.rtt.as_secs_f64();
    let k = round_trips(cell);
    // Mixed I/O: reads take one round trip, writes what the op needs.
    let reads = f64::from(cell.read_pct()) / 100.0;
    let k_mean = if cell.op.is_read() {
        f64::from(k)
    } else {
        reads + (1.0 - reads) * f64::from(k)
    };
    let rate = cell.link_rate.map(|r| r as f64 / 8.0);
    let t0 = host.map_or(0.0, |h| h.t0_s);
    let cycle = t0 + k_mean * rtt + rate.map_or(0.0, |r| wire / r);
    let n = f64::from(cell.qd) * f64::from(cell.sessions) * f64::from(cell.workers);
    let mut best = (f64::INFINITY, "commands");
    let mut bound = |v: f64, why: &'static str| {
        if v < best.0 {
            best = (v, why);
        }
    };
    if cycle > 0.0 {
        bound(n * s / cycle, "commands");
    }
    if let Some(r) = rate {
        // Each session has its own link, full duplex: reads fill one
        // direction and writes the other.
        let busiest = reads.max(1.0 - reads).max(1e-9);
        bound(r * f64::from(cell.sessions) * s / wire / busiest, "link");
    }
    if let (Some(w), true, Some(l)) = (cell.tcp_window, rtt > 0.0, cell.link()) {
        // Window per round trip; the relay's chunking adds one chunk's
        // serialisation to the round trip (see LinkSpec::chunk_bytes).
        let chunk = rate.map_or(0.0, |r| l.chunk_bytes() as f64 / r);
        bound(
            f64::from(w) / (rtt + chunk) * f64::from(cell.sessions) * s / wire,
            "tcp-window",
        );
    }
    if let Some(h) = host {
        bound(h.max_bytes_per_s, "host");
    }
    Prediction {
        mb_per_s: if best.0.is_finite() {
            best.0 / 1e6
        } else {
            0.0
        },
        bound: best.1,
        round_trips: k,
        cycle_ms: cycle * 1e3,
    }
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
        // Default negotiation: 64 KiB unsolicited, the rest solicited.
        assert_eq!(round_trips(&cell(Op::Write, 65536, 1, 10)), 1);
        assert_eq!(round_trips(&cell(Op::Write, 262_144, 1, 10)), 2);
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
    fn a_deep_window_is_bounded_by_the_link() {
        let p = predict(&cell(Op::Read, 262_144, 32, 10), None);
        assert_eq!(p.bound, "link");
        assert!(p.mb_per_s < 19.375 && p.mb_per_s > 19.0);
        let mut small_window = cell(Op::Read, 262_144, 32, 50);
        small_window.tcp_window = Some(65536);
        assert_eq!(predict(&small_window, None).bound, "tcp-window");
    }
}
