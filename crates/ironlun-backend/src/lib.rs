//! # ironlun-backend: where the blocks live
//!
//! **Owns:** reading, writing and flushing bytes at offsets of a store:
//! `null` (reads are zeros, writes vanish), `ram` (sparse, allocated on first
//! write), `file` (a regular file, sparse or preallocated, buffered or
//! `O_DIRECT`), `block` (a block device), each under an advisory lock
//! while it is served ([`LOCK_WAIT`], one holder at a time), and `rbd` (a Ceph RBD image,
//! [`rbd`]); what opening a file or device would do, found out without
//! doing it ([`probe`]); the asynchronous path of stores whose requests complete by
//! themselves ([`aio`]); the io_uring that runs file
//! and block requests without a thread each ([`ring`]); reusable large
//! buffers ([`pool`]) and `O_DIRECT`-aligned, huge-page-backed memory
//! ([`aligned`]); the conditions a store reports that no errno names
//! ([`Fault`]) and what it has to tell the operator's log ([`events`]).
//! Also, for tests ([`testing`]), a fault-injecting wrapper for error
//! paths and a recorder of every request made of a store, for what the
//! layers above ask of the medium.
//!
//! **Must not know:** CDBs, LBAs or block sizes as SCSI sees them (offsets
//! and lengths arrive in bytes, already checked against the size), sense
//! data, iSCSI.
//!
//! Reads return [`Bytes`]: a zero region is a slice of one shared zeroed
//! allocation (whose pages are the kernel's zero page until written, so it
//! costs no memory), and data is copied once out of the store.

// This crate keeps unsafe code: every block must say why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod aio;
pub mod aligned;
pub mod events;
mod fault;
mod file;
mod image_lock;
mod lock;
mod null;
pub mod pool;
pub mod probe;
mod ram;
pub mod rbd;
pub mod ring;
pub mod snapshot;
pub mod testing;
mod turns;
mod zeros;

/// The skip rule of the workspace's tests (`tests/support/skip.rs`).
#[cfg(test)]
#[path = "../../../tests/support/skip.rs"]
mod skip;

use std::fs::File;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
pub use ironlun_payload::Payload;

pub use events::{Severity, StoreEvent, StoreEvents};
pub use fault::{Fault, LOSS_REPORTED_FOR};
pub use file::{FileBackend, FileOptions, ZERO_COPY_MIN};
pub use image_lock::ImageLock;
pub use ironlun_rbd::ClusterConfig;
pub use lock::LOCK_WAIT;
pub use null::NullBackend;
pub use ram::RamBackend;
pub use rbd::{RbdBackend, RbdOptions};
pub use snapshot::{SnapshotInfo, SnapshotName, Snapshots};
pub use zeros::zeros;

/// The medium's rotation, for MEDIUM ROTATION RATE (SBC-4 §6.6.2, VPD
/// page B1h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// Nothing known (a file system without a block device under it).
    NotReported,
    /// Memory or a solid-state device.
    NonRotating,
    /// A rotating disk, at this many revolutions per minute.
    Rpm(u16),
}

impl Rotation {
    /// The field's value: 0000h not reported, 0001h non-rotating, or the
    /// rate within 0401h–FFFEh.
    pub fn code(self) -> u16 {
        match self {
            Rotation::NotReported => 0,
            Rotation::NonRotating => 1,
            Rotation::Rpm(r) => r.clamp(0x0401, 0xfffe),
        }
    }
}

/// A store of bytes addressed by offset.
///
/// Callers guarantee `offset + len <= size_bytes()`; implementations check
/// it anyway and answer out-of-range requests with an error, never a panic.
pub trait Backend: Send + Sync {
    /// Short name for logs: `null`, `ram`, `file`, `block`.
    fn kind(&self) -> &'static str;

    /// A name of the store itself that every process opening it shares
    /// (an RBD image's pool and id), from which the LU's identifiers are
    /// made, so that gateways serving it agree on them. `None`, the
    /// default: the store has no such name, and the LU's identifiers
    /// come from the target's name and the LUN.
    fn identity(&self) -> Option<String> {
        None
    }

    fn size_bytes(&self) -> u64;

    /// Reads `len` bytes at `offset`.
    fn read(&self, offset: u64, len: usize) -> io::Result<Bytes>;

    /// Reads `len` bytes at `offset` for sending to an initiator: in
    /// memory, or as a file range the sender passes to the socket without
    /// copying it (see [`FileBackend`]). The default reads into memory.
    fn read_payload(&self, offset: u64, len: usize) -> io::Result<Payload> {
        self.read(offset, len).map(Payload::Mem)
    }

    /// Writes `data` at `offset`. With `durable` set the data is on stable
    /// storage when this returns (FUA, or write cache disabled).
    fn write(&self, offset: u64, data: &[u8], durable: bool) -> io::Result<()>;

    /// Writes `parts` one after another from `offset`: a command's data
    /// in the pieces it arrived in, so that it need not be joined first.
    /// The default writes each piece in turn; stores that can take them
    /// in one call (`pwritev`) do.
    fn write_vectored(&self, offset: u64, parts: &[&[u8]], durable: bool) -> io::Result<()> {
        let total = parts.iter().map(|p| p.len()).sum();
        check_range(offset, total, self.size_bytes())?;
        let mut at = offset;
        for p in parts {
            self.write(at, p, durable)?;
            at += p.len() as u64;
        }
        Ok(())
    }

    /// Makes every completed write durable (SYNCHRONIZE CACHE).
    fn flush(&self) -> io::Result<()>;

    /// Whether a write of `len` bytes at `offset` (a write, a write-same,
    /// or the zeroing of a deallocation) must not run alongside any other
    /// request to the store: a `,direct` file or device writes a range not
    /// aligned to [`aligned::DIRECT_ALIGN`] as a read-modify-write of the
    /// enclosing aligned range (see [`FileBackend`]). The LU then runs it
    /// alone, never staged. The default: no store needs it.
    fn write_needs_exclusive(&self, offset: u64, len: u64) -> bool {
        let _ = (offset, len);
        false
    }

    /// Whether calls may block on the kernel's I/O (file, block device):
    /// the driver then runs them off its network threads.
    fn may_block(&self) -> bool;

    /// For callers that run requests themselves, asynchronously (a
    /// [`ring::Ring`]): the open file a request of `len` bytes at `offset`
    /// goes to. `None` for stores that are not files whose calls may block
    /// (null, RAM, a file on a memory file system): those run their
    /// requests through the methods above.
    fn file_for(&self, offset: u64, len: usize) -> Option<FileTarget> {
        let _ = (offset, len);
        None
    }

    /// For stores whose requests complete by themselves (Ceph RBD): the
    /// asynchronous path a transport runs READ, WRITE and SYNCHRONIZE
    /// CACHE through (see [`aio`]). `None` for the others.
    fn async_medium(&self) -> Option<&dyn aio::AsyncMedium> {
        None
    }

    /// For stores shared by a gateway group (Ceph RBD): the lock that
    /// says which gateway owns the store ([`ImageLock`]). `None` for the
    /// others, which a group refuses.
    fn image_lock(&self) -> Option<&dyn ImageLock> {
        None
    }

    /// For stores whose size can change behind the target's back (an RBD
    /// image resized in Ceph): the new sizes as they happen. `None` for
    /// stores that change only when told ([`Backend::resize`]) or when
    /// looked at again ([`Backend::refresh_size`]).
    fn size_watch(&self) -> Option<aio::SizeWatch> {
        None
    }

    /// What the store has to tell the operator as it runs (an RBD client
    /// fenced or reconnected, writes lost), for the target to log with
    /// the LU's name. Given once: later calls answer `None`, as do stores
    /// that have nothing to say.
    fn events(&self) -> Option<events::StoreEvents> {
        None
    }

    /// Whether the store can take commands, without touching the medium
    /// (TEST UNIT READY): an error (a [`Fault`]) when it cannot until an
    /// operator acts. An unreachable cluster is not this: it may come
    /// back by itself, and the commands that reach it say so.
    fn ready(&self) -> io::Result<()> {
        Ok(())
    }

    /// Writes `data` at `offset` only if the store holds `compare` there,
    /// as one atomic step of the store itself (so that it holds for every
    /// client of a shared store, not only this target's commands). The
    /// default, and a request the store cannot do atomically, answer
    /// [`CompareWrite::Unsupported`]: the caller then compares and writes
    /// itself, under its own exclusion. With `durable`, data written is
    /// on stable storage when this returns (FUA, or the write cache off).
    fn compare_and_write(
        &self,
        offset: u64,
        compare: &[u8],
        data: &[u8],
        durable: bool,
    ) -> io::Result<CompareWrite> {
        let _ = (offset, compare, data, durable);
        Ok(CompareWrite::Unsupported)
    }

    /// For a store other clients share (an RBD image), where the LU's own
    /// exclusion cannot keep them out: the longest COMPARE AND WRITE, in
    /// bytes, [`Backend::compare_and_write`] does as one atomic step of
    /// the store (for a range that lies inside one aligned piece of that
    /// size). `None`, the default: the store is this target's alone, and
    /// any length compared and written under the LU's exclusion is
    /// atomic for every initiator that can reach it.
    fn compare_and_write_limit(&self) -> Option<u64> {
        None
    }

    /// Writes `pattern` over the `len` bytes at `offset` (`len` a
    /// multiple of the pattern's length) in one call of the store's own
    /// that repeats it there (librbd's writesame: the pattern crosses the
    /// network once, not once per block). With `durable` the data is on
    /// stable storage when this returns. `Ok(false)`: the store has no
    /// such call, or not for this request; nothing was written and the
    /// caller writes the copies itself. The default.
    fn write_same(&self, offset: u64, len: u64, pattern: &[u8], durable: bool) -> io::Result<bool> {
        let _ = (offset, len, pattern, durable);
        Ok(false)
    }

    /// Whether the store keeps its own account of acknowledged writes a
    /// failed flush or a lost client took with it, and reports them
    /// ([`Fault::LostWrites`], for [`LOSS_REPORTED_FOR`]): RBD's ledger.
    /// The others (the default) leave it to the LU, which after a failed
    /// flush or durable write refuses flushes and durable writes for that
    /// long (ironlun-scsi's `durability`).
    fn reports_lost_writes(&self) -> bool {
        false
    }

    /// Whether reads and writes copy the data (every store but `null`,
    /// whose reads share one zeroed buffer and whose writes vanish).
    fn copies_data(&self) -> bool {
        true
    }

    /// Whether [`Backend::read_payload`] of `len` bytes hands out a file
    /// range instead of copying (nothing to move off the network thread).
    fn reads_in_place(&self, len: usize) -> bool {
        let _ = len;
        !self.copies_data()
    }

    /// Looks at the store's size again (a file grown with `truncate`, a
    /// resized block device) and returns it. Stores of fixed size return
    /// their size.
    fn refresh_size(&self) -> io::Result<u64> {
        Ok(self.size_bytes())
    }

    /// The store's point-in-time copies ([`snapshot`]), or why it keeps
    /// none (the default: the kind's reason, [`snapshot::unsupported`]).
    fn snapshots(&self) -> Result<Box<dyn Snapshots + '_>, String> {
        Err(snapshot::unsupported(self.kind()))
    }

    /// Grows or shrinks the store to `bytes` (an operator's resize).
    /// Stores whose size is not theirs to change refuse, saying why.
    fn resize(&self, _bytes: u64) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("a {} LUN cannot be resized live", self.kind()),
        ))
    }

    /// Whether the medium rotates, as initiators are told in MEDIUM
    /// ROTATION RATE (SBC-4 §6.6.2). Memory does not.
    fn rotation(&self) -> Rotation {
        Rotation::NonRotating
    }

    /// The unit, in bytes, the store writes whole, where it has one: a
    /// write that covers only part of it costs a read-modify-write or
    /// waits for other writes to the same unit. The LU reports it as its
    /// physical block (SBC-4 §5.20.2) so that initiators align to it.
    /// Memory has none.
    fn physical_block_size(&self) -> Option<u32> {
        None
    }

    /// Bytes the file system under the store still has for it, where
    /// there is one.
    fn free_bytes(&self) -> Option<u64> {
        None
    }

    /// Bytes of storage the store takes up now (its allocated blocks),
    /// where it can say: what thin provisioning reports as used
    /// resources.
    fn used_bytes(&self) -> Option<u64> {
        None
    }

    /// Granularity in bytes at which deallocation releases storage, or 0
    /// when the store cannot deallocate (no thin provisioning).
    fn provisioning_granularity(&self) -> u64 {
        0
    }

    /// Deallocates a range (thin provisioning): it reads as zeros
    /// afterwards, and whole granules release their storage; partial ones
    /// are zero-filled and stay allocated.
    fn deallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "deallocation not supported",
        ))
    }

    /// Which parts of a range have storage: runs of (length in bytes,
    /// allocated) covering `[offset, offset + len)` in order.
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        check_range(offset, 0, self.size_bytes())?;
        Ok(vec![Extent {
            len,
            allocated: true,
        }])
    }
}

/// What [`Backend::compare_and_write`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareWrite {
    /// The compare matched: the new data is written.
    Written,
    /// Byte `n` of the range differed; nothing was written.
    Mismatch(u64),
    /// The store cannot do this one atomically.
    Unsupported,
}

/// An open file a request can be run against (see [`Backend::file_for`]).
#[derive(Clone, Debug)]
pub struct FileTarget {
    pub file: Arc<File>,
    /// Opened with `O_DIRECT`: buffers, offsets and lengths must be
    /// aligned to [`aligned::DIRECT_ALIGN`].
    pub direct: bool,
}

/// A run of bytes that is, or is not, backed by storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub len: u64,
    pub allocated: bool,
}

/// Appends a run, merging it with the previous one when equal.
pub fn push_extent(out: &mut Vec<Extent>, len: u64, allocated: bool) {
    if len == 0 {
        return;
    }
    match out.last_mut() {
        Some(last) if last.allocated == allocated => last.len += len,
        _ => out.push(Extent { len, allocated }),
    }
}

/// Checks that `[offset, offset+len)` lies inside a store of `size` bytes.
pub fn check_range(offset: u64, len: usize, size: u64) -> io::Result<()> {
    let end = offset.checked_add(len as u64);
    match end {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("range {offset}+{len} beyond the end of a {size}-byte store"),
        )),
    }
}
