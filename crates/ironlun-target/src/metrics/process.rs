//! The exposition's process families, under the names every Prometheus
//! client library uses (`process_cpu_seconds_total`, ...: dashboards and
//! alerts written for any exporter work unchanged), and
//! `ironlun_build_info`. The values come from crate::process at scrape
//! time; one the kernel does not give is left out.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use crate::process;

/// The git commit the binary was built from, where the build said
/// (`IRONLUN_GIT_COMMIT=$(git rev-parse --short HEAD) cargo build`): no
/// build script runs git, so a build from a source archive or offline
/// works the same.
const COMMIT: Option<&str> = option_env!("IRONLUN_GIT_COMMIT");

/// `ironlun_build_info`'s labels: the version, and the commit where the
/// build gave one.
pub(super) fn build_labels() -> Vec<(&'static str, &'static str)> {
    let mut l = vec![("version", env!("CARGO_PKG_VERSION"))];
    if let Some(c) = COMMIT.filter(|c| !c.is_empty()) {
        l.push(("commit", c));
    }
    l
}

/// Encodes `build_info` (under the caller's prefix): always 1, the
/// information is in the labels.
pub(super) fn encode_build_info(enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    let labels = build_labels();
    enc.encode_descriptor(
        "build_info",
        "Always 1; the labels say which ironlun this is: version, and commit where the build set IRONLUN_GIT_COMMIT.",
        None,
        MetricType::Gauge,
    )?
    .encode_family(&labels)?
    .encode_gauge(&1u64)
}

/// Reads the process at scrape time.
#[derive(Debug)]
pub(super) struct Process;

impl Collector for Process {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), fmt::Error> {
        let cpu = process::cpu_time().total_s;
        enc.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, u64>(&cpu, None)?;
        let mem = process::memory();
        let counts = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                mem.resident,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                mem.virtual_size,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                process::open_fds(),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                process::max_fds(),
            ),
        ];
        for (name, help, value) in counts {
            if let Some(v) = value {
                enc.encode_descriptor(name, help, None, MetricType::Gauge)?
                    .encode_gauge(&v)?;
            }
        }
        if let Some(start) = process::start_time() {
            enc.encode_descriptor(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&start)?;
        }
        Ok(())
    }
}
