//! A staged command answers exactly as an executed one: the same
//! commands go to two equal file LUNs, one through `execute`, the other
//! through `start` and its medium access (run here, or on a ring).

use std::path::Path;
use std::time::{Duration, Instant};

use ironlun_backend::ring::Ring;
use ironlun_backend::{FileBackend, FileOptions, RamBackend};

use super::*;
use crate::{test_util, DataOutBuffer, LuConfig, LunMap, NexusId};
use ironlun_scsi_codes::{opcode, Status};

const N: NexusId = NexusId(7);

fn cfg(read_only: bool) -> LuConfig {
    LuConfig {
        read_only,
        product: "file".into(),
        serial: "s1".into(),
        naa_id: 1,
        ..test_util::cfg(512)
    }
}

/// A 1 MiB file LUN on the disk the tests run from, with nexus N attached
/// (so its first command meets a unit attention).
fn file_lu(dir: &Path, name: &str, direct: bool, read_only: bool) -> Arc<LogicalUnit> {
    let path = dir.join(name);
    if read_only {
        std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    }
    let opts = FileOptions {
        size: Some(1 << 20),
        direct,
        read_only,
        ..Default::default()
    };
    let b = FileBackend::open_file(&path, &opts).unwrap();
    assert!(
        !b.in_memory(),
        "{} is on a memory file system",
        dir.display()
    );
    let lu = Arc::new(LogicalUnit::new(cfg(read_only), Arc::new(b)).unwrap());
    lu.attach_nexus(N, test_util::id("i"), false);
    lu
}

fn cdb10(op: u8, flags: u8, lba: u32, blocks: u16) -> Vec<u8> {
    let l = lba.to_be_bytes();
    let n = blocks.to_be_bytes();
    vec![op, flags, l[0], l[1], l[2], l[3], 0, n[0], n[1], 0]
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(13) ^ seed).collect()
}

/// Runs a command on `lu` the staged way; with a ring, its access goes
/// through the ring, else it runs here.
fn staged(
    lu: &Arc<LogicalUnit>,
    ring: Option<&mut Ring<MediumIo>>,
    cdb: &[u8],
    data: &DataOutBuffer,
) -> Response {
    let map = LunMap::new(vec![(0, lu.clone())]);
    let req = Request {
        nexus: N,
        cdb,
        data_out: data,
        map: &map,
    };
    if !lu.stageable(cdb, data.len()) {
        // As the target does: the blocking way (an unaligned write to a
        // `,direct` file, which runs with the LU alone).
        return map.execute(Some(0), N, cdb, data);
    }
    match lu.start(&req).expect("no exclusive holder") {
        Start::Done(r) => r,
        Start::Io(io) => match ring {
            None => io.run_here(),
            Some(ring) => {
                let io = match ring.push(io) {
                    Ok(()) => None,
                    // No file for it (an unaligned read of a `,direct`
                    // file): the blocking way, as the target does.
                    Err((_, io)) => Some(io),
                };
                if let Some(io) = io {
                    return io.run_here();
                }
                ring.submit().unwrap();
                let mut out = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(20);
                while out.is_empty() {
                    assert!(Instant::now() < deadline, "ring timed out");
                    ring.complete(&mut out).unwrap();
                    std::thread::yield_now();
                }
                let done = out.pop().unwrap();
                done.job.finish(done.result)
            }
        },
    }
}

fn executed(lu: &Arc<LogicalUnit>, cdb: &[u8], data: &DataOutBuffer) -> Response {
    let map = LunMap::new(vec![(0, lu.clone())]);
    map.execute(Some(0), N, cdb, data)
}

/// The commands compared, with their Data-Out.
fn script() -> Vec<(Vec<u8>, DataOutBuffer)> {
    let none = DataOutBuffer::new;
    let mut two_pieces = DataOutBuffer::from(pattern(1024, 5));
    two_pieces.push(pattern(3072, 6).into());
    vec![
        // The attach's unit attention, reported by the first command.
        (cdb10(0x28, 0, 0, 8), none()),
        (cdb10(0x2a, 0, 0, 8), pattern(4096, 1).into()),
        (cdb10(0x28, 0, 0, 8), none()),
        // FUA, in two pieces.
        (cdb10(0x2a, 0x08, 8, 8), two_pieces),
        (cdb10(0x28, 0, 4, 16), none()),
        // WRITE AND VERIFY, and fewer blocks sent than the CDB names.
        (cdb10(0x2e, 0, 100, 4), pattern(2048, 9).into()),
        (cdb10(0x28, 0, 100, 4), none()),
        // Zero blocks, out of range, SYNCHRONIZE CACHE.
        (cdb10(0x28, 0, 3, 0), none()),
        (cdb10(0x28, 0, 2047, 2), none()),
        (cdb10(0x2a, 0, 2048, 1), pattern(512, 2).into()),
        (cdb10(0x35, 0, 0, 0), none()),
        (cdb10(0x35, 0, 4096, 0), none()),
        // WRITE AND VERIFY with a BYTCHK it does not support.
        (cdb10(0x2e, 0x04, 0, 1), pattern(512, 3).into()),
    ]
}

fn same(a: &Response, b: &Response, what: &str) {
    assert_eq!(a.status, b.status, "{what}: status");
    assert_eq!(a.sense, b.sense, "{what}: sense");
    assert_eq!(
        a.transfer_length, b.transfer_length,
        "{what}: transfer length"
    );
    assert_eq!(
        a.data.to_bytes().unwrap(),
        b.data.to_bytes().unwrap(),
        "{what}: data"
    );
}

#[test]
fn staged_commands_answer_as_executed_ones() {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    for (direct, use_ring) in [(false, false), (true, false), (false, true), (true, true)] {
        let tag = format!("direct={direct} ring={use_ring}");
        let plain = file_lu(dir.path(), &format!("a-{tag}"), direct, false);
        let stage = file_lu(dir.path(), &format!("b-{tag}"), direct, false);
        let mut ring = use_ring.then(|| Ring::new(8).unwrap());
        for (i, (cdb, data)) in script().into_iter().enumerate() {
            let want = executed(&plain, &cdb, &data);
            let got = staged(&stage, ring.as_mut(), &cdb, &data);
            same(&got, &want, &format!("{tag} command {i} ({:#04x})", cdb[0]));
        }
        assert_eq!(plain.io_stats(), stage.io_stats(), "{tag}: counters");
    }
}

#[test]
fn a_write_protected_lu_refuses_staged_writes() {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let lu = file_lu(dir.path(), "ro", false, true);
    let data = DataOutBuffer::from(pattern(512, 1));
    let first = staged(&lu, None, &cdb10(0x2a, 0, 0, 1), &data);
    assert_eq!(first.status, Status::CHECK_CONDITION, "unit attention");
    let r = staged(&lu, None, &cdb10(0x2a, 0, 0, 1), &data);
    same(
        &r,
        &executed(&lu, &cdb10(0x2a, 0, 0, 1), &data),
        "write on ro",
    );
    assert_eq!(r.status, Status::CHECK_CONDITION);
}

#[test]
fn what_can_be_staged() {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let lu = file_lu(dir.path(), "s", false, false);
    assert!(lu.stageable(&cdb10(0x28, 0, 0, 8), 0));
    assert!(lu.stageable(&cdb10(0x2a, 0, 0, 8), 4096));
    // Fewer bytes than the CDB names, but whole blocks: staged.
    assert!(lu.stageable(&cdb10(0x2a, 0, 0, 8), 1024));
    // A partial last block needs a read-modify-write.
    assert!(!lu.stageable(&cdb10(0x2a, 0, 0, 8), 1000));
    assert!(
        !lu.stageable(&[opcode::INQUIRY, 0, 0, 0, 96, 0], 0),
        "INQUIRY"
    );
    assert!(
        !lu.stageable(&cdb10(0x89, 0, 0, 1), 1024),
        "COMPARE AND WRITE"
    );
    let ram = LogicalUnit::new(cfg(false), Arc::new(RamBackend::new(1 << 20))).unwrap();
    assert!(!ram.stageable(&cdb10(0x28, 0, 0, 8), 0), "RAM runs inline");
    // On a `,direct` file a write not aligned to 4 KiB is a
    // read-modify-write under the LU alone: never staged. The range is
    // what arrives.
    let direct = file_lu(dir.path(), "sd", true, false);
    assert!(direct.stageable(&cdb10(0x2a, 0, 8, 8), 4096));
    assert!(!direct.stageable(&cdb10(0x2a, 0, 1, 8), 4096));
    assert!(!direct.stageable(&cdb10(0x2a, 0, 8, 1), 512));
    assert!(!direct.stageable(&cdb10(0x2a, 0, 8, 8), 1024));
    assert!(direct.stageable(&cdb10(0x28, 0, 1, 1), 0), "reads share");
    assert!(lu.stageable(&cdb10(0x2a, 0, 1, 8), 4096), "buffered file");
}

/// An unaligned write to a `,direct` file, run the blocking way, waits
/// for the LU alone: for a staged access in flight to finish, while new
/// ones are refused; an aligned one shares the LU with it.
#[test]
fn an_unaligned_write_to_a_direct_file_runs_with_the_lu_alone() {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let lu = file_lu(dir.path(), "alone", true, false);
    let map = LunMap::new(vec![(0, lu.clone())]);
    let none = DataOutBuffer::new();
    let read = cdb10(0x28, 0, 0, 8);
    let req = Request {
        nexus: N,
        cdb: &read,
        data_out: &none,
        map: &map,
    };
    let _ = lu.start(&req); // the unit attention
    for (lba, alone) in [(8, false), (1, true)] {
        let Some(Start::Io(io)) = lu.start(&req) else {
            panic!("not staged");
        };
        let lu2 = lu.clone();
        let data = pattern(4096, lba as u8);
        let t = std::thread::spawn(move || {
            executed(&lu2, &cdb10(0x2a, 0, lba, 8), &data.into()).status
        });
        if alone {
            // It waits for the LU alone: new accesses are refused.
            let deadline = Instant::now() + Duration::from_secs(20);
            while lu.start(&req).is_some() {
                assert!(
                    Instant::now() < deadline,
                    "the write never asked for the LU alone"
                );
                std::thread::yield_now();
            }
        } else {
            // It shares the LU with the staged read still in flight.
            assert_eq!(t.join().unwrap(), Status::GOOD);
            assert_eq!(io.run_here().status, Status::GOOD);
            continue;
        }
        assert_eq!(io.run_here().status, Status::GOOD);
        assert_eq!(t.join().unwrap(), Status::GOOD);
    }
    let back = executed(&lu, &cdb10(0x28, 0, 1, 15), &none);
    let mut want = pattern(4096, 1);
    want.extend_from_slice(&pattern(4096, 8)[512..]);
    assert_eq!(back.data.to_bytes().unwrap()[..want.len()], want[..]);
}

#[test]
fn a_staged_access_and_an_atomic_command_exclude_each_other() {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let lu = file_lu(dir.path(), "g", false, false);
    let map = LunMap::new(vec![(0, lu.clone())]);
    let none = DataOutBuffer::new();
    let read = cdb10(0x28, 0, 0, 1);
    let req = Request {
        nexus: N,
        cdb: &read,
        data_out: &none,
        map: &map,
    };
    let _ = lu.start(&req); // the unit attention
                            // While an atomic command holds the LU, nothing is staged (and
                            // nothing happened: the caller runs it the blocking way).
    let held = lu.exclusive_access();
    assert!(lu.start(&req).is_none());
    drop(held);
    // A staged access in flight keeps an atomic command out.
    let Some(Start::Io(io)) = lu.start(&req) else {
        panic!("not staged");
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let lu2 = lu.clone();
    let t = std::thread::spawn(move || {
        let _x = lu2.exclusive_access();
        tx.send(()).unwrap();
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(50)).is_err(),
        "entered past a staged read"
    );
    assert_eq!(io.run_here().status, Status::GOOD);
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    t.join().unwrap();
}

/// A file LU whose flushes fail for real while `failing` is set: they go
/// to /dev/null, which has no fsync (EINVAL), through the io_uring
/// (`file_for`) and the blocking pool (`flush`) alike. Cleared, flushes
/// reach the file again and succeed, as Linux's next `fdatasync` does
/// after it reported a writeback error once.
struct FsyncFails {
    file: FileBackend,
    null: Arc<std::fs::File>,
    failing: std::sync::atomic::AtomicBool,
}

impl FsyncFails {
    fn new(dir: &Path) -> Arc<FsyncFails> {
        let opts = FileOptions {
            size: Some(1 << 20),
            ..Default::default()
        };
        let file = FileBackend::open_file(&dir.join("fsync-fails"), &opts).unwrap();
        assert!(!file.in_memory());
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        Arc::new(FsyncFails {
            file,
            null: Arc::new(null),
            failing: false.into(),
        })
    }

    fn failing(&self) -> bool {
        self.failing.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Backend for FsyncFails {
    fn kind(&self) -> &'static str {
        "file"
    }
    fn size_bytes(&self) -> u64 {
        self.file.size_bytes()
    }
    fn read(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        self.file.read(offset, len)
    }
    fn write(&self, offset: u64, data: &[u8], durable: bool) -> io::Result<()> {
        self.file.write(offset, data, durable)
    }
    fn flush(&self) -> io::Result<()> {
        if self.failing() {
            return self.null.sync_data();
        }
        self.file.flush()
    }
    fn may_block(&self) -> bool {
        true
    }
    /// A flush is the request of no length.
    fn file_for(&self, offset: u64, len: usize) -> Option<ironlun_backend::FileTarget> {
        if len == 0 && self.failing() {
            return Some(ironlun_backend::FileTarget {
                file: self.null.clone(),
                direct: false,
            });
        }
        self.file.file_for(offset, len)
    }
}

/// fsyncgate on the staged paths (crate::durability): a flush that failed
/// in the kernel, through the io_uring or the blocking pool, is not
/// followed by GOOD to its retry nor to a FUA write, although the kernel
/// would now answer success.
#[test]
fn a_flush_that_failed_in_the_kernel_is_not_followed_by_good() {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let none = DataOutBuffer::new();
    let sync = cdb10(0x35, 0, 0, 0);
    let sense = |r: &Response| {
        let at = |i: usize| r.sense.get(i).copied().unwrap_or(0);
        (r.status, at(2) & 0x0f, at(12), at(13))
    };
    let we = (Status::CHECK_CONDITION, 0x03, 0x0c, 0x00);
    for use_ring in [false, true] {
        let store = FsyncFails::new(dir.path());
        let lu = Arc::new(LogicalUnit::new(cfg(false), store.clone()).unwrap());
        lu.attach_nexus(N, test_util::id("i"), false);
        let mut ring = use_ring.then(|| Ring::new(8).unwrap());
        let _ = staged(&lu, ring.as_mut(), &cdb10(0x28, 0, 0, 1), &none); // the UA
        let data = DataOutBuffer::from(pattern(512, 1));
        let r = staged(&lu, ring.as_mut(), &cdb10(0x2a, 0, 0, 1), &data);
        assert_eq!(r.status, Status::GOOD, "ring={use_ring}");
        store
            .failing
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let r = staged(&lu, ring.as_mut(), &sync, &none);
        assert_eq!(sense(&r), we, "ring={use_ring}: the failed flush");
        store
            .failing
            .store(false, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(store.flush().ok(), Some(()), "the file flushes again");
        let r = staged(&lu, ring.as_mut(), &sync, &none);
        assert_eq!(sense(&r), we, "ring={use_ring}: the retry");
        let r = staged(&lu, ring.as_mut(), &cdb10(0x2a, 0x08, 0, 1), &data);
        assert_eq!(sense(&r), we, "ring={use_ring}: a FUA write");
        let r = staged(&lu, ring.as_mut(), &cdb10(0x2a, 0, 0, 1), &data);
        assert_eq!(r.status, Status::GOOD, "ring={use_ring}: a cached write");
        let r = executed(&lu, &sync, &none);
        assert_eq!(sense(&r), we, "ring={use_ring}: executed");
    }
}

/// A RAM store with an asynchronous path, as an RBD image has: requests
/// complete from a future; `unreachable` makes every one fail the way a
/// lost cluster does (ETIMEDOUT).
struct AsyncRam {
    ram: RamBackend,
    unreachable: std::sync::atomic::AtomicBool,
}

impl ironlun_backend::aio::AsyncMedium for AsyncRam {
    fn start(&self, request: &MediumRequest) -> ironlun_backend::aio::MediumFuture {
        const ETIMEDOUT: i32 = 110;
        if self.unreachable.load(std::sync::atomic::Ordering::Relaxed) {
            return Box::pin(std::future::ready(Err(io::Error::from_raw_os_error(
                ETIMEDOUT,
            ))));
        }
        let outcome = match request {
            MediumRequest::Read { offset, len } => self.ram.read(*offset, *len).map(Some),
            MediumRequest::Write {
                offset, data, len, ..
            } => {
                let bytes = data.contiguous().get(..*len).unwrap_or_default();
                self.ram.write(*offset, bytes, false).map(|()| None)
            }
            MediumRequest::Flush => Ok(None),
        };
        Box::pin(std::future::ready(outcome))
    }
}

impl Backend for AsyncRam {
    fn kind(&self) -> &'static str {
        "async-ram"
    }
    fn size_bytes(&self) -> u64 {
        self.ram.size_bytes()
    }
    fn read(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        self.ram.read(offset, len)
    }
    fn write(&self, offset: u64, data: &[u8], durable: bool) -> io::Result<()> {
        self.ram.write(offset, data, durable)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn may_block(&self) -> bool {
        true
    }
    fn async_medium(&self) -> Option<&dyn ironlun_backend::aio::AsyncMedium> {
        Some(self)
    }
}

/// Runs a command through `start`, its access through the store's
/// asynchronous path, and `finish`.
fn staged_async(lu: &Arc<LogicalUnit>, cdb: &[u8], data: &DataOutBuffer) -> Response {
    let map = LunMap::new(vec![(0, lu.clone())]);
    let req = Request {
        nexus: N,
        cdb,
        data_out: data,
        map: &map,
    };
    assert!(lu.stageable(cdb, data.len()), "{cdb:02x?} not stageable");
    match lu.start(&req).expect("no exclusive holder") {
        Start::Done(r) => r,
        Start::Io(io) => {
            let fut = io.start_async().expect("an asynchronous path");
            io.finish(ironlun_backend::aio::block_on(fut))
        }
    }
}

#[test]
fn a_store_with_an_asynchronous_path_is_staged_and_answers_as_executed() {
    let store = Arc::new(AsyncRam {
        ram: RamBackend::new(1 << 20),
        unreachable: false.into(),
    });
    let lu = Arc::new(LogicalUnit::new(cfg(false), store.clone()).unwrap());
    lu.attach_nexus(N, test_util::id("i"), false);
    assert!(lu.has_async_medium() && !lu.has_files());
    let reference =
        Arc::new(LogicalUnit::new(cfg(false), Arc::new(RamBackend::new(1 << 20))).unwrap());
    reference.attach_nexus(N, test_util::id("i"), false);
    for (cdb, data) in script() {
        let a = staged_async(&lu, &cdb, &data);
        let b = executed(&reference, &cdb, &data);
        same(&a, &b, &format!("{cdb:02x?}"));
    }
    // A lost cluster: NOT READY / BECOMING READY (04h/01h), not the
    // MEDIUM ERROR that says the data is damaged...
    store
        .unreachable
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let none = DataOutBuffer::new();
    let sense = |r: &Response| (r.sense[2] & 0x0f, r.sense[12], r.sense[13]);
    for (cdb, data) in [
        (cdb10(0x28, 0, 8, 2), none.clone()),
        (
            cdb10(0x2a, 0, 8, 1),
            DataOutBuffer::copy_from_slice(&[7; 512]),
        ),
    ] {
        let r = staged_async(&lu, &cdb, &data);
        assert_eq!(r.status, Status::CHECK_CONDITION, "{cdb:02x?}");
        assert_eq!(
            sense(&r),
            (0x02, 0x04, 0x01),
            "{cdb:02x?}: {:02x?}",
            r.sense
        );
    }
    // ...except for a flush: the store reports a failed write to one
    // flush only, so its retry must not answer GOOD (crate::durability).
    let sync = cdb10(0x35, 0, 0, 0);
    let r = staged_async(&lu, &sync, &none);
    assert_eq!(sense(&r), (0x03, 0x0c, 0x00), "{:02x?}", r.sense);
    store
        .unreachable
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let r = staged_async(&lu, &sync, &none);
    assert_eq!(sense(&r), (0x03, 0x0c, 0x00), "the retry: {:02x?}", r.sense);
}
