//! A sanitize operation on a LU: at a configured rate it goes on while
//! other commands are answered, task management ends a waiting command
//! but not the operation, and what the store records is what a restarted
//! LU resumes or fails. No assertion depends on how long anything takes:
//! rates are slow enough that an operation cannot finish, or absent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ironlun_backend::testing::{Faults, FaultyBackend};
use ironlun_backend::{Backend, RamBackend};

use crate::sanitize::{SanitizeRecord, SanitizeRestore, SanitizeStore};
use crate::test_util::{cfg, read10, run, run_out, sense_of, write10, N};
use crate::{LogicalUnit, LunMap, NexusId, Response};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

/// The store's text in memory, and how many times it was saved.
#[derive(Default)]
struct MemStore {
    text: Mutex<Option<String>>,
    saves: AtomicUsize,
}

impl MemStore {
    fn text(&self) -> Option<String> {
        self.text.lock().unwrap().clone()
    }
}

impl SanitizeStore for MemStore {
    fn save(&self, text: &str) -> std::io::Result<()> {
        *self.text.lock().unwrap() = Some(text.to_owned());
        self.saves.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn clear(&self) -> std::io::Result<()> {
        *self.text.lock().unwrap() = None;
        Ok(())
    }
}

const BLOCKS: u64 = 64;

/// A sanitize LU (64 blocks of 512 bytes, thin when the backend can be)
/// at `rate` bytes per second,
/// with `store`, as LUN 0 next to a plain RAM LU as LUN 1.
fn map_with(
    backend: Arc<dyn Backend>,
    rate: Option<u64>,
    store: Option<Arc<MemStore>>,
) -> (LunMap, Arc<LogicalUnit>) {
    let mut c = cfg(512);
    c.sanitize = true;
    c.thin = backend.provisioning_granularity() > 0;
    let mut lu = LogicalUnit::new(c, backend).unwrap();
    lu.set_sanitize_rate(rate);
    if let Some(s) = store {
        lu.set_sanitize_store(s);
    }
    let lu = Arc::new(lu);
    let other =
        Arc::new(LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(BLOCKS * 512))).unwrap());
    (LunMap::new(vec![(0, lu.clone()), (1, other)]), lu)
}

fn ram() -> Arc<dyn Backend> {
    Arc::new(RamBackend::new(BLOCKS * 512))
}

/// SANITIZE OVERWRITE, one pass of `pattern`, IMMED or not.
fn overwrite(m: &LunMap, immed: bool, pattern: &[u8]) -> Response {
    let mut p = vec![1, 0];
    p.extend_from_slice(&(pattern.len() as u16).to_be_bytes());
    p.extend_from_slice(pattern);
    let l = (p.len() as u16).to_be_bytes();
    let b1 = 0x01 | if immed { 0x80 } else { 0 };
    run_out(m, &[opcode::SANITIZE, b1, 0, 0, 0, 0, 0, l[0], l[1], 0], &p)
}

/// The progress indication REQUEST SENSE reports, if NOT READY /
/// SANITIZE IN PROGRESS.
fn reported_progress(m: &LunMap) -> Option<u16> {
    let r = run(m, &[opcode::REQUEST_SENSE, 0, 0, 0, 18, 0]);
    let b = r.bytes();
    (b[2] == SenseKey::NOT_READY.0 && (b[12], b[13]) == (0x04, 0x1b) && b[15] & 0x80 != 0)
        .then(|| u16::from_be_bytes([b[16], b[17]]))
}

/// Waits (bounded) until `done` holds: a liveness bound, not a timing.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn stopped(lu: &LogicalUnit, store: &MemStore, saves_before: usize) {
    assert!(lu.stop_sanitize().is_some(), "an operation was running");
    // It stops at its next step and records where it was.
    eventually("the stop checkpoint", || {
        store.saves.load(Ordering::SeqCst) > saves_before
    });
}

#[test]
fn at_a_slow_rate_the_operation_goes_on_and_other_commands_are_answered() {
    let store = Arc::new(MemStore::default());
    // One byte per second: 32 KiB take nine hours.
    let (m, lu) = map_with(ram(), Some(1), Some(store.clone()));
    assert_eq!(overwrite(&m, true, &[0xa5]).status, Status::GOOD);
    // Recorded before it started: a restart would resume it.
    assert!(store.text().unwrap().contains("state running"));
    assert_eq!(
        sense_of(&run(&m, &[0; 6])),
        (SenseKey::NOT_READY, 0x04, 0x1b)
    );
    assert!(reported_progress(&m).is_some());
    // The pace holds no lock: INQUIRY, REPORT LUNS, and the other LU.
    assert_eq!(
        run(&m, &[opcode::INQUIRY, 0, 0, 0, 36, 0]).status,
        Status::GOOD
    );
    let luns = [opcode::REPORT_LUNS, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    assert_eq!(run(&m, &luns).status, Status::GOOD);
    let other = m.execute(Some(1), N, &read10(0, 1), &Default::default());
    assert_eq!(other.status, Status::GOOD);
    // A second SANITIZE is refused while one runs.
    assert_eq!(
        sense_of(&overwrite(&m, true, &[1])),
        (SenseKey::NOT_READY, 0x04, 0x1b)
    );
    let saves = store.saves.load(Ordering::SeqCst);
    stopped(&lu, &store, saves);
    // Stopped, not finished: still in progress, the record still running.
    assert!(reported_progress(&m).is_some());
    assert!(store.text().unwrap().contains("state running"));
}

#[test]
fn task_management_ends_the_wait_not_the_operation() {
    let store = Arc::new(MemStore::default());
    let (m, lu) = map_with(ram(), Some(1), Some(store.clone()));
    let m = Arc::new(m);
    for release in [
        |m: &LunMap| m.tasks_aborted(Some(0), Some(N)),
        |m: &LunMap| m.tasks_aborted(None, None),
        |m: &LunMap| {
            m.reset_lu(0);
        },
        |m: &LunMap| m.detach_nexus(N),
    ] {
        let (m2, (tx, rx)) = (m.clone(), std::sync::mpsc::channel());
        std::thread::spawn(move || tx.send(overwrite(&m2, false, &[0x5a])));
        eventually("the operation starts", || {
            lu.sanitize.ctl().waiter.is_some()
        });
        // Another nexus's abort, or another LU's, leaves the wait alone.
        m.tasks_aborted(Some(0), Some(NexusId(99)));
        m.tasks_aborted(Some(1), None);
        assert!(!lu.sanitize.ctl().released);
        release(&m);
        let r = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the abort ends the command's wait");
        assert_eq!(sense_of(&r), (SenseKey::NOT_READY, 0x04, 0x1b));
        // The operation goes on.
        assert!(reported_progress(&m).is_some());
        let saves = store.saves.load(Ordering::SeqCst);
        stopped(&lu, &store, saves);
        // Let the next round start one.
        lu.sanitize.ctl().stop = false;
        lu.sanitize.running.store(false, Ordering::Release);
    }
}

#[test]
fn a_finished_sanitize_clears_its_record_and_a_failed_one_keeps_failure_mode() {
    let store = Arc::new(MemStore::default());
    let b = Arc::new(FaultyBackend::new(RamBackend::new(BLOCKS * 512)));
    let (m, _) = map_with(b.clone(), None, Some(store.clone()));
    assert_eq!(overwrite(&m, false, &[0x11]).status, Status::GOOD);
    assert_eq!(store.text(), None);
    assert!(store.saves.load(Ordering::SeqCst) >= 1);
    b.set_faults(Faults {
        write: Some(0..512),
        ..Faults::default()
    });
    assert_eq!(
        sense_of(&overwrite(&m, false, &[0x22])),
        (SenseKey::MEDIUM_ERROR, 0x31, 0x03)
    );
    b.set_faults(Faults::default());
    let saved = store.text().unwrap();
    assert!(saved.contains("state failed"), "{saved}");
    // A restarted LU with that record is in failure mode...
    let (m2, lu2) = map_with(ram(), None, Some(Arc::new(MemStore::default())));
    let r = LogicalUnit::restore_sanitize(&lu2, Some(SanitizeRecord::decode(&saved).unwrap()));
    assert!(matches!(r, SanitizeRestore::FailureMode { .. }), "{r:?}");
    assert_eq!(
        sense_of(&run(&m2, &read10(0, 1))),
        (SenseKey::MEDIUM_ERROR, 0x31, 0x03)
    );
    // ...until EXIT FAILURE MODE, which forgets the record.
    let exit = [opcode::SANITIZE, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(run(&m2, &exit).status, Status::GOOD);
    assert_eq!(run(&m2, &read10(0, 1)).status, Status::GOOD);
    assert_eq!(run(&m, &exit).status, Status::GOOD);
    assert_eq!(store.text(), None);
}

/// A record of a one-pass overwrite of 0x77 interrupted half way.
fn half_done_record() -> SanitizeRecord {
    SanitizeRecord(super::super::record::Record::Running {
        lu: super::super::run::geometry(&map_with(ram(), None, None).1),
        job: super::super::job::Job {
            method: super::super::job::Method::Overwrite {
                pattern: vec![0x77],
                passes: 1,
                invert: false,
            },
            total: BLOCKS * 512,
            done: BLOCKS * 512 / 2,
        },
    })
}

#[test]
fn an_interrupted_overwrite_resumes_where_it_was_recorded() {
    let store = Arc::new(MemStore::default());
    let (m, lu) = map_with(ram(), None, Some(store.clone()));
    assert_eq!(
        run_out(
            &m,
            &write10(0, BLOCKS as u16, 0),
            &[b'd'; BLOCKS as usize * 512]
        )
        .status,
        Status::GOOD
    );
    let r = LogicalUnit::restore_sanitize(&lu, Some(half_done_record()));
    assert_eq!(r, SanitizeRestore::Resumed { progress: 32767 });
    eventually("the resumed operation ends", || {
        !lu.sanitize.running.load(Ordering::Acquire)
    });
    // The first half was done before the restart and is not written
    // again; the second half is.
    let first = run(&m, &read10(0, (BLOCKS / 2) as u16)).bytes();
    assert!(first.iter().all(|&b| b == b'd'));
    let second = run(&m, &read10((BLOCKS / 2) as u32, (BLOCKS / 2) as u16)).bytes();
    assert!(second.iter().all(|&b| b == 0x77));
    assert_eq!(store.text(), None);
    assert_eq!(run(&m, &[0; 6]).status, Status::GOOD);
}

#[test]
fn a_resumed_operation_reports_progress_from_its_record() {
    let store = Arc::new(MemStore::default());
    let (m, lu) = map_with(ram(), Some(1), Some(store.clone()));
    let r = LogicalUnit::restore_sanitize(&lu, Some(half_done_record()));
    assert_eq!(r, SanitizeRestore::Resumed { progress: 32767 });
    // Half done, at most one more step (one block of 64) since.
    let p = reported_progress(&m).unwrap();
    assert!((32767..=33791).contains(&p), "{p}");
    let saves = store.saves.load(Ordering::SeqCst);
    stopped(&lu, &store, saves);
}

#[test]
fn what_cannot_be_resumed_is_failure_mode() {
    // A record of another medium, and a method the LU no longer
    // offers. (One that does not decode never gets here: the target
    // takes the LU offline.)
    let erase = half_done_record()
        .encode()
        .replace("method overwrite 1 0\npattern 77\n", "method block-erase\n");
    let erase = SanitizeRecord::decode(&erase).unwrap();
    let backend = Arc::new(RamBackend::new(2 * BLOCKS * 512));
    let (m, lu) = map_with(backend, None, None);
    let r = LogicalUnit::restore_sanitize(&lu, Some(half_done_record()));
    assert!(matches!(r, SanitizeRestore::FailureMode { .. }), "{r:?}");
    assert_eq!(
        sense_of(&run(&m, &read10(0, 1))),
        (SenseKey::MEDIUM_ERROR, 0x31, 0x03)
    );
    let mut c = cfg(512);
    c.sanitize = true;
    let lu = Arc::new(LogicalUnit::new(c, ram()).unwrap());
    let r = LogicalUnit::restore_sanitize(&lu, Some(erase));
    assert!(
        matches!(&r, SanitizeRestore::FailureMode { why } if why.contains("not offered")),
        "{r:?}"
    );
    assert_eq!(
        LogicalUnit::restore_sanitize(&lu, None),
        SanitizeRestore::Nothing
    );
}
