use std::path::Path;
use std::time::{Duration, Instant};

use super::*;
use crate::{FileBackend, FileOptions, RamBackend};

/// A test's job: a request for a backend, and a number to tell it by.
struct Task<'a> {
    backend: &'a dyn Backend,
    request: Request,
    token: u64,
}

impl Job for Task<'_> {
    fn backend(&self) -> &dyn Backend {
        self.backend
    }
    fn request(&self) -> &Request {
        &self.request
    }
}

type TestRing<'a> = Ring<Task<'a>>;

/// Pushes a request as job `token`.
fn push<'a>(
    ring: &mut TestRing<'a>,
    backend: &'a dyn Backend,
    request: Request,
    token: u64,
) -> Result<(), Refused> {
    ring.push(Task {
        backend,
        request,
        token,
    })
    .map_err(|(why, _)| why)
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed))
        .collect()
}

/// A file backend of 4 MiB in a fresh directory on the disk the tests
/// run from (not tmpfs: there `file_for` is `None`).
fn disk_backend(dir: &Path, direct: bool) -> FileBackend {
    let opts = FileOptions {
        size: Some(4 << 20),
        direct,
        ..Default::default()
    };
    FileBackend::open_file(&dir.join("lun.img"), &opts).unwrap()
}

fn disk_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let b = disk_backend(dir.path(), false);
    assert!(
        !b.in_memory(),
        "the test directory {} is on a memory file system",
        dir.path().display()
    );
    dir
}

/// Submits what is queued and collects `n` completions, waiting on the
/// ring's descriptor as the target does.
fn run<'a>(ring: &mut TestRing<'a>, n: usize) -> Vec<(u64, io::Result<Option<Bytes>>)> {
    ring.submit().unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        ring.complete(&mut out).unwrap();
        if out.len() >= n {
            break;
        }
        assert!(Instant::now() < deadline, "ring completions timed out");
        // libc's poll: the ring hands out a raw descriptor, and rustix's
        // poll would need an unsafe borrow of it all the same.
        let mut pfd = libc::pollfd {
            fd: ring.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on the stack, count 1.
        unsafe { libc::poll(&mut pfd, 1, 1000) };
    }
    assert_eq!(out.len(), n);
    let mut out: Vec<_> = out.into_iter().map(|c| (c.job.token, c.result)).collect();
    out.sort_by_key(|c| c.0);
    out
}

fn write(offset: u64, data: DataOutBuffer, durable: bool) -> Request {
    let len = data.len();
    Request::Write {
        offset,
        data,
        len,
        durable,
    }
}

#[test]
fn reads_and_writes_round_trip_buffered_and_direct() {
    let dir = disk_dir();
    for direct in [false, true] {
        let b = disk_backend(dir.path(), direct);
        let mut ring = TestRing::new(16).unwrap();
        let a = pattern(8192, 1);
        let c = pattern(512, 2);
        push(&mut ring, &b, write(4096, a.clone().into(), false), 1).unwrap();
        // 512 bytes at an odd offset: the file's; on a direct store no
        // file (it never mixes the descriptors: file/direct.rs), and the
        // request runs the synchronous way.
        let odd = push(&mut ring, &b, write(1536, c.clone().into(), true), 2);
        if direct {
            assert!(matches!(odd, Err(Refused::NotAFile)), "{direct}");
            b.write(1536, &c, true).unwrap();
        } else {
            odd.unwrap();
        }
        for done in run(&mut ring, if direct { 1 } else { 2 }) {
            assert!(done.1.unwrap().is_none());
        }
        push(&mut ring, &b, Request::Flush, 3).unwrap();
        push(
            &mut ring,
            &b,
            Request::Read {
                offset: 4096,
                len: 8192,
            },
            4,
        )
        .unwrap();
        let odd = push(
            &mut ring,
            &b,
            Request::Read {
                offset: 1536,
                len: 512,
            },
            5,
        );
        assert_eq!(odd.is_err(), direct);
        let got = run(&mut ring, if direct { 2 } else { 3 });
        assert!(got[0].1.as_ref().unwrap().is_none());
        assert_eq!(got[1].1.as_ref().unwrap().as_deref(), Some(&a[..]));
        if !direct {
            assert_eq!(got[2].1.as_ref().unwrap().as_deref(), Some(&c[..]));
        }
        // The synchronous path sees the same bytes.
        assert_eq!(&b.read(4096, 8192).unwrap()[..], &a[..]);
        assert_eq!(&b.read(1536, 512).unwrap()[..], &c[..]);
        assert_eq!(ring.in_flight(), 0);
    }
}

#[test]
fn writes_in_many_unaligned_pieces_land_in_order() {
    let dir = disk_dir();
    for direct in [false, true] {
        let b = disk_backend(dir.path(), direct);
        let mut ring = TestRing::new(4).unwrap();
        // 200 pieces of 512 bytes, each at an odd address: more pieces
        // than one SQE carries, and unaligned for O_DIRECT.
        let whole = pattern(200 * 512, 9);
        let backing = Bytes::from([&[0u8][..], &whole[..]].concat());
        let data = DataOutBuffer::from_segments(
            (0..200).map(|i| backing.slice(1 + i * 512..1 + (i + 1) * 512)),
        );
        push(&mut ring, &b, write(8192, data, false), 7).unwrap();
        let got = run(&mut ring, 1);
        assert!(got[0].1.as_ref().unwrap().is_none());
        assert_eq!(&b.read(8192, whole.len()).unwrap()[..], &whole[..]);
        // A large read comes back whole (pooled buffer).
        push(
            &mut ring,
            &b,
            Request::Read {
                offset: 8192,
                len: whole.len(),
            },
            8,
        )
        .unwrap();
        let got = run(&mut ring, 1);
        assert_eq!(got[0].1.as_ref().unwrap().as_deref(), Some(&whole[..]));
    }
}

#[test]
fn only_the_first_len_bytes_of_a_write_are_written() {
    let dir = disk_dir();
    let b = disk_backend(dir.path(), false);
    let mut ring = TestRing::new(4).unwrap();
    let data = pattern(4096, 3);
    push(
        &mut ring,
        &b,
        Request::Write {
            offset: 0,
            data: data.clone().into(),
            len: 1024,
            durable: false,
        },
        1,
    )
    .unwrap();
    run(&mut ring, 1);
    let back = b.read(0, 4096).unwrap();
    assert_eq!(&back[..1024], &data[..1024]);
    assert!(back[1024..].iter().all(|&x| x == 0));
}

#[test]
fn errors_come_back_as_completions() {
    let dir = disk_dir();
    let b = disk_backend(dir.path(), false);
    let mut ring = TestRing::new(4).unwrap();
    // Beyond the store: refused without reaching the kernel.
    push(
        &mut ring,
        &b,
        Request::Read {
            offset: 4 << 20,
            len: 512,
        },
        1,
    )
    .unwrap();
    // The file shrunk behind the backend's back: the kernel reads 0 bytes.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("lun.img"))
        .unwrap();
    f.set_len(1 << 20).unwrap();
    push(
        &mut ring,
        &b,
        Request::Read {
            offset: 2 << 20,
            len: 4096,
        },
        2,
    )
    .unwrap();
    let got = run(&mut ring, 2);
    assert_eq!(
        got[0].1.as_ref().unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        got[1].1.as_ref().unwrap_err().kind(),
        io::ErrorKind::UnexpectedEof
    );
}

#[test]
fn stores_without_files_and_a_full_ring_are_refused() {
    let ram = RamBackend::new(1 << 20);
    let dir = disk_dir();
    let b = disk_backend(dir.path(), false);
    let mut ring = TestRing::new(2).unwrap();
    assert_eq!(
        push(
            &mut ring,
            &ram,
            Request::Read {
                offset: 0,
                len: 512
            },
            1
        ),
        Err(Refused::NotAFile)
    );
    for t in 0..2 {
        push(
            &mut ring,
            &b,
            Request::Read {
                offset: 0,
                len: 4096,
            },
            t,
        )
        .unwrap();
    }
    assert_eq!(
        push(
            &mut ring,
            &b,
            Request::Read {
                offset: 0,
                len: 4096
            },
            9
        ),
        Err(Refused::Full)
    );
    assert_eq!(run(&mut ring, 2).len(), 2);
    push(
        &mut ring,
        &b,
        Request::Read {
            offset: 0,
            len: 4096,
        },
        9,
    )
    .unwrap();
    assert_eq!(run(&mut ring, 1)[0].0, 9);
}

#[test]
fn dropping_a_ring_waits_for_the_kernel() {
    let dir = disk_dir();
    let b = disk_backend(dir.path(), true);
    let mut ring = TestRing::new(64).unwrap();
    for t in 0..64 {
        push(
            &mut ring,
            &b,
            Request::Read {
                offset: t * 4096,
                len: 4096,
            },
            t,
        )
        .unwrap();
    }
    ring.submit().unwrap();
    drop(ring);
    // The buffers the kernel wrote were still ours; nothing to check but
    // that this returns (and, under a sanitizer, that no freed memory
    // was written).
}

/// What reaches the kernel, read back from the entries: a durable write
/// carries RWF_DSYNC (every round of it, when a write in many pieces
/// takes several), a plain one does not, and a flush is an fdatasync.
#[test]
fn durability_reaches_the_kernel_in_the_entries_themselves() {
    let dir = disk_dir();
    for direct in [false, true] {
        let b = disk_backend(dir.path(), direct);
        let mut ring = TestRing::new(4).unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        ring.watch_submissions(move |s| log.lock().unwrap().push(s));
        push(&mut ring, &b, write(4096, pattern(4096, 1).into(), true), 1).unwrap();
        push(
            &mut ring,
            &b,
            write(8192, pattern(4096, 2).into(), false),
            2,
        )
        .unwrap();
        run(&mut ring, 2);
        // 100 pieces: more than one entry carries.
        let many = DataOutBuffer::from_segments((0..100).map(|i| Bytes::from(pattern(512, i))));
        let pushed = push(&mut ring, &b, write(16384, many, true), 3);
        if direct {
            // 50 KiB, not whole pages: a read-modify-write the ring does
            // not take (file/direct.rs).
            assert!(matches!(pushed, Err(Refused::NotAFile)));
        } else {
            pushed.unwrap();
            run(&mut ring, 1);
        }
        push(&mut ring, &b, Request::Flush, 4).unwrap();
        push(
            &mut ring,
            &b,
            Request::Read {
                offset: 0,
                len: 4096,
            },
            5,
        )
        .unwrap();
        run(&mut ring, 2);
        let seen = seen.lock().unwrap().clone();
        let mut expected = vec![
            Submitted::Write {
                offset: 4096,
                dsync: true,
            },
            Submitted::Write {
                offset: 8192,
                dsync: false,
            },
        ];
        // The rounds of the write in pieces: each from where the last
        // ended, each durable.
        let rounds = seen.len() - 4;
        assert!(rounds >= 2 || direct, "{direct}: {seen:?}");
        for (k, s) in seen[2..2 + rounds].iter().enumerate() {
            assert!(
                matches!(s, Submitted::Write { offset, dsync: true } if k > 0 || *offset == 16384),
                "{direct}: round {k}: {s:?}"
            );
        }
        expected.extend_from_slice(&seen[2..2 + rounds]);
        expected.push(Submitted::Fsync { datasync: true });
        expected.push(Submitted::Read {
            offset: 0,
            len: 4096,
        });
        assert_eq!(seen, expected, "direct: {direct}");
    }
}
