//! The comparison's workloads and the goals each is judged against.

use serde::Serialize;

/// Which LUN of each target a workload runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LunKind {
    /// A regular file on tmpfs, the same size for both targets.
    File,
    /// Reads return zeros, writes are dropped (tgt's `null` backing store,
    /// ironlun's `null:`).
    Null,
}

impl LunKind {
    pub fn name(self) -> &'static str {
        match self {
            LunKind::File => "file",
            LunKind::Null => "null",
        }
    }
}

/// What decides the comparison for a workload.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Goal {
    /// ironlun's IOPS (or MB/s) at least this many times tgt's.
    RateRatio(f64),
    /// ironlun's mean latency at most this many times tgt's.
    LatencyRatio(f64),
}

#[derive(Clone, Debug, Serialize)]
pub struct Workload {
    pub name: &'static str,
    pub lun: LunKind,
    pub block_size: u32,
    pub read: bool,
    pub random: bool,
    pub queue_depth: u32,
    pub goal: Goal,
    /// Target CPU per I/O: ironlun at most this many times tgt's.
    pub cpu_goal: Option<f64>,
    /// Reads: at least this share of iperf3's single-stream rate.
    pub wire_share_goal: Option<f64>,
}

impl Workload {
    /// Large transfers are judged by MB/s, small ones by IOPS.
    pub fn by_bandwidth(&self) -> bool {
        self.block_size >= 64 * 1024
    }
}

const KIB: u32 = 1024;

/// The issue's goals (docs/performance.md): 4 KiB random at QD 64 twice
/// tgt's IOPS at half its CPU per I/O on files (0.7× on null LUNs);
/// 512 KiB sequential at QD 8 1.3× tgt's MB/s, reads 60 % of the wire;
/// 4 KiB at QD 1 0.8× tgt's latency.
pub fn all() -> Vec<Workload> {
    let mut v = on_files();
    v.extend(on_null());
    v
}

/// The workloads on file LUNs, with their goals.
fn on_files() -> Vec<Workload> {
    let w = |name, block_size, read, random, queue_depth, goal, cpu_goal, wire| Workload {
        name,
        lun: LunKind::File,
        block_size,
        read,
        random,
        queue_depth,
        goal,
        cpu_goal,
        wire_share_goal: wire,
    };
    use Goal::*;
    vec![
        w(
            "4k-randread-qd64",
            4 * KIB,
            true,
            true,
            64,
            RateRatio(2.0),
            Some(0.5),
            None,
        ),
        w(
            "4k-randwrite-qd64",
            4 * KIB,
            false,
            true,
            64,
            RateRatio(2.0),
            Some(0.5),
            None,
        ),
        w(
            "512k-seqread-qd8",
            512 * KIB,
            true,
            false,
            8,
            RateRatio(1.3),
            None,
            Some(0.6),
        ),
        w(
            "512k-seqwrite-qd8",
            512 * KIB,
            false,
            false,
            8,
            RateRatio(1.3),
            None,
            None,
        ),
        w(
            "4k-randread-qd1",
            4 * KIB,
            true,
            true,
            1,
            LatencyRatio(0.8),
            None,
            None,
        ),
    ]
}

/// The 4 KiB random pair at QD 64 again on null LUNs, where the target's
/// CPU per I/O may be 0.7× tgt's (there is no file I/O to save on).
fn on_null() -> Vec<Workload> {
    on_files()
        .into_iter()
        .filter(|w| w.block_size == 4 * KIB && w.queue_depth == 64)
        .map(|w| Workload {
            lun: LunKind::Null,
            cpu_goal: Some(0.7),
            ..w
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_goal_of_the_issue_has_a_workload() {
        let ws = all();
        let has = |name: &str, lun| ws.iter().any(|w| w.name == name && w.lun == lun);
        for n in ["4k-randread-qd64", "4k-randwrite-qd64"] {
            assert!(has(n, LunKind::File) && has(n, LunKind::Null));
        }
        assert!(has("512k-seqread-qd8", LunKind::File));
        assert!(has("512k-seqwrite-qd8", LunKind::File));
        assert!(has("4k-randread-qd1", LunKind::File));
        assert!(ws
            .iter()
            .all(|w| w.by_bandwidth() == (w.block_size == 512 * KIB)));
    }
}
