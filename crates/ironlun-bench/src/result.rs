//! What a workload run measured, as written to JSON and CSV.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::hdr::Histograms;
use crate::mix::OpResult;
use crate::spec::Workload;
use crate::steady::SteadyResult;
use crate::verify::Mismatch;

/// Latency statistics in microseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
}

impl Latency {
    pub fn from_histogram(h: &hdrhistogram::Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let ns = |v: u64| v as f64 / 1000.0;
        Latency {
            mean: h.mean() / 1000.0,
            p50: ns(h.value_at_quantile(0.50)),
            p90: ns(h.value_at_quantile(0.90)),
            p99: ns(h.value_at_quantile(0.99)),
            p999: ns(h.value_at_quantile(0.999)),
            p9999: ns(h.value_at_quantile(0.9999)),
            max: ns(h.max()),
        }
    }

    /// The latency at percentiles spread evenly over a log scale of
    /// 1/(1-p), from the median to 99.999 % (1, 1.25, 1.6, 2, 2.5, 3.2,
    /// 4, 5, 6.3 and 8 per decade of 1/(1-p)), for the report's
    /// exceedance plot: (percentile %, µs). A percentile needs at least
    /// 1/(1-p) samples, so a run of N I/Os stops at 1 - 1/N.
    pub fn curve(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
        const STEPS: [f64; 10] = [1.0, 1.25, 1.6, 2.0, 2.5, 3.2, 4.0, 5.0, 6.3, 8.0];
        let n = h.len() as f64;
        let mut out = Vec::new();
        for decade in 0..5 {
            for s in STEPS {
                let r = s * 10f64.powi(decade);
                if r < 2.0 || r > n {
                    continue;
                }
                let q = 1.0 - 1.0 / r;
                out.push((q * 100.0, h.value_at_quantile(q) as f64 / 1000.0));
            }
        }
        if n >= 1e5 {
            let q = 1.0 - 1e-5;
            out.push((q * 100.0, h.value_at_quantile(q) as f64 / 1000.0));
        }
        out
    }
}

/// CPU use over the measured interval.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Cpu {
    /// Whole initiator host busy, percent of all CPUs (IOMeter's
    /// definition: user+nice+system+irq+softirq over elapsed).
    pub initiator_pct: Option<f64>,
    /// The target's process CPU time over elapsed, percent of all CPUs
    /// (same scale), when the target's CPU can be read.
    pub target_pct: Option<f64>,
    /// The load generator's own process, percent of all CPUs.
    pub initiator_process_pct: Option<f64>,
    /// I/Os per second per percent of host CPU.
    pub iops_per_cpu_pct: Option<f64>,
    /// Load generator CPU time per I/O, microseconds.
    pub initiator_us_per_io: Option<f64>,
    /// Target CPU time per I/O, microseconds.
    pub target_us_per_io: Option<f64>,
}

/// One second of the measured interval.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Second {
    pub t: u32,
    pub iops: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    pub mb_per_s: f64,
    pub p99_us: f64,
}

/// Transfer rate of one zone of the LUN (sustained-rate test).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ZoneRate {
    pub zone: u32,
    pub start_byte: u64,
    pub mb_per_s: f64,
}

/// Verification summary.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct VerifyReport {
    pub checked_blocks: u64,
    pub mismatch_count: u64,
    pub mismatches: Vec<Mismatch>,
}

/// One workload's measurement.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkloadResult {
    pub name: String,
    pub description: String,
    pub luns: Vec<String>,
    pub elapsed_s: f64,
    pub ios: u64,
    pub read_ios: u64,
    pub write_ios: u64,
    pub iops: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    /// 10^6 bytes per second.
    pub mb_per_s: f64,
    /// 2^20 bytes per second.
    pub mib_per_s: f64,
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
    pub latency_us: Latency,
    pub read_latency_us: Latency,
    pub write_latency_us: Latency,
    /// Mean time per transaction as IOMeter reports it: the same as mean
    /// response time here (one I/O per transaction).
    pub transaction_time_us: f64,
    pub cpu: Cpu,
    pub errors: u64,
    pub error_samples: Vec<String>,
    pub verify: Option<VerifyReport>,
    pub series: Vec<Second>,
    /// Latency histogram for charts: (upper bound µs, count) on a log scale.
    pub histogram_us: Vec<(f64, u64)>,
    /// Latency percentiles for the exceedance plot, (percentile %, µs)
    /// ([`Latency::curve`]); empty in files written before it existed.
    #[serde(default)]
    pub percentiles_us: Vec<(f64, f64)>,
    pub zones: Option<Vec<ZoneRate>>,
    /// The exact latency histograms ([`crate::hdr`]): results measured
    /// apart merge exactly from them. Absent in files written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdr: Option<Histograms>,
    /// With `ironlun bench --agents`: what each agent measured (the
    /// totals above are their merge, [`crate::agent::merge()`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentShare>,
    /// OS threads the workers ran on (results written before threads
    /// existed ran on one); with agents, the sum of every agent's.
    #[serde(default = "one")]
    pub threads: u32,
    /// What each thread counted; the run's totals are their sums. With
    /// agents, every agent's threads, agent by agent.
    #[serde(default)]
    pub per_thread: Vec<ThreadTotals>,
    pub workload: Workload,
    /// How random offsets were aligned ([`Workload::alignment`]):
    /// `transfer size` (the default, as fio's `blockalign=bs`), `sector`
    /// or `N bytes`. Empty in files written before it existed, whose runs
    /// aligned to the LUN's block.
    #[serde(default)]
    pub alignment: String,
    /// The latency histogram's non-empty HDR buckets (3 significant
    /// digits): (highest latency in the bucket, ns; count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_buckets_ns: Vec<(u64, u64)>,
    /// Counts and latencies by command, when the workload has a mix.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ops: BTreeMap<String, OpResult>,
    /// Whether and when the steady-state rule was met, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadyResult>,
}

fn one() -> u32 {
    1
}

/// What one thread of a run counted over the measured interval.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTotals {
    pub ios: u64,
    pub read_ios: u64,
    pub write_ios: u64,
    pub bytes: u64,
    pub errors: u64,
}

/// One agent's part of a run driven by several agents.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AgentShare {
    /// The address the controller reached it at.
    pub agent: String,
    /// The name it gave for its host.
    pub host: String,
    pub ios: u64,
    pub read_ios: u64,
    pub write_ios: u64,
    pub iops: f64,
    pub mb_per_s: f64,
    pub elapsed_s: f64,
    pub latency_us: Latency,
    /// Its host's and its own process's CPU.
    pub cpu: Cpu,
    pub errors: u64,
    /// Its clock minus the controller's, as the ping exchange measured
    /// it (milliseconds), and that exchange's shortest round trip.
    pub clock_offset_ms: f64,
    pub rtt_ms: f64,
    /// How late it began the workload against the agreed instant, by its
    /// own clock (0 when on time).
    pub start_late_ms: f64,
    /// Its latency histograms: the run's are their sum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdr: Option<Histograms>,
}

impl WorkloadResult {
    /// True when the run had no errors and no verification mismatch.
    pub fn clean(&self) -> bool {
        self.errors == 0 && self.verify.as_ref().is_none_or(|v| v.mismatch_count == 0)
    }
}

/// Of several runs of one workload, the one with the median IOPS (the
/// upper median of an even count); `None` when there are none.
pub fn median_by_iops(mut runs: Vec<WorkloadResult>) -> Option<WorkloadResult> {
    runs.sort_by(|a, b| a.iops.total_cmp(&b.iops));
    let median = runs.len() / 2;
    runs.into_iter().nth(median)
}

/// A results file: what ran, where, and the workloads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunReport {
    pub tool: String,
    pub version: String,
    pub started: String,
    pub host: HostInfo,
    pub target: Option<String>,
    /// The emulated link between the load generator and the target, when
    /// there was one (`None`: the host's own network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The LUNs the run drove, as the target reported them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub luns: Vec<LunInfo>,
    pub workloads: Vec<WorkloadResult>,
}

/// One LUN a run drove: its label (URL) and its capacity.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LunInfo {
    pub label: String,
    pub blocks: u64,
    pub block_size: u32,
}

impl RunReport {
    /// A results file of `tool` (this version, on this host) that started
    /// at `started` (RFC 3339, or empty when unknown) against `target`.
    pub fn new(
        tool: String,
        started: String,
        target: Option<String>,
        workloads: Vec<WorkloadResult>,
    ) -> RunReport {
        RunReport {
            tool,
            version: env!("CARGO_PKG_VERSION").into(),
            started,
            host: HostInfo::detect(),
            target,
            link: None,
            luns: Vec::new(),
            workloads,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostInfo {
    pub cpu_model: String,
    pub cpus: usize,
    pub kernel: String,
}

impl HostInfo {
    pub fn detect() -> HostInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into());
        HostInfo {
            cpu_model,
            cpus: crate::cpu::cpus(),
            kernel,
        }
    }
}
