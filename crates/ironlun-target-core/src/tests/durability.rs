//! Durability below kill -9 (issue 36, item 5): for every command that
//! writes, in each mode (FUA, the write cache turned off with MODE
//! SELECT, neither) and on every path the daemon runs it on, the store
//! was asked to make the data durable (a durable write, or a flush after
//! the writes) before the core produced GOOD; and with the write cache
//! on and no FUA it was not (write-back is kept).
//!
//! The LU's store is a [`Recorder`] around the real one (RAM, a file
//! buffered or with `O_DIRECT`). The driver's part (ironlun-target's
//! `conn.rs`: the io_uring, the blocking pool, a network store's own
//! asynchronous path) is played here with the real pieces: a [`Ring`]
//! whose entries are read back as the kernel gets them, [`Command::run`],
//! [`Staged::run_here`], [`Staged::start_async`]. What the core transmits
//! is looked at after every step, so a status sent before a write would
//! be seen as such.
//!
//! The rules: FUA, or the write cache turned off (WCE = 0 in the caching
//! mode page, SBC-3 §6.4.5), puts a write's data on the medium before
//! its status (SBC-3 §4.11); WRITE AND VERIFY always (SBC-4 §5.42: the
//! data is verified on the medium); SYNCHRONIZE CACHE makes every earlier
//! write durable (SBC-3 §5.22). A deallocation (UNMAP, WRITE SAME with
//! UNMAP) with the write cache off is held to the rule of a write: the
//! blocks read back as zeros (LBPRZ) after a crash too.

use std::sync::Arc;

use bytes::Bytes;
use ironlun_backend::aio::block_on;
use ironlun_backend::ring::{Completion, Ring, Submitted};
use ironlun_backend::testing::record::{unsettled, Call, CallLog, Recorder};
use ironlun_backend::{Backend, FileBackend, FileOptions, RamBackend};
use ironlun_scsi::{LogicalUnit, LuConfig, LunMap};
use ironlun_scsi_codes::Status;
use ironlun_wire::{DataOut, Lun, Pdu, ScsiCommand};

use super::{lu_config, Session};
use crate::{Action, Dispatch, Staged};

const BS: usize = 512;
/// Where the writes go: byte 4096, 4096 bytes, so that `O_DIRECT` takes
/// them on its own descriptor.
const LBA: u64 = 8;
const BLOCKS: usize = 8;
const BYTES: usize = BS * BLOCKS;
const FUA: u8 = 0x08;

/// Where the daemon runs a command's medium access.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// A RAM LU: every command runs inside the core.
    Inline,
    /// A file LU with `io_engine = "pool"`: every command on the
    /// blocking pool ([`crate::Command::run`]).
    Pool { direct: bool },
    /// A file LU with the io_uring engine: READ, WRITE and SYNCHRONIZE
    /// CACHE on the ring, the other commands on the blocking pool.
    Uring { direct: bool },
    /// The io_uring engine with the ring full or unavailable: the staged
    /// accesses run on the blocking pool ([`Staged::run_here`]).
    RingRefused { direct: bool },
    /// A store with its own asynchronous path, write-same and
    /// compare-and-write (RBD): staged accesses through
    /// [`Staged::start_async`], the rest on the blocking pool.
    Network,
}

const ROUTES: [Route; 8] = [
    Route::Inline,
    Route::Pool { direct: false },
    Route::Pool { direct: true },
    Route::Uring { direct: false },
    Route::Uring { direct: true },
    Route::RingRefused { direct: false },
    Route::RingRefused { direct: true },
    Route::Network,
];

/// When a command must be durable before its status.
#[derive(Clone, Copy, Debug)]
enum Needs {
    /// With FUA, or with the write cache off.
    FuaOrCacheOff,
    /// With the write cache off (the CDB has no FUA bit).
    CacheOff,
    /// Always.
    Always,
}

/// One command of the table: its CDB (with or without FUA), Data-Out,
/// how much of it goes with the command (the rest on R2T), and whether a
/// plain write goes first (for SYNCHRONIZE CACHE to make durable).
struct Row {
    name: &'static str,
    cdb: fn(u8) -> Vec<u8>,
    data: Vec<u8>,
    immediate: usize,
    needs: Needs,
    write_first: bool,
}

fn be(v: u64, n: usize) -> Vec<u8> {
    v.to_be_bytes()[8 - n..].to_vec()
}

/// OP, FLAGS, then the LBA and length fields of `lba` and `len` bytes.
fn cdb(op: u8, flags: u8, lba: (u64, usize), len: (u64, usize), tail: usize) -> Vec<u8> {
    let mut c = vec![op, flags];
    c.extend(be(lba.0, lba.1));
    if lba.1 == 4 && len.1 == 2 {
        c.push(0);
    }
    c.extend(be(len.0, len.1));
    c.resize(c.len() + tail, 0);
    c
}

fn cdb10(op: u8, flags: u8, blocks: usize) -> Vec<u8> {
    cdb(op, flags, (LBA, 4), (blocks as u64, 2), 1)
}

fn cdb12(op: u8, flags: u8) -> Vec<u8> {
    cdb(op, flags, (LBA, 4), (BLOCKS as u64, 4), 2)
}

fn cdb16(op: u8, flags: u8) -> Vec<u8> {
    cdb(op, flags, (LBA, 8), (BLOCKS as u64, 4), 2)
}

fn data(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

#[allow(clippy::too_many_lines)] // a table: one row per durability case
fn rows() -> Vec<Row> {
    let row = |name, cdb, data: Vec<u8>, needs| Row {
        name,
        cdb,
        immediate: data.len(),
        data,
        needs,
        write_first: false,
    };
    // UNMAP's parameter list: one descriptor, the same 8 blocks.
    let mut unmap = vec![0, 22, 0, 16, 0, 0, 0, 0];
    unmap.extend(be(LBA, 8));
    unmap.extend(be(BLOCKS as u64, 4));
    unmap.extend([0; 4]);
    // COMPARE AND WRITE: the block as it is (a new LU: zeros), then the
    // new one.
    let mut caw = vec![0; BS];
    caw.extend(data(BS, 0xa5));
    vec![
        row(
            "WRITE(6)",
            |_| vec![0x0a, 0, 0, LBA as u8, BLOCKS as u8, 0],
            data(BYTES, 1),
            Needs::CacheOff,
        ),
        row(
            "WRITE(10)",
            |fua| cdb10(0x2a, fua, BLOCKS),
            data(BYTES, 2),
            Needs::FuaOrCacheOff,
        ),
        row(
            "WRITE(12)",
            |fua| cdb12(0xaa, fua),
            data(BYTES, 3),
            Needs::FuaOrCacheOff,
        ),
        row(
            "WRITE(16)",
            |fua| cdb16(0x8a, fua),
            data(BYTES, 4),
            Needs::FuaOrCacheOff,
        ),
        // Less Data-Out than the CDB says, ending inside a block: the
        // last block is merged with the medium (FCP-4 §9.4.2 (a)).
        row(
            "WRITE(10) ending inside a block",
            |fua| cdb10(0x2a, fua, BLOCKS),
            data(BYTES - 300, 5),
            Needs::FuaOrCacheOff,
        ),
        // Half with the command, half on R2T: written from two pieces.
        Row {
            immediate: BYTES / 2,
            ..row(
                "WRITE(10) in two PDUs",
                |fua| cdb10(0x2a, fua, BLOCKS),
                data(BYTES, 6),
                Needs::FuaOrCacheOff,
            )
        },
        row(
            "WRITE AND VERIFY(10)",
            |_| cdb10(0x2e, 0, BLOCKS),
            data(BYTES, 7),
            Needs::Always,
        ),
        row(
            "WRITE AND VERIFY(12)",
            |_| cdb12(0xae, 0),
            data(BYTES, 8),
            Needs::Always,
        ),
        row(
            "WRITE AND VERIFY(16)",
            |_| cdb16(0x8e, 0),
            data(BYTES, 9),
            Needs::Always,
        ),
        row(
            "ORWRITE(16)",
            |fua| cdb16(0x8b, fua),
            data(BYTES, 10),
            Needs::FuaOrCacheOff,
        ),
        row(
            "WRITE ATOMIC(16)",
            // ATOMIC BOUNDARY 0, then TRANSFER LENGTH (SBC-4 §5.48).
            |fua| {
                cdb(0x9c, fua, (LBA, 8), (0, 2), 0)
                    .into_iter()
                    .chain(be(BLOCKS as u64, 2))
                    .chain([0, 0])
                    .collect()
            },
            data(BYTES, 11),
            Needs::FuaOrCacheOff,
        ),
        row(
            "COMPARE AND WRITE",
            // Three reserved bytes, then NUMBER OF LOGICAL BLOCKS 1
            // (SBC-4 §5.2).
            |fua| {
                cdb(0x89, fua, (LBA, 8), (0, 3), 0)
                    .into_iter()
                    .chain([1, 0, 0])
                    .collect()
            },
            caw,
            Needs::FuaOrCacheOff,
        ),
        row(
            "WRITE SAME(10)",
            |_| cdb10(0x41, 0, BLOCKS),
            data(BS, 12),
            Needs::CacheOff,
        ),
        row(
            "WRITE SAME(16)",
            |_| cdb16(0x93, 0),
            data(BS, 13),
            Needs::CacheOff,
        ),
        row(
            "WRITE SAME(16) with UNMAP",
            |_| cdb16(0x93, 0x08),
            vec![0; BS],
            Needs::CacheOff,
        ),
        row(
            "UNMAP",
            |_| vec![0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0],
            unmap,
            Needs::CacheOff,
        ),
        Row {
            write_first: true,
            ..row(
                "SYNCHRONIZE CACHE(10)",
                |_| cdb10(0x35, 0, 0),
                Vec::new(),
                Needs::Always,
            )
        },
        Row {
            write_first: true,
            ..row(
                "SYNCHRONIZE CACHE(16)",
                |_| cdb(0x91, 0, (0, 8), (0, 4), 2),
                Vec::new(),
                Needs::Always,
            )
        },
    ]
}

/// The write cache and the FUA bit a case runs with.
#[derive(Clone, Copy, Debug)]
struct Mode {
    wce: bool,
    fua: bool,
}

const MODES: [Mode; 4] = [
    Mode {
        wce: true,
        fua: false,
    },
    Mode {
        wce: true,
        fua: true,
    },
    Mode {
        wce: false,
        fua: false,
    },
    Mode {
        wce: false,
        fua: true,
    },
];

fn must_be_durable(needs: Needs, mode: Mode) -> bool {
    match needs {
        Needs::FuaOrCacheOff => mode.fua || !mode.wce,
        Needs::CacheOff => !mode.wce,
        Needs::Always => true,
    }
}

/// One LU on the route's store, its session, and the driver's ring.
struct Case {
    s: Session,
    log: CallLog,
    route: Route,
    ring: Option<Ring<Staged>>,
}

fn lu_on(backend: Arc<dyn Backend>) -> Arc<LunMap> {
    let cfg = LuConfig {
        thin: true,
        ..lu_config()
    };
    let lu = LogicalUnit::new(cfg, backend).unwrap();
    Arc::new(LunMap::new(vec![(0, Arc::new(lu))]))
}

fn file(dir: &std::path::Path, direct: bool) -> FileBackend {
    let path = dir.join(format!("lu-{}", if direct { "direct" } else { "buffered" }));
    let _ = std::fs::remove_file(&path);
    let opts = FileOptions {
        size: Some(1 << 20),
        direct,
        ..Default::default()
    };
    let b = FileBackend::open_file(&path, &opts).unwrap();
    assert!(
        b.file_for(0, 4096).is_some_and(|f| f.direct == direct),
        "{}: not a disk file system taking O_DIRECT: the ring paths would not run",
        dir.display()
    );
    b
}

impl Case {
    fn new(route: Route, dir: &std::path::Path) -> Case {
        fn recorded<B: Backend + 'static>(r: Recorder<B>) -> (Arc<dyn Backend>, CallLog) {
            let log = r.log();
            (Arc::new(r), log)
        }
        let ((store, log), stage) = match route {
            Route::Inline => (recorded(Recorder::new(RamBackend::new(1 << 20))), false),
            Route::Network => (
                recorded(Recorder::new(RamBackend::new(1 << 20)).like_a_network_store()),
                false,
            ),
            Route::Pool { direct } => (recorded(Recorder::new(file(dir, direct))), false),
            Route::Uring { direct } | Route::RingRefused { direct } => {
                (recorded(Recorder::new(file(dir, direct))), true)
            }
        };
        let map = lu_on(store);
        let ring = matches!(route, Route::Uring { .. }).then(|| {
            let mut ring = Ring::new(8).unwrap();
            let log = log.clone();
            ring.watch_submissions(move |s| log.push(kernel_call(s)));
            ring
        });
        let s = Session::new(&map, 1, Dispatch::Inline, stage);
        log.take();
        Case {
            s,
            log,
            route,
            ring,
        }
    }

    /// Sends a command with its Data-Out (`immediate` bytes with it, the
    /// rest when asked by R2T) and plays the driver until the core
    /// answers: its status. The log gets a mark where the status left.
    fn exec(&mut self, cdb: &[u8], data: &[u8], immediate: usize) -> Status {
        let itt = self.s.cmd_sn + 1000;
        let mut c = [0u8; 16];
        c[..cdb.len()].copy_from_slice(cdb);
        self.s.cmd_sn += 1;
        let cmd = ScsiCommand {
            immediate: false,
            final_bit: true,
            read: false,
            write: !data.is_empty(),
            attr: 1,
            lun: Lun::from_index(0),
            itt,
            expected_data_transfer_length: data.len() as u32,
            cmd_sn: self.s.cmd_sn - 1,
            exp_stat_sn: 0,
            cdb: c,
        };
        let first = Bytes::copy_from_slice(&data[..immediate]);
        self.s.send_with(Pdu::ScsiCommand(cmd), first);
        for _ in 0..100 {
            if let Some(status) = self.transmitted(itt, data) {
                self.log.push(Call::Mark(format!("status {status}")));
                return status;
            }
            self.step();
        }
        panic!("{:?}: no status for {cdb:02x?}", self.route);
    }

    /// What the core transmits: Data-Out for each R2T, and the status for
    /// `itt` once there is one.
    fn transmitted(&mut self, itt: u32, data: &[u8]) -> Option<Status> {
        let mut status = None;
        let mut r2ts = Vec::new();
        while let Some(p) = self.s.core.poll_transmit() {
            match &p.pdu {
                Pdu::ScsiResponse(r) if r.itt == itt => status = Some(r.status),
                Pdu::R2t(r) if r.itt == itt => r2ts.push(r.clone()),
                _ => {}
            }
        }
        for r in r2ts {
            let at = r.buffer_offset as usize;
            let piece = &data[at..at + r.desired_data_transfer_length as usize];
            let pdu = Pdu::DataOut(DataOut {
                final_bit: true,
                lun: Lun::from_index(0),
                itt,
                ttt: r.ttt,
                exp_stat_sn: 0,
                data_sn: 0,
                buffer_offset: r.buffer_offset,
            });
            self.s.send_with(pdu, Bytes::copy_from_slice(piece));
        }
        status
    }

    /// Carries out what the core handed the driver, as the daemon does.
    fn step(&mut self) {
        for a in self.s.actions() {
            match a {
                Action::Run(cmd) => self.s.core.completed(cmd.run()),
                Action::Stage(staged) => self.stage(staged),
                Action::Signal { .. } => {}
            }
        }
        let Some(ring) = &mut self.ring else { return };
        if ring.in_flight() == 0 {
            return;
        }
        ring.wait_all().unwrap();
        let mut done: Vec<Completion<Staged>> = Vec::new();
        ring.complete(&mut done).unwrap();
        for c in done {
            self.s.core.completed(c.job.finish(c.result));
        }
    }

    /// A staged access: the store's own asynchronous path where it has
    /// one, else the ring, else here (conn.rs's order).
    fn stage(&mut self, staged: Staged) {
        if let Some(io) = staged.start_async() {
            let outcome = block_on(io);
            return self.s.core.completed(staged.finish(outcome));
        }
        let refused = match &mut self.ring {
            Some(ring) => ring.push(staged).err().map(|(_, s)| s),
            None => Some(staged),
        };
        if let Some(staged) = refused {
            self.s.core.completed(staged.run_here());
        }
    }

    /// Turns the write cache off: MODE SELECT(6) of the caching page with
    /// WCE = 0 (SBC-3 §6.4.5).
    fn cache_off(&mut self) {
        let mut page = vec![0u8; 4];
        page.extend([0x08, 0x12]);
        page.resize(4 + 20, 0);
        let select = [0x15, 0x10, 0, 0, page.len() as u8, 0];
        assert_eq!(self.exec(&select, &page, page.len()), Status::GOOD);
        self.log.take();
    }
}

/// A ring's entry as the store call it stands for.
fn kernel_call(s: Submitted) -> Call {
    match s {
        Submitted::Read { offset, len } => Call::Read {
            offset,
            len: len as usize,
        },
        Submitted::Write { offset, dsync } => Call::Write {
            offset,
            len: 0,
            durable: dsync,
        },
        Submitted::Fsync { .. } => Call::Flush,
        Submitted::Other(code) => Call::Mark(format!("io_uring operation {code}")),
    }
}

/// Runs one row in one mode on one route; what went wrong, if anything.
fn check(route: Route, row: &Row, mode: Mode, dir: &std::path::Path) -> Option<String> {
    let mut case = Case::new(route, dir);
    if !mode.wce {
        case.cache_off();
    }
    if row.write_first {
        let plain = cdb10(0x2a, 0, BLOCKS);
        let written = data(BYTES, 0x77);
        assert_eq!(case.exec(&plain, &written, BYTES), Status::GOOD);
    }
    let fua = if mode.fua { FUA } else { 0 };
    let status = case.exec(&(row.cdb)(fua), &row.data, row.immediate);
    let calls = case.log.take();
    if status != Status::GOOD {
        return Some(format!("status {status}: {calls:?}"));
    }
    // Everything up to the command's own status.
    let answered = calls.iter().rposition(|c| matches!(c, Call::Mark(_)));
    let (before, after) = calls.split_at(answered.unwrap_or(calls.len()));
    if after
        .iter()
        .skip(1)
        .any(|c| c.changes_medium() || *c == Call::Flush)
    {
        return Some(format!("the store was used after the status: {calls:?}"));
    }
    let open = unsettled(before);
    if must_be_durable(row.needs, mode) {
        if !open.is_empty() {
            return Some(format!("GOOD with {open:?} not durable: {calls:?}"));
        }
        if !before
            .iter()
            .any(|c| c.changes_medium() || *c == Call::Flush)
        {
            return Some(format!("nothing reached the store: {calls:?}"));
        }
    } else if open.is_empty() {
        return Some(format!(
            "write-back not kept (flushed or durable): {calls:?}"
        ));
    }
    None
}

#[test]
fn every_write_is_durable_before_good_where_it_must_be_on_every_path() {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let mut failures = Vec::new();
    let mut cases = 0;
    for route in ROUTES {
        for row in &rows() {
            for mode in MODES {
                let has_fua_bit = matches!(row.needs, Needs::FuaOrCacheOff);
                if mode.fua && !has_fua_bit {
                    continue;
                }
                cases += 1;
                if let Some(why) = check(route, row, mode, dir.path()) {
                    failures.push(format!(
                        "{route:?} {} wce={} fua={}: {why}",
                        row.name, mode.wce, mode.fua
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
