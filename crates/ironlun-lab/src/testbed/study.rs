//! Each study's testbed: what its text declares (line rate, MTU, cores),
//! which knobs the fit may move and within what bounds, and how each of
//! its published cells reads as a load the model knows. A cell the
//! profile cannot describe (another vendor's target, offload hardware, a
//! copy through a file system and its cache) gets the reason instead.

use std::collections::BTreeMap;

use super::load::{Disk, Load, Quantity, Shape};
use super::profile::{Declared, Knob, Testbed};
use crate::published::{Metric, PublishedCell};

/// A study's starting testbed, the knobs its model uses, and how its
/// cells read.
pub struct StudyModel {
    pub testbed: Testbed,
    /// Knobs the model of this study uses (printed; the rest are neutral).
    pub used: Vec<Knob>,
    shape: fn(&PublishedCell) -> Result<Shape, String>,
}

impl StudyModel {
    /// The cell as a load, or why the profile does not model it.
    pub fn shape(&self, cell: &PublishedCell) -> Result<Shape, String> {
        (self.shape)(cell)
    }
}

/// The model of `study`, if it has one.
pub fn model(study: &str) -> Option<StudyModel> {
    match study {
        "wan-tuning" => Some(wan_tuning()),
        "target-backends" => Some(target_backends()),
        "ramdisk-target" => Some(ramdisk_target()),
        "app-profiles" => Some(app_profiles()),
        _ => None,
    }
}

/// What of the profile the study's measured rows run under.
pub fn imposed(study: &str) -> &'static str {
    match study {
        "app-profiles" => "the workload rows run through the relay at the fitted profile's link payload rate (1 Gbit/s, jumbo frames) and round trip, and under its disk (each command held on one of the target's four arrays for the access time of the random share plus its bytes at the disk rate); its host costs are not imposed, so the hosts are this machine's, and the initiator comparison's runs (whose CPU per I/O the CPU cells take) have the link only",
        "wan-tuning" => "the measured rows run through the relay under the fitted profile: the link payload rate, the testbed's round trip added to the study's, the effective TCP window (iSCSI rows; the TCP rows keep the fitted share of their declared window in flight), and the hosts' time per command held by the relay less this machine's own at queue depth 1, with the hosts' cores; and the target's write cap as the writes the initiator keeps outstanding",
        "target-backends" => "the measured rows, ironlun's and the other targets', run through the relay under the fitted profile: the link payload rate (1 Gbit/s, and the MPIO paths' 100 Mbit/s, at MTU 1500), the testbed's round trip, and the hosts' time per command held by the relay less this machine's own at queue depth 1, with the hosts' one core; the profile has no window or write cap, and its disk rate is not imposed (the backends are this machine's)",
        "ramdisk-target" => "the measured rows run through the relay under the fitted profile, in each scenario's network namespace: the link payload rate (1 Gbit/s at MTU 1500), the testbed's round trip in place of an emulated one, the TCP rows keeping the fitted share of their declared window in flight, and the hosts' time per command (at a workload's mean request size) held by the relay less this machine's own at queue depth 1, with the hosts' cores; not the fitted window on the iSCSI rows (the relay's credit loop does not carry a window that small faithfully here), and the file copies through the kernel initiator in the VM run without the profile",
        _ => "the measured rows run under the lab's link emulation at the rates and round trips the study names, not yet the fitted profile's; its host costs, window, write cap and disk times are not imposed, so their in-sample and out-of-sample shares are split by the same rule but not moved by the fit",
    }
}

/// Bytes in "1KiB", "64KiB", "1MiB", "10MB", "512B".
fn bytes(s: &str) -> Option<f64> {
    let units = [
        ("KiB", 1024.0),
        ("MiB", 1_048_576.0),
        ("MB", 1e6),
        ("B", 1.0),
    ];
    units.iter().find_map(|(u, k)| {
        let n = s.strip_suffix(u)?;
        n.parse::<f64>().ok().map(|v| v * k)
    })
}

/// Seconds in "10ms".
fn millis(s: &str) -> Option<f64> {
    s.strip_suffix("ms")?.parse::<f64>().ok().map(|v| v / 1e3)
}

fn get<'a>(c: &'a BTreeMap<String, String>, key: &str) -> Result<&'a str, String> {
    c.get(key)
        .map(String::as_str)
        .ok_or_else(|| format!("no {key} in the cell's conditions"))
}

fn parsed<T>(v: Option<T>, what: &str) -> Result<T, String> {
    v.ok_or_else(|| format!("cannot read {what}"))
}

/// The quantity a metric reports of a load.
fn quantity(m: Metric) -> Result<Quantity, String> {
    Ok(match m {
        Metric::Throughput => Quantity::Throughput,
        Metric::ReadThroughput => Quantity::ReadThroughput,
        Metric::WriteThroughput => Quantity::WriteThroughput,
        Metric::Iops | Metric::Transactions => Quantity::Iops,
        Metric::ReadIops => Quantity::ReadIops,
        Metric::WriteIops => Quantity::WriteIops,
        Metric::Latency | Metric::TransactionTime | Metric::AccessTime => Quantity::Latency,
        Metric::ReadLatency => Quantity::ReadLatency,
        Metric::WriteLatency => Quantity::WriteLatency,
        Metric::Cpu => Quantity::Cpu,
        m => return Err(format!("the profile has no model of {}", m.name())),
    })
}

fn gigabit(mtu: u32, initiator_cores: u32, target_cores: u32) -> Declared {
    Declared {
        line_bits_per_s: 1e9,
        mtu,
        tcp_options: 0,
        initiator_cores,
        target_cores,
    }
}

/// Host costs every study fits: the testbed's round trip (10 to 500 µs:
/// a switched LAN of the time, its NICs' interrupt coalescing included),
/// per-command time at each end, per-byte time.
fn hosts(tb: Testbed) -> Testbed {
    tb.free(Knob::BaseRtt, 150.0, 10.0, 500.0)
        .free(Knob::HostInitiator, 50.0, 1.0, 2000.0)
        .free(Knob::HostTarget, 50.0, 1.0, 2000.0)
        .free(Knob::HostPerByte, 1.0, 0.01, 100.0)
}

/// LAN/MAN/WAN study (seed 004): OC-3 (155 Mbit/s) emulated between a
/// two-processor initiator and the target appliance; a 1 Gbit/s LAN
/// table.
fn wan_tuning() -> StudyModel {
    let declared = Declared {
        line_bits_per_s: 155e6,
        mtu: 1500,
        tcp_options: 0,
        initiator_cores: 2,
        target_cores: 2,
    };
    let tb = hosts(Testbed::new(declared))
        .free(Knob::WindowShare, 0.7, 0.1, 1.0)
        .free(Knob::TcpWindow, 1024.0, 16.0, 65536.0)
        .free(Knob::WriteCapCmds, 16.0, 1.0, 256.0)
        .free(Knob::WriteCapBytes, 256.0, 16.0, 65536.0);
    StudyModel {
        used: tb.free_knobs(),
        testbed: tb,
        shape: wan_cell,
    }
}

fn wan_cell(cell: &PublishedCell) -> Result<Shape, String> {
    let c = &cell.conditions;
    let rtt = parsed(millis(get(c, "rtt")?), "rtt")?;
    match get(c, "test")? {
        "tcp" => Ok(Shape::Tcp {
            window: parsed(bytes(get(c, "window")?), "window")?,
            added_rtt_s: rtt,
            line_bits_per_s: None,
        }),
        "iscsi" => {
            let line = match get(c, "link")? {
                "1Gbit" => Some(1e9),
                _ => None,
            };
            let op = get(c, "op")?;
            let bs = parsed(bytes(get(c, "bs")?), "bs")?;
            let qd: f64 = parsed(get(c, "qd")?.parse().ok(), "qd")?;
            let mut load = Load::simple(op == "read", bs, qd);
            load.added_rtt_s = rtt;
            load.line_bits_per_s = line;
            load.write_round_trips = if op == "solicited-write" { 2.0 } else { 1.0 };
            Ok(Shape::Io(load, quantity(cell.metric)?))
        }
        t => Err(format!("no model of test {t}")),
    }
}

/// Target study (seed 002): 1 Gbit/s, a Hyper-Threaded Xeon target and a
/// Xeon initiator, a disk behind FILEIO and BLOCKIO, two 100 Mbit/s paths
/// for MPIO.
fn target_backends() -> StudyModel {
    let tb = hosts(Testbed::new(gigabit(1500, 1, 1))).free(Knob::DiskRate, 80.0, 5.0, 1000.0);
    StudyModel {
        used: tb.free_knobs(),
        testbed: tb,
        shape: target_cell,
    }
}

/// What the Linux initiator of the time kept outstanding: reads in its
/// 128 KiB read-ahead, two at once; writes through the page cache's
/// write-back as 512 KiB requests, eight at once (assumptions, not the
/// study's figures).
fn linux_sequential(read: bool) -> Load {
    let mut l = if read {
        Load::simple(true, 131_072.0, 2.0)
    } else {
        Load::simple(false, 524_288.0, 8.0)
    };
    // FirstBurstLength 256 KiB: the rest of a 512 KiB write waits for an
    // R2T (RFC 7143 §13.14).
    l.write_round_trips = 2.0;
    l
}

fn target_cell(cell: &PublishedCell) -> Result<Shape, String> {
    let c = &cell.conditions;
    if let Some(t) = c.get("target").filter(|t| *t != "iscsi-scst") {
        return Err(format!(
            "{t} is another vendor's target: the profile is the testbed, not that target's software"
        ));
    }
    if c.contains_key("compare") && c.get("compare").is_none_or(|v| v != "2 paths over 1") {
        return Err("compares targets or backends the profile does not tell apart".into());
    }
    let disk = match c.get("backend").map(String::as_str) {
        Some("null") => Disk::None,
        Some("file" | "block" | "disk") => Disk::Sequential,
        _ => return Err("no backend named".into()),
    };
    let test = get(c, "test")?;
    let load = |read: bool| {
        let mut l = linux_sequential(read);
        l.disk = disk;
        l
    };
    match test {
        "dd-read-raw" | "fs-read" => Ok(Shape::Io(load(true), quantity(cell.metric)?)),
        "dd-write-raw" | "fs-write" => Ok(Shape::Io(load(false), quantity(cell.metric)?)),
        "mpio-read" => {
            let paths = |n: f64| {
                let mut l = load(true);
                l.links = n;
                l.outstanding *= n;
                l.line_bits_per_s = Some(100e6);
                l
            };
            if cell.metric == Metric::Gain {
                return Ok(Shape::Gain(paths(2.0), paths(1.0)));
            }
            let n: f64 = parsed(get(c, "paths")?.parse().ok(), "paths")?;
            Ok(Shape::Io(paths(n), quantity(cell.metric)?))
        }
        "db-random" => Err("the job's size is not published: its duration has no model".into()),
        t => Err(format!("no model of test {t}")),
    }
}

/// Microsoft target whitepaper (seeds 000/003): 1 Gbit/s without jumbo
/// frames, a quad-core initiator and a two-socket dual-core target, a
/// RAM disk.
fn ramdisk_target() -> StudyModel {
    let tb = hosts(Testbed::new(gigabit(1500, 4, 4)))
        .free(Knob::WindowShare, 0.7, 0.1, 1.0)
        .free(Knob::TcpWindow, 64.0, 16.0, 4096.0);
    StudyModel {
        used: tb.free_knobs(),
        testbed: tb,
        shape: ramdisk_cell,
    }
}

/// The file-server mix's sizes (share %, bytes), as the workload lists
/// them.
const FILE_SERVER: [(f64, f64); 8] = [
    (10.0, 512.0),
    (5.0, 1024.0),
    (5.0, 2048.0),
    (60.0, 4096.0),
    (2.0, 8192.0),
    (4.0, 16384.0),
    (4.0, 32768.0),
    (10.0, 65536.0),
];

fn ramdisk_cell(cell: &PublishedCell) -> Result<Shape, String> {
    let c = &cell.conditions;
    if c.contains_key("summary") || c.contains_key("compare") {
        return Err("a summary of other cells, not a load".into());
    }
    let test = get(c, "test")?;
    let one = |read: bool, bytes: f64| {
        Ok(Shape::Io(
            Load::simple(read, bytes, 1.0),
            quantity(cell.metric)?,
        ))
    };
    match test {
        "tcp" => Ok(Shape::Tcp {
            window: parsed(bytes(get(c, "window")?), "window")?,
            added_rtt_s: 0.0,
            line_bits_per_s: None,
        }),
        "file-server" => {
            if cell.metric == Metric::Connections {
                return Err("the mix opens no connections (published 0)".into());
            }
            let read: f64 = parsed(get(c, "read")?.parse().ok(), "read")?;
            // One session is one TCP connection, and a team carries a
            // connection on one of its links (link aggregation keeps a
            // conversation's frames on one link, in order, IEEE 802.1AX):
            // a team adds no rate to it.
            let load = Load {
                read: read / 100.0,
                sizes: FILE_SERVER.to_vec(),
                ..Load::simple(true, 0.0, 60.0)
            };
            Ok(Shape::Io(load, quantity(cell.metric)?))
        }
        "seq-read-64k" | "seq-read-64k-delay" | "core-read-64k" | "zones-read-64k" => {
            one(true, 65536.0)
        }
        "seq-write-64k" | "seq-write-64k-delay" | "core-write-64k" | "zones-write-64k" => {
            one(false, 65536.0)
        }
        "access-time-read" => one(true, 512.0),
        "access-time-write" => one(false, 512.0),
        t => Err(format!(
            "{t}: a copy through a file system and its caches, which the profile does not model"
        )),
    }
}

/// Initiator study (seed 001): 1 Gbit/s with jumbo frames, two quad-core
/// Xeons at the initiator, four disk arrays as the target (counted as its
/// four servers), so a disk's random access time.
fn app_profiles() -> StudyModel {
    let tb = hosts(Testbed::new(gigabit(9000, 8, 4)))
        .free(Knob::DiskAccess, 1.0, 0.01, 20.0)
        .free(Knob::DiskRate, 500.0, 50.0, 5000.0);
    StudyModel {
        used: tb.free_knobs(),
        testbed: tb,
        shape: profile_cell,
    }
}

/// The twelve access specifications: (name, KiB, % read, % random,
/// outstanding).
const SPECS: [(&str, f64, f64, f64, f64); 12] = [
    ("web-file-server-4k", 4.0, 95.0, 75.0, 64.0),
    ("web-file-server-8k", 8.0, 95.0, 75.0, 28.0),
    ("web-file-server-64k", 64.0, 95.0, 75.0, 20.0),
    ("dss-1m", 1024.0, 100.0, 100.0, 4.0),
    ("media-streaming-64k", 64.0, 98.0, 0.0, 1.0),
    ("sql-server-log-64k", 64.0, 0.0, 0.0, 1.0),
    ("os-paging-64k", 64.0, 90.0, 0.0, 1.0),
    ("web-server-log-8k", 8.0, 0.0, 0.0, 12.0),
    ("db-oltp-8k", 8.0, 70.0, 100.0, 28.0),
    ("exchange-email-4k", 4.0, 67.0, 100.0, 52.0),
    ("os-drive-8k", 8.0, 70.0, 100.0, 28.0),
    ("video-on-demand-512k", 512.0, 100.0, 100.0, 4.0),
];

fn profile_cell(cell: &PublishedCell) -> Result<Shape, String> {
    let c = &cell.conditions;
    let ini = get(c, "initiator")?;
    if ini != "software-broadcom" {
        return Err(format!(
            "{ini}: offload hardware or another NIC, not the testbed the profile describes"
        ));
    }
    let spec = get(c, "spec")?;
    let (_, kib, read, random, qd) = SPECS
        .iter()
        .find(|s| s.0 == spec)
        .ok_or_else(|| format!("no access specification {spec}"))?;
    let mut load = Load::simple(true, kib * 1024.0, *qd);
    load.read = read / 100.0;
    load.disk = Disk::Random(random / 100.0);
    Ok(Shape::Io(load, quantity(cell.metric)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_round_trips_read_as_the_data_files_write_them() {
        assert_eq!(bytes("64KiB"), Some(65536.0));
        assert_eq!(bytes("10MB"), Some(1e7));
        assert_eq!(bytes("512B"), Some(512.0));
        assert_eq!(bytes("big"), None);
        assert_eq!(millis("50ms"), Some(0.05));
        assert_eq!(millis("50"), None);
    }

    #[test]
    fn the_file_server_mix_is_whole() {
        let total: f64 = FILE_SERVER.iter().map(|(s, _)| s).sum();
        assert!((total - 100.0).abs() < 1e-9);
    }
}
