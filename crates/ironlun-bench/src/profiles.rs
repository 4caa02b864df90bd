//! Built-in workloads: every workload of the published studies
//! (`docs/studies.md`; "section N" in a description is that page's
//! section N) by name, and the data-integrity soak. Run times are short
//! defaults (`--time`/`--ramp` override them); the published setups are
//! in each description.

use crate::spec::{AccessLine, SeekRange, Workload, SECTOR};

const K: u32 = 1024;
/// The disk benchmark's transfer size (section 2).
const DISK_BS: u32 = 64 * K;

fn line(size: u32, read: u32, random: u32) -> AccessLine {
    AccessLine::simple(size, read, random)
}

fn one(name: &str, description: &str, l: AccessLine, qd: u32) -> Workload {
    Workload::simple(name, description, l, qd)
}

const APP: &str = "Initiator study (section 1): IOMeter application spec; published runs: 4 LUNs x 4 GiB, one worker each, 4 min + 60 s ramp, median of 3";

/// The twelve application access specifications (section 1).
fn app_specs() -> Vec<Workload> {
    // name, size KiB, % read, % random, outstanding I/Os
    let table: [(&str, u32, u32, u32, u32); 12] = [
        ("web-file-server-4k", 4, 95, 75, 64),
        ("web-file-server-8k", 8, 95, 75, 28),
        ("web-file-server-64k", 64, 95, 75, 20),
        ("dss-1m", 1024, 100, 100, 4),
        ("media-streaming-64k", 64, 98, 0, 1),
        ("sql-server-log-64k", 64, 0, 0, 1),
        ("os-paging-64k", 64, 90, 0, 1),
        ("web-server-log-8k", 8, 0, 0, 12),
        ("db-oltp-8k", 8, 70, 100, 28),
        ("exchange-email-4k", 4, 67, 100, 52),
        ("os-drive-8k", 8, 70, 100, 28),
        ("video-on-demand-512k", 512, 100, 100, 4),
    ];
    table
        .iter()
        .map(|&(name, kib, read, random, qd)| {
            // The study's offsets were sector aligned.
            let l = AccessLine {
                align: SECTOR,
                ..line(kib * K, read, random)
            };
            one(name, APP, l, qd)
        })
        .collect()
}

fn file_server(name: &str, read: u32) -> Workload {
    // Transfer sizes and shares of IOMeter's "Simulated File Server".
    let mix: [(u32, u32); 8] = [
        (512, 10),
        (K, 5),
        (2 * K, 5),
        (4 * K, 60),
        (8 * K, 2),
        (16 * K, 4),
        (32 * K, 4),
        (64 * K, 10),
    ];
    Workload {
        name: name.to_owned(),
        description: format!(
            "Target study (section 2): Simulated File Server mix, {read}% read, 100% random, sector aligned, 60 outstanding"
        ),
        lines: mix
            .iter()
            .map(|&(size, share)| AccessLine {
                share,
                align: SECTOR,
                ..line(size, read, 100)
            })
            .collect(),
        queue_depth: 60,
        ..one(name, "", line(512, 0, 0), 60)
    }
}

fn disk(name: &str, description: &str, l: AccessLine, qd: u32) -> Workload {
    one(name, description, l, qd)
}

/// Disk-benchmark style tests with 64 KiB blocks (section 2) and the
/// dd-style sequential tests (section 3).
fn disk_tests() -> Vec<Workload> {
    let b = DISK_BS;
    let delayed = |read| AccessLine {
        delay_ms: 1,
        ..line(b, read, 0)
    };
    let [core_read, core_write] = core_tests();
    let [zones_read, zones_write] = zone_tests();
    vec![
        disk(
            "dd-read-512k",
            "Target comparison (section 3): dd if=LUN bs=512K, sequential read",
            line(512 * K, 100, 0),
            1,
        ),
        disk(
            "dd-write-512k",
            "Target comparison (section 3): dd of=LUN bs=512K, sequential write",
            line(512 * K, 0, 0),
            1,
        ),
        disk(
            "db-random-4k",
            "Target comparison (section 3): database-like 4 KiB, mostly random, mixed, two threads",
            line(4 * K, 70, 90),
            1,
        )
        .with_workers(2),
        disk(
            "seq-read-64k",
            "Disk benchmark (section 2): sequential read, no delay",
            line(b, 100, 0),
            1,
        ),
        disk(
            "seq-write-64k",
            "Disk benchmark (section 2): sequential write, no delay",
            line(b, 0, 0),
            1,
        ),
        disk(
            "seq-read-64k-delay",
            "Disk benchmark (section 2): sequential read with 1 ms between requests (read-ahead)",
            delayed(100),
            1,
        ),
        disk(
            "seq-write-64k-delay",
            "Disk benchmark (section 2): sequential write with 1 ms between requests (write cache)",
            delayed(0),
            1,
        ),
        core_read,
        core_write,
        zones_read,
        zones_write,
        disk(
            "access-time-read",
            "Disk benchmark (section 2): random access time, read (mean latency, QD 1)",
            line(512, 100, 100),
            1,
        ),
        disk(
            "access-time-write",
            "Disk benchmark (section 2): random access time, write (mean latency, QD 1)",
            line(512, 0, 100),
            1,
        ),
    ]
}

/// Repetitive sequential read and write of one 8 MiB region, 64 KiB
/// at a time (section 2).
fn core_tests() -> [Workload; 2] {
    let mut read = disk(
        "core-read-64k",
        "Disk benchmark (section 2): repetitive sequential read of one 8 MiB region",
        line(DISK_BS, 100, 0),
        1,
    );
    read.seek = SeekRange {
        start: 0,
        length: 8 << 20,
    };
    let write = writing(
        &read,
        "core-write-64k",
        "Disk benchmark (section 2): repetitive sequential write of one 8 MiB region",
    );
    [read, write]
}

/// Sustained read and write rates per zone across the whole LUN, 64 KiB
/// at a time (section 2), one request at a time as h2benchw issues them
/// (the study: its fixed 128-sector blocks held the zone read near
/// 75 MB/s, the level of its other one-at-a-time 64 KiB tests).
fn zone_tests() -> [Workload; 2] {
    let mut read = disk(
        "zones-read-64k",
        "Disk benchmark (section 2): sustained read rate per zone across the whole LUN",
        line(DISK_BS, 100, 0),
        1,
    );
    read.zones = Some(16);
    let write = writing(
        &read,
        "zones-write-64k",
        "Disk benchmark (section 2): sustained write rate per zone across the whole LUN",
    );
    [read, write]
}

/// A sequential read test's twin that writes instead.
fn writing(read: &Workload, name: &str, description: &str) -> Workload {
    let mut write = read.clone();
    write.name = name.into();
    write.description = description.into();
    write.lines = vec![line(DISK_BS, 0, 0)];
    write
}

impl Workload {
    fn with_workers(mut self, n: u32) -> Self {
        self.workers = n;
        self
    }
}

/// The data-integrity soak: mixed sizes from 4 KiB to 1 MiB, half
/// writes, small transfers random and large ones sequential, so that
/// writes of every size overlap reads and each other. Meant for
/// `--verify --sessions 16` (every size is a multiple of 4096, so it runs
/// on 512- and 4096-byte-block LUNs alike).
fn verify_soak() -> Workload {
    let mix: [(u32, u32, u32); 6] = [
        (4 * K, 30, 100),
        (8 * K, 15, 100),
        (16 * K, 10, 100),
        (64 * K, 20, 50),
        (256 * K, 15, 0),
        (1024 * K, 10, 0),
    ];
    Workload {
        lines: mix
            .iter()
            .map(|&(size, share, random)| AccessLine {
                share,
                ..line(size, 50, random)
            })
            .collect(),
        time_s: 20.0,
        ..one(
            "verify-soak",
            "Data-integrity soak: 4 KiB-1 MiB mix, 50% writes; run with --verify --sessions 16 (scripts/test runs 20 s; --time 1h for a long soak)",
            line(4 * K, 50, 100),
            8,
        )
    }
}

/// Every built-in workload.
pub fn all() -> Vec<Workload> {
    let mut v = app_specs();
    v.push(file_server("file-server", 80));
    v.push(file_server("file-server-50", 50));
    v.extend(disk_tests());
    v.push(verify_soak());
    v
}

/// A built-in workload by name.
pub fn find(name: &str) -> Option<Workload> {
    all().into_iter().find(|w| w.name == name)
}

/// Named groups of profiles.
pub fn group(name: &str) -> Option<Vec<Workload>> {
    match name {
        "app-profiles" => Some(app_specs()),
        "disk-tests" => Some(disk_tests()),
        _ => None,
    }
}

/// A group by name, else a single profile by name; an unknown name is an
/// error that says where the names are listed.
pub fn lookup(name: &str) -> Result<Vec<Workload>, String> {
    group(name)
        .or_else(|| find(name).map(|w| vec![w]))
        .ok_or_else(|| format!("unknown profile '{name}' (see ironlun bench --list)"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_profile_is_valid_and_named_once() {
        let all = all();
        for w in &all {
            w.validate().unwrap();
        }
        let mut names: Vec<_> = all.iter().map(|w| w.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert_eq!(group("app-profiles").unwrap().len(), 12);
        let fs = find("file-server").unwrap();
        assert_eq!(fs.lines.len(), 8);
        assert_eq!(fs.queue_depth, 60);
        assert_eq!(find("exchange-email-4k").unwrap().queue_depth, 52);
    }

    #[test]
    fn lookup_takes_groups_then_names() {
        assert_eq!(lookup("disk-tests").unwrap(), disk_tests());
        let one = lookup("db-oltp-8k").unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].name, "db-oltp-8k");
        let e = lookup("nope").unwrap_err();
        assert!(e.contains("'nope'") && e.contains("--list"), "{e}");
    }
}
