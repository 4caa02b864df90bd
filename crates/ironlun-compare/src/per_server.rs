//! What the local and RBD comparisons ([`crate::local`], [`crate::rbd`])
//! share: a row's samples kept per server, figures paired with a base
//! server's run of the same repetition, and the table's common text.

use std::fmt::Write;

use crate::clients::{Sample, Shape};
use crate::summary::{median, opt, CLIENT_BOUND_CORES};

/// Transfers this large or larger are judged by MB/s, smaller ones by
/// IOPS.
const BANDWIDTH_FROM: u32 = 64 * 1024;

/// Whether runs of `shape` are judged by MB/s (large transfers) rather
/// than IOPS.
pub fn by_bandwidth(shape: &Shape) -> bool {
    shape.block_size >= BANDWIDTH_FROM
}

/// IOPS, or MB/s for large transfers, with the mean latency.
pub fn rate_text(shape: &Shape, s: &Sample) -> String {
    if by_bandwidth(shape) {
        format!("{:.0} MB/s", s.mb_per_s)
    } else {
        format!("{:.0} IOPS, {:.0} µs", s.iops, s.mean_latency_us)
    }
}

/// Server `s`'s entry in `v`, or the default when it has none.
pub fn of<S: PartialEq, T: Copy + Default>(v: &[(S, T)], s: S) -> T {
    v.iter()
        .find(|(k, _)| *k == s)
        .map(|(_, v)| *v)
        .unwrap_or_default()
}

/// A row's samples, per server, in the order of the servers' list: the
/// `samples` of a row of either comparison.
pub trait Runs<S> {
    /// Server `s`'s runs.
    fn of(&self, s: S) -> &[Sample];

    /// Adds a run of server `s` (a server the list lacks is left out).
    fn add(&mut self, s: S, sample: Sample);

    /// The median steal over every run.
    fn steal(&self) -> Option<f64>;
}

impl<S: Copy + PartialEq> Runs<S> for Vec<(S, Vec<Sample>)> {
    fn of(&self, s: S) -> &[Sample] {
        self.iter()
            .find(|(k, _)| *k == s)
            .map_or(&[], |(_, v)| v.as_slice())
    }

    fn add(&mut self, s: S, sample: Sample) {
        if let Some((_, v)) = self.iter_mut().find(|(k, _)| *k == s) {
            v.push(sample);
        }
    }

    fn steal(&self) -> Option<f64> {
        median(
            self.iter()
                .flat_map(|(_, v)| v.iter().map(|s| s.steal_pct))
                .collect(),
        )
    }
}

/// The median over repetitions of each of `runs` against `base`'s run of
/// the same repetition (`against(run, base)`). A device's or cluster's
/// speed drifts over minutes; one repetition runs every server on a row
/// within seconds, so pairing within it keeps that drift out.
pub fn paired(
    runs: &[Sample],
    base: &[Sample],
    against: impl Fn(&Sample, &Sample) -> Option<f64>,
) -> Option<f64> {
    median(
        runs.iter()
            .filter_map(|s| against(s, base.iter().find(|b| b.rep == s.rep)?))
            .collect(),
    )
}

/// A run's part of the progress line: the server, its rate, its steal,
/// and how many tries it took when more than one.
pub fn run_text(line: &mut String, server: &str, shape: &Shape, s: &Sample, tries: usize) {
    let tries = if tries > 1 {
        format!(", {tries} tries")
    } else {
        String::new()
    };
    let _ = write!(
        line,
        " {server} {} (steal {:.0} %{tries})",
        rate_text(shape, s),
        s.steal_pct,
    );
}

/// The table's client cell: µs per I/O and cores, the cores in bold when
/// the client was at a full core.
pub fn client_cell(cpu: Option<f64>, cores: Option<f64>) -> String {
    let cores = opt(cores, |c| {
        if c >= CLIENT_BOUND_CORES {
            format!("**{c:.2}**")
        } else {
            format!("{c:.2}")
        }
    });
    format!("{} ({cores})", opt(cpu, |c| format!("{c:.1}")))
}

/// The preamble's opening: when and where, and how many runs of how long.
pub fn measured_text(
    date: &str,
    host: &ironlun_bench::result::HostInfo,
    reps: usize,
    measure_s: f64,
) -> String {
    format!(
        "Measured {date} on {} ({} CPUs, kernel {}); {reps} alternating repetitions of \
         {measure_s:.1} s",
        host.cpu_model, host.cpus, host.kernel
    )
}
