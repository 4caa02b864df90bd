//! The io_uring engine: the run's own thread queues each I/O on a ring,
//! submits a batch with one system call, waits for the ring's descriptor
//! to poll readable and reaps what finished. Each I/O slot has its own
//! aligned buffer, written from (pre-filled with the write pattern) or
//! read into; nothing is allocated per I/O unless verification needs the
//! data read.

use std::collections::VecDeque;
use std::io;
use std::os::unix::io::{AsRawFd, RawFd};

use bytes::Bytes;
use io_uring::{opcode, types, IoUring};
use tokio::io::unix::AsyncFd;

use super::buf::SlotBuf;
use super::{good, io_error, Completion, LocalIo};

pub(crate) struct Uring {
    /// Declared before the ring: dropped, and deregistered, first.
    ready: AsyncFd<RawFd>,
    ring: IoUring,
    bufs: Vec<SlotBuf>,
    /// The I/O in flight in each slot (it holds its file open).
    slots: Vec<Option<LocalIo>>,
    in_flight: usize,
    unsubmitted: usize,
}

impl Uring {
    pub(super) fn new(slots: usize, max_len: usize, payload: &Bytes) -> io::Result<Uring> {
        let n = u32::try_from(slots.clamp(1, 4096)).unwrap_or(4096);
        // The completion queue holds every I/O in flight: it never
        // overflows.
        let ring = IoUring::builder()
            .setup_cqsize(n.saturating_mul(2))
            .build(n.next_power_of_two())?;
        // SAFETY: the descriptor is the ring's, open until the ring drops;
        // `ready` is declared before `ring`, so it is dropped (and
        // deregistered) first.
        let ready = unsafe {
            AsyncFd::register_with_interest(ring.as_raw_fd(), tokio::io::Interest::READABLE)?
        };
        Ok(Uring {
            ready,
            ring,
            bufs: (0..slots).map(|_| SlotBuf::new(max_len, payload)).collect(),
            slots: (0..slots).map(|_| None).collect(),
            in_flight: 0,
            unsubmitted: 0,
        })
    }

    /// Queues `io` on the ring; it reaches the kernel at the next
    /// [`Uring::submit`] (or now, when the queue is full).
    pub(super) fn push(&mut self, mut io: LocalIo) -> io::Result<()> {
        let tag = io.tag;
        let (Some(buf), Some(slot)) = (
            self.bufs.get_mut(tag as usize),
            self.slots.get_mut(tag as usize),
        ) else {
            return Err(io::Error::other(format!("no I/O slot {tag}")));
        };
        if slot.is_some() {
            return Err(io::Error::other(format!("I/O slot {tag} is busy")));
        }
        let len = io.len.min(buf.as_ref().len());
        io.len = len;
        let fd = types::Fd(io.dev.file.as_raw_fd());
        let entry = match &io.write {
            Some(data) => {
                if let Some(d) = data {
                    buf.put(d);
                }
                opcode::Write::new(fd, buf.as_ref().as_ptr(), len as u32)
                    .offset(io.offset)
                    .build()
            }
            None => opcode::Read::new(fd, buf.as_mut().as_mut_ptr(), len as u32)
                .offset(io.offset)
                .build(),
        }
        .user_data(tag);
        *slot = Some(io);
        self.in_flight += 1;
        loop {
            // SAFETY: the entry points into this slot's buffer, which the
            // ring's owner keeps (and never touches) until the entry's
            // completion is reaped; dropping the owner first waits for
            // every entry in flight (see Drop). The slot's file stays open
            // through the `LocalIo` kept in `slots`.
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                self.unsubmitted += 1;
                return Ok(());
            }
            self.submit()?;
        }
    }

    /// Hands every queued I/O to the kernel.
    pub(super) fn submit(&mut self) -> io::Result<()> {
        while self.unsubmitted > 0 {
            match self.ring.submit() {
                Ok(n) => self.unsubmitted = self.unsubmitted.saturating_sub(n.max(1)),
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()) => {
                    self.reap_none()?
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// EBUSY: the completion queue is full; wait for one completion (it
    /// stays queued for [`Uring::reap`]).
    fn reap_none(&mut self) -> io::Result<()> {
        self.ring.submit_and_wait(1).map(|_| ())
    }

    /// Resolves when the ring's descriptor polls readable.
    pub(super) async fn ready(&mut self) -> io::Result<()> {
        let mut guard = self.ready.readable().await?;
        // Cleared before reaping: a completion posted after the reap
        // makes a new edge.
        guard.clear_ready();
        Ok(())
    }

    /// Moves every finished I/O to `out`.
    pub(super) fn reap(&mut self, out: &mut VecDeque<Completion>) {
        let done: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (tag, res) in done {
            let Some(io) = self.slots.get_mut(tag as usize).and_then(Option::take) else {
                continue;
            };
            self.in_flight = self.in_flight.saturating_sub(1);
            let what = if io.write.is_some() { "write" } else { "read" };
            let result = if res < 0 {
                Err(io_error(what, &io, io::Error::from_raw_os_error(-res)))
            } else if res as usize != io.len {
                let short = io::Error::other(format!("short {what}: {res} bytes"));
                Err(io_error(what, &io, short))
            } else if io.write.is_none() && io.keep {
                let data = self.bufs.get(tag as usize).map(|b| b.head(io.len));
                Ok(good(Bytes::copy_from_slice(data.unwrap_or(&[]))))
            } else {
                Ok(good(Bytes::new()))
            };
            out.push_back((tag, result));
        }
    }
}

impl Drop for Uring {
    /// The kernel may still read or write the slots' buffers: wait for
    /// every I/O in flight; if that fails, leak the buffers rather than
    /// free memory the kernel may write.
    fn drop(&mut self) {
        let mut sink = VecDeque::new();
        while self.in_flight > 0 {
            if self.submit().is_err() || self.ring.submit_and_wait(1).is_err() {
                std::mem::forget(std::mem::take(&mut self.bufs));
                return;
            }
            self.reap(&mut sink);
            sink.clear();
        }
    }
}
