//! A `,direct` file under concurrent aligned and unaligned requests: what
//! it holds afterwards, read back both ways, is what was written, and the
//! flush after it succeeds (no "Page cache invalidation failure on direct
//! I/O", whose next fsync fails with EIO).
//!
//! Every write of a round writes the round's pattern, whatever thread,
//! offset or length: the expected contents do not depend on the order
//! the writes land in, so any other byte read back after the round is
//! stale data (an earlier round's) that the store kept or wrote back
//! over a newer write.

use std::path::Path;
use std::sync::{Arc, Barrier, RwLock};

use super::*;

/// The LUN's block; unaligned requests start at multiples of it.
const SECTOR: u64 = 512;
/// Bytes the threads write over: few enough pages that they meet.
const SPAN: u64 = 64 << 10;
const THREADS: usize = 4;
const ROUNDS: u64 = 8;
const OPS_PER_ROUND: usize = 600;

/// Round `r`'s byte at `off`.
fn expected(r: u64, off: u64) -> u8 {
    let sector = off / SECTOR;
    (sector
        .wrapping_mul(2_654_435_761)
        .wrapping_add(r.wrapping_mul(97))
        .wrapping_add(off % SECTOR)
        >> 3) as u8
}

fn pattern_at(r: u64, off: u64, len: usize) -> Vec<u8> {
    (off..off + len as u64).map(|o| expected(r, o)).collect()
}

/// xorshift64*: reproducible offsets without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// The LU's access gate as the store asks it to be used: shared, or
/// alone for the writes [`Backend::write_needs_exclusive`] names.
type Gate = RwLock<()>;

/// One request of a round: a write of the round's pattern, aligned to
/// DIRECT_ALIGN or only to the sector, or a read of either kind.
fn one_op(b: &FileBackend, gate: &Gate, r: u64, rng: &mut Rng) -> io::Result<()> {
    let align = DIRECT_ALIGN as u64;
    let (off, len) = match rng.below(4) {
        // Aligned: a page or two.
        0 => (
            rng.below(SPAN / align - 1) * align,
            align * (1 + rng.below(2)),
        ),
        // 4 KiB at a 512-byte offset (`ironlun bench --align sector`).
        1 => (rng.below(SPAN / SECTOR - 8) * SECTOR, align),
        // One to seven sectors.
        _ => (
            rng.below(SPAN / SECTOR - 8) * SECTOR,
            SECTOR * (1 + rng.below(7)),
        ),
    };
    let reading = rng.below(4) == 0;
    let _held = if !reading && b.write_needs_exclusive(off, len) {
        (None, Some(gate.write().unwrap()))
    } else {
        (Some(gate.read().unwrap()), None)
    };
    let len = len as usize;
    if reading {
        b.read(off, len).map(drop)
    } else if rng.below(2) == 0 {
        b.write(off, &pattern_at(r, off, len), rng.below(8) == 0)
    } else {
        // In pieces, as a command's Data-Out arrives.
        let data = pattern_at(r, off, len);
        let (a, c) = data.split_at(len / 3);
        b.write_vectored(off, &[a, c], false)
    }
}

/// Reads the span back through aligned and unaligned reads and says
/// where it differs from round `r`'s pattern.
fn check_round(b: &FileBackend, r: u64) -> Result<(), String> {
    let align = DIRECT_ALIGN as u64;
    let mut reads: Vec<(u64, usize)> = (0..SPAN / align)
        .map(|p| (p * align, DIRECT_ALIGN))
        .collect();
    // Every sector through an unaligned read, and the whole span at an
    // odd offset.
    reads.extend((0..SPAN / align - 1).map(|p| (p * align + SECTOR * (1 + p % 7), DIRECT_ALIGN)));
    reads.extend((0..SPAN / SECTOR).map(|s| (s * SECTOR, SECTOR as usize)));
    reads.push((SECTOR, (SPAN - 2 * SECTOR) as usize));
    for (off, len) in reads {
        let got = b
            .read(off, len)
            .map_err(|e| format!("read {off}+{len}: {e}"))?;
        let want = pattern_at(r, off, len);
        if let Some(i) = got.iter().zip(&want).position(|(g, w)| g != w) {
            let at = off + i as u64;
            let stale = (0..r).rev().find(|&old| expected(old, at) == got[i]);
            return Err(format!(
                "round {r}: read {off}+{len} differs at byte {at}: {:#04x}, expected {:#04x} (round {stale:?}'s?)",
                got[i], want[i]
            ));
        }
    }
    Ok(())
}

/// The reproducer: rounds of concurrent aligned and unaligned writes and
/// reads over the same pages from several threads, each round followed
/// by a flush that must succeed and a read-back that must find the
/// round's pattern everywhere.
#[test]
fn concurrent_aligned_and_unaligned_requests_stay_coherent_and_durable() {
    let dir = tempfile::tempdir_in(disk_dir()).unwrap();
    let Some(b) = super::tests::open_direct(&dir.path().join("mixed")) else {
        return;
    };
    let b = Arc::new(b);
    let gate = Arc::new(Gate::default());
    let mut failures = Vec::new();
    for r in 1..=ROUNDS {
        let start = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (b, gate, start) = (b.clone(), gate.clone(), start.clone());
                std::thread::spawn(move || {
                    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (r << 8 | t as u64));
                    start.wait();
                    (0..OPS_PER_ROUND)
                        .map(|_| one_op(&b, &gate, r, &mut rng))
                        .find_map(Result::err)
                })
            })
            .collect();
        // Every byte of the span is written this round, aligned, while
        // the threads run: no byte may be left from an earlier round.
        let whole = pattern_at(r, 0, SPAN as usize);
        let mut errors: Vec<String> = Vec::new();
        for (i, data) in whole.chunks(DIRECT_ALIGN).enumerate() {
            let _shared = gate.read().unwrap();
            if let Err(e) = b.write((i * DIRECT_ALIGN) as u64, data, false) {
                errors.push(format!("round {r}: aligned write: {e}"));
            }
        }
        for h in handles {
            if let Some(e) = h.join().unwrap() {
                errors.push(format!("round {r}: {e}"));
            }
        }
        if let Err(e) = b.flush() {
            errors.push(format!("round {r}: flush after the round: {e}"));
        }
        if let Err(e) = check_round(&b, r) {
            errors.push(e);
        }
        failures.extend(errors);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A directory on a disk file system (O_DIRECT needs one; /tmp may be
/// tmpfs): /var/tmp where it exists, else this crate's directory.
fn disk_dir() -> &'static Path {
    let var_tmp = Path::new("/var/tmp");
    if var_tmp.is_dir() {
        var_tmp
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }
}

/// A store of 1 MiB and 1 KiB on disk, with O_DIRECT.
fn open_ragged(dir: &Path) -> Option<FileBackend> {
    let path = dir.join("ragged");
    let b = super::tests::open_direct(&path)?;
    drop(b);
    let opts = FileOptions {
        size: Some((1 << 20) + 1024),
        grow: true,
        direct: true,
        ..Default::default()
    };
    Some(FileBackend::open_file(&path, &opts).unwrap())
}

/// Unaligned requests round-trip through the bounce buffer and the
/// read-modify-write, leave the bytes around them as they were, and are
/// the ones the store asks to run alone; none goes to a ring (no file
/// for them), except inside the buffered tail of a store whose size is
/// not a multiple of 4096, which only the buffered descriptor touches.
#[test]
fn unaligned_requests_go_through_the_direct_descriptor_and_the_tail_through_the_other() {
    let dir = tempfile::tempdir_in(disk_dir()).unwrap();
    let Some(b) = open_ragged(dir.path()) else {
        return;
    };
    let size = b.size_bytes();
    let old = pattern_at(1, 0, size as usize);
    b.write(0, &old, false).unwrap();
    let mut model = old.clone();
    // Inside one page, across pages, in pieces, and into the tail.
    let writes: [(u64, usize); 5] = [
        (512, 512),
        (3584, 4096),
        (4096 * 5 + 1536, 20_000),
        ((1 << 20) - 512, 1536),
        ((1 << 20) + 512, 512),
    ];
    for (off, len) in writes {
        let data = pattern_at(9, off, len);
        let (a, c) = data.split_at(len / 2);
        b.write_vectored(off, &[a, c], true).unwrap();
        model[off as usize..off as usize + len].copy_from_slice(&data);
        assert!(b.write_needs_exclusive(off, len as u64));
        assert!(b.file_for(off, len).is_none() || off >= 1 << 20, "{off}");
    }
    assert!(!b.write_needs_exclusive(8192, 4096));
    assert!(b.file_for(8192, 4096).unwrap().direct);
    let tail = b.file_for((1 << 20) + 512, 512).unwrap();
    assert!(!tail.direct);
    for (off, len) in [
        (0, size as usize),
        (512, 4096),
        (1000, 3000),
        ((1 << 20) - 100, 1124),
    ] {
        let got = b.read(off, len).unwrap();
        assert!(
            got[..] == model[off as usize..off as usize + len],
            "{off}+{len}"
        );
    }
    b.flush().unwrap();
    // None of it went through the page cache: a read that may not wait
    // for the device (RWF_NOWAIT) finds no page of the direct part there.
    let path = dir.path().join("ragged");
    let probe = File::open(&path).unwrap();
    let mut page = [0u8; DIRECT_ALIGN];
    let mut cached = |at: u64| {
        let nowait = ReadWriteFlags::NOWAIT;
        match rustix::io::preadv2(&probe, &mut [io::IoSliceMut::new(&mut page)], at, nowait) {
            Ok(_) => true,
            Err(Errno::AGAIN) => false,
            Err(e) => panic!("{e}"),
        }
    };
    for at in (0..1 << 20).step_by(DIRECT_ALIGN) {
        assert!(!cached(at), "page at {at} is in the page cache");
    }
    // The probe sees a page a buffered read brought in.
    File::open(&path)
        .unwrap()
        .read_exact_at(&mut [0; 512], 8192)
        .unwrap();
    assert!(cached(8192));
    // What reached the file, read past the store.
    drop(b);
    assert!(std::fs::read(dir.path().join("ragged")).unwrap() == model);
}

/// A deallocation on a `,direct` file punches whole blocks out and
/// writes zeros over the partial ones at either end, through the direct
/// descriptor.
#[test]
fn deallocating_unaligned_ranges_zeroes_them_and_nothing_else() {
    let dir = tempfile::tempdir_in(disk_dir()).unwrap();
    let Some(b) = super::tests::open_direct(&dir.path().join("thin")) else {
        return;
    };
    let data = pattern_at(3, 0, 256 << 10);
    b.write(0, &data, false).unwrap();
    let mut model = data.clone();
    for (off, len) in [(512u64, 512u64), (10_240, 70_000)] {
        b.deallocate(off, len).unwrap();
        model[off as usize..(off + len) as usize].fill(0);
    }
    assert!(b.read(0, 256 << 10).unwrap()[..] == model[..]);
    b.flush().unwrap();
    let holes = b.allocation(0, 256 << 10).unwrap();
    assert!(holes.iter().any(|e| !e.allocated), "{holes:?}");
}
