//! [`Ring`]: requests to file and block backends run asynchronously on an
//! io_uring, without a thread per request.
//!
//! The owner (the target's connection task) pushes requests as commands
//! arrive, submits them with one system call per batch, waits for the
//! ring's descriptor to become readable (its completion queue holds
//! entries) and takes the finished requests with [`Ring::complete`]. The
//! ring owns every buffer the kernel reads or writes until the kernel is
//! done with it; short transfers are resumed here, so a caller sees a
//! request whole or failed.
//!
//! ## Why, and what it bought
//!
//! Before the ring, a command on a file or block LUN ran on tokio's
//! blocking pool: a thread hop there and back per command (~15 µs of CPU
//! on the development VM), and at most one request in the kernel per
//! pool thread. With the ring, the queue depth the initiator sends reaches
//! the device, and the connection's own thread submits and reaps. The
//! measurements are in docs/performance.md ("Disk-backed LUNs") and in
//! the target's connection module.
//!
//! ## Buffers and descriptors
//!
//! Reads get a buffer of their own: aligned for `O_DIRECT` and, from
//! 64 KiB up, carved from huge pages so the device sees one contiguous
//! segment instead of scattered pages ([`crate::aligned`] says why and what
//! it bought); buffered reads from 64 KiB up use the same pool
//! ([`crate::pool`]), smaller ones a plain allocation. Writes take the
//! command's Data-Out pieces as they are (`IORING_OP_WRITEV`), except for
//! `O_DIRECT` when a piece is not aligned, where they are first gathered
//! into one such buffer. Every request holds its file (an `Arc<File>`), so
//! the descriptor outlives it.
//!
//! ## Where io_uring is unavailable
//!
//! [`Ring::new`] fails (an old kernel, `kernel.io_uring_disabled`, a
//! seccomp filter); the caller then runs requests the synchronous way.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::Arc;

use bytes::Bytes;
use io_uring::{opcode, squeue, types, IoUring};
use ironlun_payload::DataOutBuffer;
use rustix::io::Errno;

use crate::aligned::{buffer_aligned, AlignedBuf};
use crate::pool::PooledBuf;
use crate::{check_range, Backend};

/// Pieces per `IORING_OP_WRITEV`; a write in more pieces goes in several
/// rounds (each resumes where the last ended, as after a short write).
const IOV_PER_SQE: usize = 64;

/// How often [`Ring::submit`] retries while the kernel lacks resources.
const SUBMIT_RETRIES: u32 = 100;

/// One request to a backend's file.
#[derive(Clone, Debug)]
pub enum Request {
    /// Read `len` bytes at `offset`.
    Read { offset: u64, len: usize },
    /// Write the first `len` bytes of `data` at `offset`; with `durable`
    /// they are on stable storage when the request completes
    /// (`RWF_DSYNC`: FUA, or the write cache off).
    Write {
        offset: u64,
        data: DataOutBuffer,
        len: usize,
        durable: bool,
    },
    /// Make every completed write durable (`fdatasync`).
    Flush,
}

impl Request {
    /// Offset and length the request touches (a flush: none).
    fn range(&self) -> (u64, usize) {
        match self {
            Request::Read { offset, len } | Request::Write { offset, len, .. } => (*offset, *len),
            Request::Flush => (0, 0),
        }
    }
}

/// What one submission queue entry asked of the kernel, read back from
/// the entry as the kernel reads it (for tests of what reached the
/// kernel: [`Ring::watch_submissions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// `IORING_OP_READ` of `len` bytes at `offset`.
    Read { offset: u64, len: u32 },
    /// `IORING_OP_WRITEV` at `offset`; `dsync`: it carries `RWF_DSYNC`,
    /// so the data is on stable storage when it completes.
    Write { offset: u64, dsync: bool },
    /// `IORING_OP_FSYNC`; `datasync`: `IORING_FSYNC_DATASYNC`
    /// (`fdatasync`).
    Fsync { datasync: bool },
    /// Any other operation, by its code.
    Other(u8),
}

impl Submitted {
    /// Reads an entry's operation, offset, length and flags (struct
    /// io_uring_sqe: `opcode` at byte 0, `off` at 8, `len` at 24, the
    /// operation's flags at 28, in native byte order).
    fn of(entry: &squeue::Entry) -> Submitted {
        const _: () = assert!(std::mem::size_of::<squeue::Entry>() == 64);
        // SAFETY: squeue::Entry is #[repr(C)] around the kernel's 64-byte
        // struct io_uring_sqe, which has no padding, and io-uring builds
        // every entry from zeroed memory: all 64 bytes are initialized,
        // and u8 has no alignment to keep.
        let raw: &[u8; 64] = unsafe { &*std::ptr::from_ref(entry).cast::<[u8; 64]>() };
        let u32_at = |at: usize| {
            raw.get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u32::from_ne_bytes)
        };
        let offset = raw
            .get(8..16)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_ne_bytes);
        let flags = u32_at(28);
        match raw[0] {
            opcode::Read::CODE => Submitted::Read {
                offset,
                len: u32_at(24),
            },
            opcode::Writev::CODE => Submitted::Write {
                offset,
                dsync: flags & libc::RWF_DSYNC as u32 != 0,
            },
            opcode::Fsync::CODE => Submitted::Fsync {
                datasync: flags & types::FsyncFlags::DATASYNC.bits() != 0,
            },
            code => Submitted::Other(code),
        }
    }
}

/// Called with each entry as it goes on the submission queue.
type Watcher = Box<dyn FnMut(Submitted) + Send + Sync>;

/// Why a request was not taken: the caller runs it the synchronous way.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The backend has no file to run it against ([`Backend::file_for`]).
    NotAFile,
    /// As many requests are in flight as the ring holds.
    Full,
}

/// What a ring carries for its owner: a request, the store it is for,
/// and whatever else the owner needs back when it is done (the command).
pub trait Job {
    fn backend(&self) -> &dyn Backend;
    fn request(&self) -> &Request;
}

/// A finished job and what came of its request (the bytes read, or
/// nothing for writes and flushes).
#[derive(Debug)]
pub struct Completion<J> {
    pub job: J,
    pub result: io::Result<Option<Bytes>>,
}

/// Memory a read lands in: aligned for `O_DIRECT` (from huge-page chunks
/// when large, see [`crate::aligned`]), else the large-read pool or a
/// plain allocation.
struct ReadBuf(PooledBuf);

impl ReadBuf {
    fn new(len: usize, direct: bool) -> io::Result<ReadBuf> {
        Ok(ReadBuf(if direct {
            PooledBuf::get_aligned(len)?
        } else {
            PooledBuf::get(len)?
        }))
    }

    /// The buffer's bytes from `at` on, for the kernel to fill.
    fn tail(&mut self, at: usize) -> &mut [u8] {
        self.0.as_mut_slice().get_mut(at..).unwrap_or_default()
    }

    fn freeze(self) -> Bytes {
        self.0.freeze()
    }
}

/// The bytes a write takes from.
enum WriteBuf {
    /// The command's own pieces (the first `len` bytes of them).
    Pieces(DataOutBuffer),
    /// The pieces gathered into one aligned buffer, for `O_DIRECT`.
    Gathered(PooledBuf),
}

enum Work {
    Read {
        buf: ReadBuf,
    },
    Write {
        buf: WriteBuf,
        /// Rebuilt for every round; its heap block stays put while the
        /// kernel reads it. libc's type, not rustix's: io-uring's `Writev`
        /// takes a pointer to `libc::iovec`.
        iov: Vec<libc::iovec>,
        durable: bool,
    },
    Flush,
}

/// A request the kernel has (or is about to have).
struct InFlight<J> {
    job: J,
    file: Arc<File>,
    offset: u64,
    len: usize,
    /// Bytes transferred so far (short transfers are resumed).
    done: usize,
    work: Work,
}

// SAFETY: the raw iovec pointers in `Work::Write` point into buffers the
// same InFlight owns (Bytes, AlignedBuf), which are Send; the iovecs are
// only read by the kernel and rebuilt by the ring's owner. Everything else
// is Send when the job is.
unsafe impl<J: Send> Send for InFlight<J> {}
// SAFETY: a shared InFlight offers nothing that mutates: the iovecs are
// plain data behind `&`, and the buffers they point into are only written
// through `&mut` (by the owner) or by the kernel for reads, whose buffer
// nothing reads before the completion hands it out by value.
unsafe impl<J: Sync> Sync for InFlight<J> {}

/// An io_uring with the requests it carries. Not shared: one owner pushes,
/// submits and completes.
pub struct Ring<J> {
    uring: IoUring,
    /// Requests by slot; a slot's index is its SQE's user data.
    slots: Vec<Option<InFlight<J>>>,
    free: Vec<usize>,
    in_flight: usize,
    /// Most requests in flight at once.
    capacity: usize,
    /// Entries pushed to the submission queue and not yet submitted.
    unsubmitted: usize,
    /// Finished requests not yet handed to the caller.
    finished: VecDeque<Completion<J>>,
    /// Completion entries being settled (kept for its allocation).
    cqes: Vec<(u64, i32)>,
    /// Told of every entry queued ([`Ring::watch_submissions`]).
    watcher: Option<Watcher>,
}

impl<J> Ring<J> {
    /// A ring for up to `capacity` requests in flight at once.
    pub fn new(capacity: u32) -> io::Result<Ring<J>> {
        let capacity = capacity.clamp(1, 4096);
        let uring = IoUring::builder()
            // The completion queue holds every request in flight, so it
            // never overflows.
            .setup_cqsize(capacity.saturating_mul(2))
            .build(capacity.next_power_of_two())?;
        Ok(Ring {
            uring,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            capacity: capacity as usize,
            unsubmitted: 0,
            finished: VecDeque::new(),
            cqes: Vec::new(),
            watcher: None,
        })
    }

    /// Has `f` told of each entry as it goes on the submission queue,
    /// read back from the entry itself: for tests of what reaches the
    /// kernel (that a durable write carries `RWF_DSYNC`, that a flush is
    /// an `fdatasync`).
    pub fn watch_submissions(&mut self, f: impl FnMut(Submitted) + Send + Sync + 'static) {
        self.watcher = Some(Box::new(f));
    }

    /// The descriptor that polls readable while completions wait.
    pub fn fd(&self) -> RawFd {
        self.uring.as_raw_fd()
    }

    /// Requests pushed and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether pushed requests wait for [`Ring::submit`].
    pub fn needs_submit(&self) -> bool {
        self.unsubmitted > 0
    }

    /// Takes a job (its request shares the job's data); the request goes
    /// to the kernel at the next [`Ring::submit`]. A request outside the
    /// store fails at once (as its synchronous twin would), reported by
    /// [`Ring::complete`]. A refused job comes back untouched: run its
    /// request the synchronous way.
    pub fn push(&mut self, job: J) -> Result<(), (Refused, J)>
    where
        J: Job,
    {
        let (offset, len) = job.request().range();
        let Some(target) = job.backend().file_for(offset, len) else {
            return Err((Refused::NotAFile, job));
        };
        if self.in_flight >= self.capacity {
            return Err((Refused::Full, job));
        }
        if let Err(e) = check_range(offset, len, job.backend().size_bytes()) {
            self.finished.push_back(Completion {
                job,
                result: Err(e),
            });
            return Ok(());
        }
        let work = Work::new(job.request(), target.direct);
        match work {
            Ok(work) => {
                let op = InFlight {
                    job,
                    file: target.file,
                    offset,
                    len,
                    done: 0,
                    work,
                };
                let slot = self.free.pop().unwrap_or_else(|| {
                    self.slots.push(None);
                    self.slots.len() - 1
                });
                if let Some(s) = self.slots.get_mut(slot) {
                    *s = Some(op);
                }
                self.in_flight += 1;
                self.queue(slot);
            }
            Err(e) => self.finished.push_back(Completion {
                job,
                result: Err(e),
            }),
        }
        Ok(())
    }

    /// Puts a slot's next round on the submission queue (submitting what
    /// is queued first if the queue is full).
    fn queue(&mut self, slot: usize) {
        let Some(Some(op)) = self.slots.get_mut(slot) else {
            return;
        };
        let entry = op.entry().user_data(slot as u64);
        for attempt in 0..2 {
            // SAFETY: the entry's buffers and iovecs belong to the
            // InFlight in `slots[slot]`, which is neither dropped nor
            // changed until its completion arrives (`settle` takes it out
            // only then; `Drop` waits for every completion). Its file is
            // kept open by the InFlight's Arc<File>.
            let pushed = unsafe { self.uring.submission().push(&entry) };
            if pushed.is_ok() {
                self.unsubmitted += 1;
                if let Some(watch) = &mut self.watcher {
                    watch(Submitted::of(&entry));
                }
                return;
            }
            // Queue full (it holds as many entries as requests may be in
            // flight, so this is a safety net): hand the queue to the
            // kernel and try once more.
            if attempt == 0 && self.submit().is_err() {
                break;
            }
        }
        // Never queued: the kernel has not seen this round.
        self.fail_slot(slot, io::Error::other("io_uring submission queue full"));
    }

    /// Hands the queued requests to the kernel (one `io_uring_enter`).
    /// The kernel's lack of resources (EAGAIN, EBUSY) is waited out
    /// briefly, settling completions meanwhile; an error returned leaves
    /// the requests queued (their buffers stay owned here), and the owner
    /// should give up on the ring (drop it, which waits for the rest).
    pub fn submit(&mut self) -> io::Result<()> {
        let mut busy = 0;
        while self.unsubmitted > 0 {
            match self.uring.submit() {
                Ok(n) => self.unsubmitted = self.unsubmitted.saturating_sub(n.max(1)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.raw_os_error().map(Errno::from_raw_os_error),
                        Some(Errno::AGAIN | Errno::BUSY)
                    ) && busy < SUBMIT_RETRIES =>
                {
                    busy += 1;
                    self.reap();
                    std::thread::yield_now();
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Takes every finished request; requests that transferred less than
    /// asked go back to the kernel for the rest (submitted here). Call
    /// when [`Ring::fd`] is readable (and after [`Ring::push`], which may
    /// finish a request at once). An error is [`Ring::submit`]'s.
    pub fn complete(&mut self, out: &mut Vec<Completion<J>>) -> io::Result<()> {
        self.reap();
        out.extend(self.finished.drain(..));
        self.submit()
    }

    /// Settles every entry on the completion queue.
    fn reap(&mut self) {
        let mut cqes = std::mem::take(&mut self.cqes);
        self.uring
            .completion()
            .for_each(|c| cqes.push((c.user_data(), c.result())));
        for &(slot, res) in &cqes {
            self.settle(slot as usize, res);
        }
        cqes.clear();
        self.cqes = cqes;
    }

    /// One completion queue entry for `slot`.
    fn settle(&mut self, slot: usize, res: i32) {
        let Some(Some(op)) = self.slots.get_mut(slot) else {
            return;
        };
        let step = match res {
            n if n < 0 => match Errno::from_raw_os_error(-n) {
                Errno::INTR | Errno::AGAIN => Step::Again,
                errno => Step::Fail(errno.into()),
            },
            0 if op.done < op.len => Step::Fail(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("no bytes moved at offset {}", op.offset + op.done as u64),
            )),
            n => {
                op.done += n as usize;
                if op.done < op.len {
                    Step::Again
                } else {
                    Step::Done
                }
            }
        };
        match step {
            Step::Again => self.queue(slot),
            Step::Done => {
                if let Some(op) = self.take(slot) {
                    self.finished.push_back(op.finish());
                }
            }
            Step::Fail(e) => self.fail_slot(slot, e),
        }
    }

    fn fail_slot(&mut self, slot: usize, e: io::Error) {
        if let Some(op) = self.take(slot) {
            self.finished.push_back(Completion {
                job: op.job,
                result: Err(e),
            });
        }
    }

    fn take(&mut self, slot: usize) -> Option<InFlight<J>> {
        let op = self.slots.get_mut(slot)?.take()?;
        self.free.push(slot);
        self.in_flight -= 1;
        Some(op)
    }

    /// Waits until the kernel has finished with every request (their
    /// completions are kept for [`Ring::complete`]). Blocks the thread.
    pub fn wait_all(&mut self) -> io::Result<()> {
        self.submit()?;
        while self.in_flight > 0 {
            match self.uring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            self.reap();
            self.submit()?;
        }
        Ok(())
    }
}

enum Step {
    Again,
    Done,
    Fail(io::Error),
}

impl<J> Drop for Ring<J> {
    /// The kernel may still write into buffers the slots own: they must
    /// outlive its use of them. Wait for every request; if that fails,
    /// leak the slots rather than free memory the kernel may write.
    fn drop(&mut self) {
        if self.in_flight > 0 && self.wait_all().is_err() {
            std::mem::forget(std::mem::take(&mut self.slots));
        }
    }
}

impl Work {
    fn new(request: &Request, direct: bool) -> io::Result<Work> {
        let (_, len) = request.range();
        Ok(match request {
            Request::Read { .. } => Work::Read {
                buf: ReadBuf::new(len, direct)?,
            },
            Request::Write { data, durable, .. } => {
                let pieces_fit = data
                    .slices(0..len)
                    .all(|p| buffer_aligned(p.as_ptr(), p.len()));
                let buf = if direct && !pieces_fit {
                    WriteBuf::Gathered(AlignedBuf::gather(data.slices(0..len), len)?)
                } else {
                    WriteBuf::Pieces(data.clone())
                };
                Work::Write {
                    buf,
                    iov: Vec::new(),
                    durable: *durable,
                }
            }
            Request::Flush => Work::Flush,
        })
    }
}

impl<J> InFlight<J> {
    /// The submission entry for the request's next round (from `done`).
    fn entry(&mut self) -> squeue::Entry {
        let fd = types::Fd(self.file.as_raw_fd());
        let at = self.offset + self.done as u64;
        let (done, len) = (self.done, self.len);
        match &mut self.work {
            Work::Read { buf } => {
                let tail = buf.tail(done);
                let want = tail.len().min(len - done);
                opcode::Read::new(fd, tail.as_mut_ptr(), want as u32)
                    .offset(at)
                    .build()
            }
            Work::Write { buf, iov, durable } => {
                iov.clear();
                let mut add = |p: &[u8]| {
                    if iov.len() < IOV_PER_SQE && !p.is_empty() {
                        iov.push(libc::iovec {
                            iov_base: p.as_ptr() as *mut libc::c_void,
                            iov_len: p.len(),
                        });
                    }
                };
                match buf {
                    WriteBuf::Pieces(d) => d.slices(done..len).for_each(&mut add),
                    WriteBuf::Gathered(b) => add(b.as_ref().get(done..len).unwrap_or_default()),
                }
                // libc's constant: io-uring's `rw_flags` takes the C int.
                let flags = if *durable { libc::RWF_DSYNC } else { 0 };
                opcode::Writev::new(fd, iov.as_ptr(), iov.len() as u32)
                    .offset(at)
                    .rw_flags(flags)
                    .build()
            }
            Work::Flush => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
        }
    }

    fn finish(self) -> Completion<J> {
        let data = match self.work {
            Work::Read { buf } => Some(buf.freeze().slice(..self.len)),
            Work::Write { .. } | Work::Flush => None,
        };
        Completion {
            job: self.job,
            result: Ok(data),
        }
    }
}

#[cfg(test)]
mod tests;
