//! The per-LUN families of the exposition, read at scrape time from the
//! LUs that exist then: commands, bytes and failed commands (the LU's
//! counters, ironlun-scsi's `stats`), latency histograms, capacity and
//! thin allocation, and whether the LUN is offline for its state files.

use std::fmt;

use ironlun_scsi::{Failure, IoKind, IoSnapshot, LatencySnapshot, LogicalUnit};
use ironlun_scsi_codes::SenseKey;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::label_of;
use crate::registry::Registry;

/// One LUN as a scrape sees it.
pub(super) struct LunNow {
    target: String,
    lun: String,
    io: IoSnapshot,
    /// By [`IoKind::ALL`].
    latency: [LatencySnapshot; 3],
    /// Held offline by its state files (`lu_state.rs`).
    offline: bool,
    size_bytes: u64,
    /// Storage the store takes up now, for a thin LU whose store can say
    /// cheaply (a RAM LU's chunk count, a file's allocated blocks from
    /// fstat; not a block device or an RBD image).
    allocated_bytes: Option<u64>,
    /// Its snapshot schedule's counters, when it has one.
    schedule: Option<crate::schedule::ScheduleView>,
}

impl LunNow {
    fn of(r: &Registry, target: &str, lun: u16, lu: &LogicalUnit) -> LunNow {
        LunNow {
            schedule: r.schedules.view(target, lun),
            target: target.to_owned(),
            lun: lun.to_string(),
            io: lu.io_stats(),
            latency: IoKind::ALL.map(|k| lu.latency(k)),
            offline: lu.offline_reason().is_some(),
            size_bytes: lu.num_blocks().saturating_mul(u64::from(lu.block_size())),
            allocated_bytes: lu.thin().then(|| lu.backend().used_bytes()).flatten(),
        }
    }

    fn labels<'a>(&'a self, op: Option<&'static str>) -> Vec<(&'static str, &'a str)> {
        let mut l = vec![("target", self.target.as_str()), ("lun", self.lun.as_str())];
        l.extend(op.map(|op| ("op", op)));
        l
    }
}

/// Every LUN of every target that exists now.
pub(super) fn luns_now(r: &Registry) -> Vec<LunNow> {
    let mut out = Vec::new();
    for t in r.targets().iter() {
        for (n, lu) in t.luns.iter() {
            out.push(LunNow::of(r, &t.cfg.name, *n, lu));
        }
    }
    out
}

fn op_label(k: IoKind) -> &'static str {
    match k {
        IoKind::Read => "read",
        IoKind::Write => "write",
        IoKind::Other => "other",
    }
}

/// One family of per-LUN counters: its descriptor, then a sample per LUN
/// (and per op, where `values` gives several).
fn lun_counters(
    enc: &mut DescriptorEncoder,
    (name, help): (&str, &str),
    luns: &[LunNow],
    values: impl Fn(&IoSnapshot) -> Vec<(Option<&'static str>, u64)>,
) -> Result<(), fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for l in luns {
        for (op, v) in values(&l.io) {
            m.encode_family(&l.labels(op))?
                .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
        }
    }
    Ok(())
}

/// One family of per-LUN gauges, a sample per LUN where `value` gives one
/// (none at all: no family, rather than a family without samples).
fn lun_gauges(
    enc: &mut DescriptorEncoder,
    (name, help): (&str, &str),
    luns: &[LunNow],
    value: impl Fn(&LunNow) -> Option<u64>,
) -> Result<(), fmt::Error> {
    let samples: Vec<(&LunNow, u64)> = luns.iter().filter_map(|l| Some((l, value(l)?))).collect();
    if samples.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (l, v) in samples {
        m.encode_family(&l.labels(None))?.encode_gauge(&v)?;
    }
    Ok(())
}

pub(super) fn encode_luns(enc: &mut DescriptorEncoder, luns: &[LunNow]) -> Result<(), fmt::Error> {
    lun_counters(
        enc,
        (
            "lun_commands",
            "SCSI commands per LUN by op: read, write (including WRITE SAME, UNMAP, ...) or other.",
        ),
        luns,
        |io| {
            vec![
                (Some("read"), io.read_commands),
                (Some("write"), io.write_commands),
                (Some("other"), io.other_commands),
            ]
        },
    )?;
    lun_counters(
        enc,
        (
            "lun_bytes",
            "Data moved per LUN: returned by reads, received with writes.",
        ),
        luns,
        |io| {
            vec![
                (Some("read"), io.read_bytes),
                (Some("write"), io.write_bytes),
            ]
        },
    )?;
    encode_failed(enc, luns)?;
    encode_capacity(enc, luns)?;
    lun_gauges(
        enc,
        (
            "lun_offline",
            "1 while the LUN is offline because its state files do not parse (ironlun admin state says why), else 0.",
        ),
        luns,
        |l| Some(u64::from(l.offline)),
    )?;
    encode_schedules(enc, luns)?;
    let mut m = enc.encode_descriptor(
        "lun_command_duration_seconds",
        "Time from a SCSI command's arrival to its status being sent, per LUN and op.",
        None,
        MetricType::Histogram,
    )?;
    for l in luns {
        for (k, h) in IoKind::ALL.iter().zip(&l.latency) {
            let labels = l.labels(Some(op_label(*k)));
            encode_latency(&mut m.encode_family(&labels)?, h)?;
        }
    }
    Ok(())
}

/// The snapshot schedules' families (docs/snapshots.md, "Schedules"),
/// a sample per LUN that has a schedule; none without any.
fn encode_schedules(enc: &mut DescriptorEncoder, luns: &[LunNow]) -> Result<(), fmt::Error> {
    let scheduled: Vec<(&LunNow, &crate::schedule::ScheduleView)> = luns
        .iter()
        .filter_map(|l| Some((l, l.schedule.as_ref()?)))
        .collect();
    if scheduled.is_empty() {
        return Ok(());
    }
    type Count = fn(&crate::schedule::ScheduleView) -> u64;
    let counters: [(&str, &str, Count); 2] = [
        (
            "lun_snapshot_schedule_taken",
            "Snapshots the LUN's schedule took since the daemon started.",
            |v| v.taken,
        ),
        (
            "lun_snapshot_schedule_failures",
            "Runs of the LUN's snapshot schedule that failed (nothing taken, or a retention delete refused) since the daemon started; each is logged, and tried again at the next interval.",
            |v| v.failures,
        ),
    ];
    for (name, help, value) in counters {
        let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (l, v) in &scheduled {
            m.encode_family(&l.labels(None))?
                .encode_counter::<NoLabelSet, _, u64>(&value(v), None)?;
        }
    }
    lun_gauges(
        enc,
        (
            "lun_snapshot_schedule_kept",
            "The schedule's own snapshots the LUN keeps, as its last run left them.",
        ),
        luns,
        |l| l.schedule.as_ref()?.kept,
    )?;
    lun_gauges(
        enc,
        (
            "lun_snapshot_schedule_last_success_timestamp_seconds",
            "When the LUN's schedule last took a snapshot (Unix time); absent before its first.",
        ),
        luns,
        |l| l.schedule.as_ref()?.last_success,
    )
}

fn encode_capacity(enc: &mut DescriptorEncoder, luns: &[LunNow]) -> Result<(), fmt::Error> {
    lun_gauges(
        enc,
        (
            "lun_size_bytes",
            "The LUN's capacity as initiators see it (READ CAPACITY).",
        ),
        luns,
        |l| Some(l.size_bytes),
    )?;
    lun_gauges(
        enc,
        (
            "lun_allocated_bytes",
            "Storage a thin LUN takes up now (RAM chunks, or the file's allocated blocks); only thin LUNs whose store can say.",
        ),
        luns,
        |l| l.allocated_bytes,
    )
}

/// A failure class's labels: `status` and `sense_key`, from the codes'
/// standard names (`check_condition`, `medium_error`, ...). `none`: no
/// sense key (another status, or sense data that did not parse); a status
/// without a name is `other`.
pub(super) fn failure_labels(f: Failure) -> (String, String) {
    let status = label_of(f.status().and_then(|s| s.name()));
    let key = f
        .sense_key()
        .map_or_else(|| "none".to_owned(), |k| label_of(k.name()));
    (status, key)
}

/// Whether a class has a series in every scrape, 0 included: the ones an
/// operator alerts on or graphs (an alert's `increase` over a series that
/// appears only with its first event misses that event). The others
/// (NO SENSE, BLANK CHECK, ...) show only once they count.
fn always_shown(f: Failure) -> bool {
    match f {
        Failure::CheckCondition(Some(k)) => ALWAYS_SHOWN_KEYS.contains(&k),
        Failure::CheckCondition(None) | Failure::AcaActive | Failure::OtherStatus => false,
        Failure::Busy
        | Failure::ReservationConflict
        | Failure::TaskSetFull
        | Failure::TaskAborted => true,
    }
}

/// The sense keys of [`always_shown`].
const ALWAYS_SHOWN_KEYS: [SenseKey; 8] = [
    SenseKey::NOT_READY,
    SenseKey::MEDIUM_ERROR,
    SenseKey::HARDWARE_ERROR,
    SenseKey::ILLEGAL_REQUEST,
    SenseKey::UNIT_ATTENTION,
    SenseKey::DATA_PROTECT,
    SenseKey::ABORTED_COMMAND,
    SenseKey::MISCOMPARE,
];

/// `lun_failed_commands` by status and sense key: its sum over both is
/// what the family counted before it had them (every status but GOOD).
fn encode_failed(enc: &mut DescriptorEncoder, luns: &[LunNow]) -> Result<(), fmt::Error> {
    let classes: Vec<(Failure, (String, String))> =
        Failure::all().map(|f| (f, failure_labels(f))).collect();
    let mut m = enc.encode_descriptor(
        "lun_failed_commands",
        "SCSI commands per LUN that ended with a status other than GOOD, by status and (for check_condition) sense_key; alert on medium_error and hardware_error, not on illegal_request or unit_attention, which healthy initiators meet.",
        None,
        MetricType::Counter,
    )?;
    for l in luns {
        for (f, (status, key)) in &classes {
            let n = l.io.failed(*f);
            if n == 0 && !always_shown(*f) {
                continue;
            }
            let mut labels = l.labels(None);
            labels.extend([("status", status.as_str()), ("sense_key", key.as_str())]);
            m.encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
        }
    }
    Ok(())
}

/// One latency histogram in seconds.
fn encode_latency(m: &mut MetricEncoder, h: &LatencySnapshot) -> Result<(), fmt::Error> {
    let bounds = ironlun_scsi::stats::LATENCY_BOUNDS_NS
        .iter()
        .map(|ns| *ns as f64 / 1e9)
        .chain([f64::INFINITY]);
    let buckets: Vec<(f64, u64)> = bounds.zip(h.buckets).collect();
    m.encode_histogram::<NoLabelSet>(h.sum_ns as f64 / 1e9, h.count(), &buckets, None)
}
