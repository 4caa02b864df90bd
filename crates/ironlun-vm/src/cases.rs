//! The guest-side cases: busybox shell scripts run by the guest's `/init`
//! with `/lib.sh`'s helpers. Each reports evidence lines the host checks
//! against what it can see itself (the LUN's backing file).

/// A guest script and the variables it needs besides the portal.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub name: &'static str,
    pub about: &'static str,
    pub script: &'static str,
}

/// Case 1: discovery, login, mkfs.ext4, mount, files with known SHA-256,
/// sync, unmount, `e2fsck -fn`, remount and verify, raw read, logout.
pub const BASIC: Case = Case {
    name: "basic",
    about: "discovery, login, mkfs.ext4, files with known SHA-256, e2fsck, remount and verify, raw read, logout",
    script: include_str!("../assets/cases/basic.sh"),
};

/// Case 2 (CHAP): one-way or mutual CHAP from `CHAP_USER`/`CHAP_SECRET`
/// (and `MUTUAL_USER`/`MUTUAL_SECRET`); `WRONG_SECRET=1` expects refusal.
/// Case 2 with digests is [`BASIC`] with `HEADER_DIGEST`/`DATA_DIGEST`.
pub const CHAP: Case = Case {
    name: "chap",
    about: "login with one-way or mutual CHAP, file round trip; or refusal of a wrong secret",
    script: include_str!("../assets/cases/chap.sh"),
};

/// Case 3: two LUNs (`LBS0`, `LBS1` = their logical block sizes).
pub const TWO_LUNS: Case = Case {
    name: "two-luns",
    about: "two LUNs of different backends and block sizes in one session, ext4 on each",
    script: include_str!("../assets/cases/two-luns.sh"),
};

/// Case 4: files written with `sync` after each while the host kills and
/// restarts the target (`FILES` files of 2 MiB).
pub const RESTART: Case = Case {
    name: "restart",
    about:
        "target killed and restarted during writes: reconnect, resume, e2fsck, verify synced files",
    script: include_str!("../assets/cases/restart.sh"),
};

/// Case 5: `fstrim` on a thin LUN (`MIB` MiB written, then deleted).
pub const FSTRIM: Case = Case {
    name: "fstrim",
    about: "fstrim on ext4 reaches a thin LUN as UNMAP",
    script: include_str!("../assets/cases/fstrim.sh"),
};

/// Case 6: LUN 1 added (`LUN1_BYTES`) and then grown (`LUN1_RESIZED`)
/// by the host while ext4 stays mounted on LUN 0; the guest finds each
/// change by rescanning, for at most `WAIT_S` seconds.
pub const LIVE_LUN: Case = Case {
    name: "live-lun",
    about: "a LUN added live and grown, found by rescans, while ext4 stays mounted on LUN 0",
    script: include_str!("../assets/cases/live-lun.sh"),
};

/// The file-system rows of the published studies: a `FILE_MB` MB file
/// written and read with 512 KiB blocks, and file copies scaled down by
/// `COPY_SCALE`; each test reports `test=NAME bytes=N ms=T`.
pub const FS_BENCH: Case = Case {
    name: "fs-bench",
    about: "1000 MB file write/read with 512 KiB blocks and the file-copy tests through ext4",
    script: include_str!("../assets/cases/fs-bench.sh"),
};

/// The kernel initiator's CPU per I/O (app-profiles' initiator
/// comparison): fio, carried in as a [`crate::bundle`] (`/opt/fio`), times
/// `CAL_HASH` checksums (`CAL_RUNS` times) and runs each of `SPECS`
/// (`NAME:SIZE:READ_PCT:RANDOM_PCT:QD`) on LUN `LUN`; the guest's
/// /proc/stat ticks and the LUN's sectors are read over a `MEASURE_MS`
/// window opened `RAMP_MS` after the first I/O.
pub const FIO_CPU: Case = Case {
    name: "fio-cpu",
    about: "the kernel initiator's CPU per I/O: fio's access specifications on the raw LUN, the guest's CPU ticks over a window, and a fixed checksum load for calibration",
    script: include_str!("../assets/cases/fio-cpu.sh"),
};

/// ALUA through two gateways (`PORT2` the second's port): scsi_dh_alua
/// attaches to both paths with their states, one WWID; after the host
/// swaps the states (on `phase=alua-seen`), reads through path 1 meet
/// ASYMMETRIC ACCESS STATE CHANGED and the kernel takes the new states
/// (within `WAIT_S` seconds).
pub const ALUA: Case = Case {
    name: "alua",
    about: "two gateways as two paths: scsi_dh_alua's states, one WWID, a swap of states seen through a unit attention",
    script: include_str!("../assets/cases/alua.sh"),
};

/// dm-multipath over two gateways (`PORT2` the second's port) with the
/// settings docs/ha.md gives: one map, gateway 1's path in the active
/// group; after the host swaps the ALUA states (on `phase=mpath-seen`)
/// I/O through the map goes on without an error while the map moves to
/// gateway 2's path (within `WAIT_S` seconds).
pub const MULTIPATH: Case = Case {
    name: "multipath",
    about: "dm-multipath (prio alua, group_by_prio) over two gateways: one map, no failed I/O while a swap of ALUA states moves it to the other path",
    script: include_str!("../assets/cases/multipath.sh"),
};

/// Failover of a gateway group on RBD through dm-multipath: gateways
/// at `PORTAL1` (the owner) and `PORTAL2` serving `HA_IQN`, ext4 on the
/// map and a writer that records each file's SHA-256 once its fsync
/// returned; per trial (`TRIALS`) the host kill -9s the owner on
/// `phase=kill` and starts it again on `phase=failed-over`, and the
/// writer must never fail (each wait bounded by `WAIT_S` seconds).
pub const HA_FAILOVER: Case = Case {
    name: "ha-failover",
    about: "a gateway group on RBD through dm-multipath: kill -9 of the owner mid-write, I/O goes on through the survivor, failback, every acknowledged file verifies",
    script: include_str!("../assets/cases/ha-failover.sh"),
};

/// A snapshot of a LUN taken while ext4 on it is written (issue 39):
/// on `phase=snapshot` the host snapshots LUN 0 while the guest's writer
/// goes on, and adds a clone of it as LUN 1 and the snapshot itself,
/// read-only, as LUN 2; the guest replays the journal on the clone,
/// checks it and its files, and shows that the read-only snapshot needs
/// `noload` (each wait bounded by `WAIT_S` seconds).
pub const SNAPSHOT: Case = Case {
    name: "snapshot",
    about: "a snapshot taken while ext4 is written: its clone mounted after journal replay, e2fsck clean, the files written before it verified; the read-only snapshot mounted with noload",
    script: include_str!("../assets/cases/snapshot.sh"),
};

/// Every case.
pub const ALL: &[Case] = &[
    BASIC,
    CHAP,
    TWO_LUNS,
    RESTART,
    FSTRIM,
    LIVE_LUN,
    FS_BENCH,
    FIO_CPU,
    ALUA,
    MULTIPATH,
    HA_FAILOVER,
    SNAPSHOT,
];

/// The case called `name`.
pub fn find(name: &str) -> Option<&'static Case> {
    ALL.iter().find(|c| c.name == name)
}
