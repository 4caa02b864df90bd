//! `file` and `block`: a regular file or a block device, accessed with
//! positioned reads and writes (`pread`/`pwrite`), optionally with
//! `O_DIRECT`.
//!
//! A store is locked while it is open (the `lock` module: one holder at
//! a time), and opening never changes an existing file's size unasked
//! (`file_size`: `size=` must match it, or be larger with `grow`).
//!
//! With `O_DIRECT` the kernel wants buffer, offset and length aligned to the
//! device's logical block size. Buffers here are allocated 4096-aligned
//! ([`DIRECT_ALIGN`]), and every request goes through the direct
//! descriptor: one whose offset or length is not a multiple of 4096 (512-byte
//! LUN blocks at odd offsets) is read over the enclosing aligned range into
//! a bounce buffer, and written as a read-modify-write of that range, which
//! the LU runs alone ([`Backend::write_needs_exclusive`]). The store never
//! mixes direct and buffered I/O on a page: Linux cannot keep the two
//! coherent when they race (a direct write whose page cache invalidation
//! fails leaves stale pages and fails the next fsync with EIO); the
//! `direct` module says how. Unaligned writes therefore serialise the LU;
//! initiators that honour the physical block reported (READ CAPACITY(16)'s
//! LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT, SBC-4 §5.20.2: at least
//! 4096 here) send none.
//!
//! A regular file on a memory file system (tmpfs, ramfs, hugetlbfs) never
//! waits for a device: `pread`/`pwrite` there are copies to and from the
//! page cache, like the `ram` backend's. Such a file reports
//! [`Backend::may_block`] false, so the target runs its commands inline on
//! the connection's thread instead of paying a thread hop per command
//! (measured: ~15 µs of CPU per 4 KiB command, which is most of the cost;
//! see docs/performance.md). As with `ram`, a page swapped out must be
//! read back in; a swapping target has worse problems than that.

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use ironlun_payload::{FileRange, Payload};
use ironlun_units::format_size;

use crate::turns::Turns;
use rustix::buffer::spare_capacity;
use rustix::fs::{FallocateFlags, OFlags};
use rustix::io::{Errno, ReadWriteFlags};

use crate::aligned::{direct_aligned, DIRECT_ALIGN};
use crate::lock::{lock_exclusive, LOCK_WAIT};
use crate::{check_range, Backend, FileTarget, Rotation};

/// Reads from this size up on a memory file system leave their bytes in
/// the page cache for the socket to take ([`Backend::read_payload`]).
/// Below it, copying costs less than the extra system call per PDU.
pub const ZERO_COPY_MIN: usize = 64 << 10;

/// How to open a file or device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileOptions {
    /// LUN size in bytes. Required to create a missing (or size an
    /// empty) file; an existing file must be this size already, or
    /// smaller with [`FileOptions::grow`] ([`FileBackend::open_file`]).
    pub size: Option<u64>,
    /// An existing file smaller than `size` is grown to it; without
    /// this it is refused (the spec's `,grow`).
    pub grow: bool,
    /// Use `O_DIRECT` (bypass the page cache).
    pub direct: bool,
    /// Allocate all blocks up front (`fallocate`) instead of a sparse file.
    pub preallocate: bool,
    pub read_only: bool,
}

pub struct FileBackend {
    kind: &'static str,
    path: PathBuf,
    /// Shared with the file ranges that reads hand out on memory file
    /// systems ([`Backend::read_payload`]).
    buffered: Arc<File>,
    /// The same file opened with `O_DIRECT`, when asked for; shared with
    /// the rings that run requests asynchronously ([`Backend::file_for`]).
    direct: Option<Arc<File>>,
    /// Bytes exposed; changes only through `refresh_size`.
    size: AtomicU64,
    /// The file lives in memory (tmpfs, ramfs, hugetlbfs): no call waits
    /// for a device.
    in_memory: bool,
    /// What the device under it says of its rotation.
    rotation: Rotation,
    /// The unit the store writes whole ([`store_block`]).
    physical_block: Option<u32>,
    /// Opened without write access (`ro`).
    read_only: bool,
    /// Taken around large writes to a file on a memory file system: the
    /// kernel serialises writes to one inode anyway (`i_rwsem`, taken
    /// exclusively by shmem's and the generic write path), and threads
    /// that wait for it there spin (`osq_lock`); here all but
    /// [`MEMORY_WRITERS`] sleep. See [`FileBackend::write_buffered`].
    memory_writes: Turns,
}

impl FileBackend {
    /// Opens (creating if missing) a regular file, under its lock
    /// (the `lock` module). `size=` creates a missing file or sizes an empty
    /// one; an existing file must be that size already, or smaller with
    /// `grow`: a larger file is refused rather than served in part, a
    /// smaller one rather than grown behind the operator's back.
    pub fn open_file(path: &Path, opts: &FileOptions) -> io::Result<FileBackend> {
        let exists = path.exists();
        if !exists {
            refuse_missing(path, opts)?;
        }
        let buffered = open(path, opts.read_only, false, !exists)?;
        if !buffered.metadata()?.file_type().is_file() {
            return Err(not_a_file(path));
        }
        // Before anything is changed: the size is the holder's to set.
        lock_exclusive(&buffered, path, LOCK_WAIT)?;
        let current = buffered.metadata()?.len();
        let size = file_size(path, current, opts)?;
        if size != current {
            buffered.set_len(size)?;
        }
        if opts.preallocate && !opts.read_only {
            fallocate(&buffered, size)?;
        }
        let direct = if opts.direct {
            Some(Arc::new(open(path, opts.read_only, true, false)?))
        } else {
            None
        };
        let in_memory = on_memory_fs(&buffered)?;
        let meta = buffered.metadata()?;
        let rotation = if in_memory {
            Rotation::NonRotating
        } else {
            device_rotation(meta.dev())
        };
        let physical_block = file_block(&meta, direct.is_some());
        Ok(FileBackend {
            kind: "file",
            path: path.to_owned(),
            buffered: Arc::new(buffered),
            direct,
            size: AtomicU64::new(size),
            in_memory,
            rotation,
            physical_block,
            read_only: opts.read_only,
            memory_writes: Turns::new(MEMORY_WRITERS),
        })
    }

    /// Opens a block device, under its lock (the `lock` module); its size
    /// is the device's (a `size` other than that is refused).
    pub fn open_block(path: &Path, opts: &FileOptions) -> io::Result<FileBackend> {
        let mut buffered = open(path, opts.read_only, false, false)?;
        let meta = buffered.metadata()?;
        if !meta.file_type().is_block_device() {
            return Err(not_a_device(path));
        }
        lock_exclusive(&buffered, path, LOCK_WAIT)?;
        let size = buffered.seek(SeekFrom::End(0))?;
        device_size(path, size, opts)?;
        let direct = if opts.direct {
            Some(Arc::new(open(path, opts.read_only, true, false)?))
        } else {
            None
        };
        let physical_block = device_block(&buffered, direct.is_some());
        Ok(FileBackend {
            kind: "block",
            path: path.to_owned(),
            buffered: Arc::new(buffered),
            direct,
            size: AtomicU64::new(size),
            in_memory: false,
            rotation: device_rotation(meta.rdev()),
            physical_block,
            read_only: opts.read_only,
            memory_writes: Turns::new(MEMORY_WRITERS),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A write of `len` bytes through the page cache. On a memory file
    /// system, writes of [`TURNS_FROM`] bytes or more take turns here,
    /// [`MEMORY_WRITERS`] at a time, before the kernel's inode lock:
    /// profiled on 8 target cores (docs/performance.md, "Issue 40's goals
    /// on many cores" and "Second session on 16 cores"), 8 threads writing
    /// one tmpfs file spent half their CPU spinning for that lock. Smaller writes hold the lock too
    /// briefly for sleeping to pay, and go straight in; so do writes to
    /// other file systems, whose flushes run outside that lock.
    fn write_buffered(
        &self,
        offset: u64,
        parts: &[&[u8]],
        len: usize,
        durable: bool,
    ) -> io::Result<()> {
        if !self.in_memory || len < TURNS_FROM {
            return pwritev_all(&self.buffered, parts, offset, durable);
        }
        let _turn = self.memory_writes.enter();
        pwritev_all(&self.buffered, parts, offset, durable)
    }

    /// Whether the file lives on a memory file system (see the module
    /// docs).
    pub fn in_memory(&self) -> bool {
        self.in_memory
    }

    /// How many of the `len` bytes at `offset` a `,direct` store serves
    /// through its direct descriptor: those before its buffered tail
    /// ([`direct::tail`]).
    fn before_tail(&self, offset: u64, len: usize) -> usize {
        let tail = direct::tail(self.size_bytes());
        let before = tail.saturating_sub(offset).min(len as u64);
        usize::try_from(before).unwrap_or(len)
    }

    /// A `,direct` store's read: through the direct descriptor (see the
    /// `direct` module), and the buffered tail's part through the other.
    fn read_direct(&self, d: &File, offset: u64, len: usize) -> io::Result<Bytes> {
        let before = self.before_tail(offset, len);
        if before == len {
            return direct::read(d, offset, len);
        }
        let rest = read_buffered(&self.buffered, offset + before as u64, len - before)?;
        if before == 0 {
            return Ok(rest);
        }
        let mut all = direct::read(d, offset, before)?.to_vec();
        all.extend_from_slice(&rest);
        Ok(Bytes::from(all))
    }

    /// A `,direct` store's write, as [`FileBackend::read_direct`].
    fn write_direct(
        &self,
        d: &File,
        offset: u64,
        parts: &[&[u8]],
        total: usize,
        durable: bool,
    ) -> io::Result<()> {
        let before = self.before_tail(offset, total);
        if before == total {
            return direct::write(d, offset, parts, total, durable);
        }
        if before == 0 {
            return pwritev_all(&self.buffered, parts, offset, durable);
        }
        let all = parts.concat();
        let (head, rest) = all.split_at(before);
        direct::write(d, offset, &[head], before, durable)?;
        pwritev_all(&self.buffered, &[rest], offset + before as u64, durable)
    }

    /// A `,direct` file's deallocation: whole physical blocks are punched
    /// out, and the partial ones at either end written with zeros through
    /// the direct descriptor, not zeroed in the page cache as a punched
    /// hole's partial blocks would be.
    fn deallocate_direct(&self, d: &File, offset: u64, len: u64) -> io::Result<()> {
        let unit = u64::from(self.physical_block.unwrap_or(DIRECT_ALIGN as u32));
        let end = offset + len;
        let first = offset.next_multiple_of(unit).min(end);
        let last = (end / unit * unit).max(first);
        for (at, n) in [(offset, first - offset), (last, end - last)] {
            let n = usize::try_from(n).map_err(|_| io::Error::other("range too large"))?;
            if n > 0 {
                self.write_direct(d, at, &[&crate::zeros(n)], n, false)?;
            }
        }
        if last > first {
            let mode = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
            rustix::fs::fallocate(&*self.buffered, mode, first, last - first)?;
        }
        Ok(())
    }
}

/// Reads through a buffered descriptor: into a pooled buffer when large,
/// else a plain one.
fn read_buffered(fd: &File, offset: u64, len: usize) -> io::Result<Bytes> {
    if len >= crate::pool::MIN_POOLED {
        let mut buf = crate::pool::PooledBuf::get(len)?;
        fd.read_exact_at(buf.as_mut_slice(), offset)?;
        Ok(buf.freeze())
    } else {
        Ok(Bytes::from(pread_exact(fd, len, offset)?))
    }
}

/// A file LUN on a file that is not there: refused read-only (there is
/// nothing to serve) or without `size=` (nothing says how large to make
/// it).
pub(crate) fn refuse_missing(path: &Path, opts: &FileOptions) -> io::Result<()> {
    if opts.read_only {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{}: read-only LUN on a file that does not exist",
                path.display()
            ),
        ));
    }
    if opts.size.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: file does not exist; give size= to create it",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// `file:` on something other than a regular file.
pub(crate) fn not_a_file(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{}: not a regular file (use block: for devices)",
            path.display()
        ),
    )
}

/// `block:` on something other than a block device.
pub(crate) fn not_a_device(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{}: not a block device (use file: for files)",
            path.display()
        ),
    )
}

/// A device of `size` bytes is served whole, and an empty one not at all.
pub(crate) fn device_size(path: &Path, size: u64, opts: &FileOptions) -> io::Result<()> {
    if size == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: device has size 0", path.display()),
        ));
    }
    if opts.size.is_some_and(|s| s != size) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: a block device is served whole ({size} bytes)",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// The size a file LUN opens at, from the file's `current` length and
/// `size=`: the one place the rules of [`FileBackend::open_file`] live.
pub(crate) fn file_size(path: &Path, current: u64, opts: &FileOptions) -> io::Result<u64> {
    let refuse = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {why}", path.display()),
        )
    };
    let Some(want) = opts.size else {
        return match current {
            0 => Err(refuse("empty file; give size=".into())),
            _ => Ok(current),
        };
    };
    let writable = !opts.read_only;
    // A new or empty file holds nothing to keep.
    if want == current || (writable && (current == 0 || (want > current && opts.grow))) {
        return Ok(want);
    }
    let (have, asked) = (format_size(current), format_size(want));
    Err(refuse(if !writable {
        format!("the file is {have}, not size={asked}, and a read-only LUN does not change it; leave size= out to serve it as it is")
    } else if want > current {
        format!("the file is {have}, smaller than size={asked}: add ,grow to the spec to grow it to {asked}, or leave size= out to serve it as it is (ironlun admin lun resize grows a LUN being served)")
    } else {
        format!("the file is {have}, larger than size={asked}: a file is served whole, not its first part; leave size= out, or write size={have} (to shrink the file: ironlun admin lun resize --force while it is served, truncate(1) while it is not)")
    }))
}

/// `O_DIRECT` as `OpenOptionsExt::custom_flags` takes it (its bits fit an
/// `i32`).
const O_DIRECT: i32 = OFlags::DIRECT.bits() as i32;

fn open(path: &Path, read_only: bool, direct: bool, create: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(!read_only).create(create);
    if direct {
        o.custom_flags(O_DIRECT);
    }
    o.open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Whether `f` lives on a file system whose data is only ever in memory:
/// tmpfs (and so /dev/shm), ramfs, hugetlbfs (statfs(2) magic numbers).
/// What Linux says of the block device `dev` (or, for a partition, of the
/// disk holding it) in `queue/rotational`: 0 is non-rotating; 1 gives no
/// rate, so it is not reported (an initiator then takes the medium as
/// rotating, SBC-4 §6.6.2). Without a block device under it (a network
/// or virtual file system) nothing is reported.
fn device_rotation(dev: u64) -> Rotation {
    match device_queue(dev, "rotational").as_deref() {
        Some("0") => Rotation::NonRotating,
        _ => Rotation::NotReported,
    }
}

/// What Linux says of the block device `dev` (or, for a partition, of
/// the disk holding it) in `queue/NAME`, trimmed.
fn device_queue(dev: u64, name: &str) -> Option<String> {
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let base = format!("/sys/dev/block/{major}:{minor}");
    let read = |p: String| std::fs::read_to_string(p).ok();
    read(format!("{base}/queue/{name}"))
        .or_else(|| read(format!("{base}/../queue/{name}")))
        .map(|s| s.trim().to_owned())
}

/// The unit a file's store writes whole: the file system's block
/// (`st_blksize`, stat(2): "the preferred block size for efficient file
/// system I/O"; a write of part of one reads the rest). With `O_DIRECT`,
/// at least the device's logical block and [`DIRECT_ALIGN`]: requests
/// not aligned to that go through the page cache instead
/// ([`FileBackend::fd_for`]).
fn file_block(meta: &std::fs::Metadata, direct: bool) -> Option<u32> {
    let fs_block = u32::try_from(meta.blksize()).ok().filter(|b| *b > 0);
    if !direct {
        return fs_block;
    }
    let device = device_queue(meta.dev(), "logical_block_size").and_then(|s| s.parse().ok());
    let least = u32::try_from(DIRECT_ALIGN).unwrap_or(u32::MAX);
    Some(fs_block.into_iter().chain(device).fold(least, u32::max))
}

/// The unit a block device writes whole: its physical block
/// (`BLKPBSZGET`); with `O_DIRECT`, at least [`DIRECT_ALIGN`] (see
/// [`file_block`]).
fn device_block(f: &File, direct: bool) -> Option<u32> {
    let physical = rustix::fs::ioctl_blkpbszget(f).ok().filter(|b| *b > 0);
    if !direct {
        return physical;
    }
    let least = u32::try_from(DIRECT_ALIGN).unwrap_or(u32::MAX);
    Some(physical.map_or(least, |p| p.max(least)))
}

fn on_memory_fs(f: &File) -> io::Result<bool> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;
    let st = rustix::fs::fstatfs(f)?;
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by target
    let magic = st.f_type as i64;
    Ok(matches!(magic, TMPFS_MAGIC | RAMFS_MAGIC | HUGETLBFS_MAGIC))
}

fn fallocate(f: &File, size: u64) -> io::Result<()> {
    Ok(rustix::fs::fallocate(f, FallocateFlags::empty(), 0, size)?)
}

/// Reads exactly `len` bytes at `offset` into a new buffer, without
/// zeroing it first (a 512 KiB memset costs as much as the copy itself):
/// `pread` fills the vector's spare capacity and rustix extends its length
/// by what was read.
fn pread_exact(f: &File, len: usize, mut offset: u64) -> io::Result<Vec<u8>> {
    // Exactly `len` of capacity (Vec::with_capacity's guarantee), so no
    // call reads past the range.
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        match rustix::io::pread(f, spare_capacity(&mut buf), offset) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("short read at offset {offset}"),
                ))
            }
            Ok(n) => offset += n as u64,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(buf)
}

/// Writers let into the kernel at once for one memory-backed file: one
/// holding its inode lock and one spinning for it, so the lock passes
/// without a wake-up between; the rest sleep. On 8 target cores (64 KiB
/// random writes to a tmpfs file, 8 sessions × QD 8, alternating runs):
/// 1 writer halved the CPU per write and cost a quarter of the
/// throughput, 2 kept the throughput at half the CPU (51–56 µs per write
/// against 87–116), 3 gave back part of the CPU gain (66–73 µs).
const MEMORY_WRITERS: usize = 2;

/// The smallest write that takes a turn. 4 KiB writes gained no CPU from
/// turns and lost a fifth of their rate (the same runs), so they go
/// straight in; 64 KiB is the size the gain was measured at.
const TURNS_FROM: usize = 64 << 10;

/// Pieces per `pwritev2` call (Linux allows IOV_MAX = 1024); more are
/// written by further calls.
const IOV_PER_CALL: usize = 64;

/// What is still to write of `parts` when the first `done_in` bytes of
/// piece `idx` (and every piece before it) are written.
fn unwritten<'a>(
    parts: &'a [&'a [u8]],
    idx: usize,
    done_in: usize,
) -> impl Iterator<Item = &'a [u8]> {
    parts.iter().enumerate().skip(idx).map(move |(k, part)| {
        if k == idx {
            part.get(done_in..).unwrap_or(&[])
        } else {
            part
        }
    })
}

/// Writes `parts` one after another from `offset` with `pwritev2`,
/// resuming after short writes. With `dsync` every call carries
/// `RWF_DSYNC`, so the data is durable when this returns; where the
/// kernel lacks the flag, the data is written and then `fdatasync`ed.
fn pwritev_all(f: &File, parts: &[&[u8]], mut offset: u64, dsync: bool) -> io::Result<()> {
    let mut iov = [IoSlice::new(&[]); IOV_PER_CALL];
    // The first piece not wholly written, and how much of it was.
    let mut idx = 0;
    let mut done_in = 0;
    loop {
        let mut count = 0;
        for rest in unwritten(parts, idx, done_in) {
            if rest.is_empty() {
                continue;
            }
            let Some(slot) = iov.get_mut(count) else {
                break;
            };
            *slot = IoSlice::new(rest);
            count += 1;
        }
        if count == 0 {
            return Ok(());
        }
        let flags = if dsync {
            ReadWriteFlags::DSYNC
        } else {
            ReadWriteFlags::empty()
        };
        let filled = iov.get(..count).unwrap_or_default();
        let mut n = match rustix::io::pwritev2(f, filled, offset, flags) {
            Ok(n) => n,
            Err(Errno::INTR) => continue,
            // A kernel without RWF_DSYNC (before 4.7), or without pwritev2
            // at all (before 4.6: rustix makes the system call itself,
            // where glibc's wrapper fell back to pwritev): plain
            // positioned writes.
            Err(e @ (Errno::OPNOTSUPP | Errno::NOSYS)) if dsync || e == Errno::NOSYS => {
                let mut at = offset;
                for rest in unwritten(parts, idx, done_in) {
                    f.write_all_at(rest, at)?;
                    at += rest.len() as u64;
                }
                return if dsync { f.sync_data() } else { Ok(()) };
            }
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev2 wrote nothing",
            ));
        }
        offset += n as u64;
        while n > 0 {
            let Some(part) = parts.get(idx) else {
                break;
            };
            let rest = part.len().saturating_sub(done_in);
            if n >= rest {
                n -= rest;
                idx += 1;
                done_in = 0;
            } else {
                done_in += n;
                n = 0;
            }
        }
    }
}

impl Backend for FileBackend {
    fn kind(&self) -> &'static str {
        self.kind
    }

    /// A file's snapshots are reflinked files beside it
    /// ([`crate::snapshot::reflink`]); a block device keeps none.
    fn snapshots(&self) -> Result<Box<dyn crate::Snapshots + '_>, String> {
        if self.kind != "file" {
            return Err(crate::snapshot::unsupported(self.kind));
        }
        Ok(Box::new(crate::snapshot::reflink::FileSnapshots {
            path: &self.path,
            file: &self.buffered,
            read_only: self.read_only,
        }))
    }

    fn rotation(&self) -> Rotation {
        self.rotation
    }

    fn physical_block_size(&self) -> Option<u32> {
        self.physical_block
    }

    fn free_bytes(&self) -> Option<u64> {
        let st = rustix::fs::fstatvfs(&*self.buffered).ok()?;
        Some(st.f_bavail.saturating_mul(st.f_frsize))
    }

    fn used_bytes(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        if self.kind == "block" {
            return None;
        }
        // st_blocks counts 512-byte units whatever the file system's
        // block size (stat(2)).
        let m = self.buffered.metadata().ok()?;
        Some(m.blocks().saturating_mul(512))
    }

    fn size_bytes(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }

    fn read(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        check_range(offset, len, self.size_bytes())?;
        match &self.direct {
            Some(d) => self.read_direct(d, offset, len),
            None => read_buffered(&self.buffered, offset, len),
        }
    }

    /// On a memory file system, a buffered read of [`ZERO_COPY_MIN`] bytes
    /// or more is a range of the file: its pages go from the page cache to
    /// the socket (`sendfile`) and user space never copies them. Elsewhere
    /// the bytes are read now: `sendfile` from a disk file could wait for
    /// the disk on the connection's thread, and a read error would come too
    /// late to be reported in the command's status.
    fn read_payload(&self, offset: u64, len: usize) -> io::Result<Payload> {
        if self.reads_in_place(len) {
            check_range(offset, len, self.size_bytes())?;
            return Ok(Payload::File(FileRange::new(
                self.buffered.clone(),
                offset,
                len,
            )));
        }
        self.read(offset, len).map(Payload::Mem)
    }

    fn reads_in_place(&self, len: usize) -> bool {
        self.in_memory && self.direct.is_none() && len >= ZERO_COPY_MIN
    }

    fn write(&self, offset: u64, data: &[u8], durable: bool) -> io::Result<()> {
        check_range(offset, data.len(), self.size_bytes())?;
        if let Some(d) = &self.direct {
            return self.write_direct(d, offset, &[data], data.len(), durable);
        }
        self.write_buffered(offset, &[data], data.len(), durable)
    }

    /// One `pwritev2` for the pieces when the range goes to the page
    /// cache; with O_DIRECT they are first copied into one aligned buffer,
    /// as a single unaligned buffer would be.
    fn write_vectored(&self, offset: u64, parts: &[&[u8]], durable: bool) -> io::Result<()> {
        let total = parts.iter().map(|p| p.len()).sum();
        check_range(offset, total, self.size_bytes())?;
        if let Some(d) = &self.direct {
            return self.write_direct(d, offset, parts, total, durable);
        }
        self.write_buffered(offset, parts, total, durable)
    }

    /// A `,direct` store's write of a range not aligned to
    /// [`DIRECT_ALIGN`] is a read-modify-write of the enclosing aligned
    /// range (the `direct` module), which no other request may touch
    /// meanwhile.
    fn write_needs_exclusive(&self, offset: u64, len: u64) -> bool {
        let align = DIRECT_ALIGN as u64;
        self.direct.is_some() && (offset % align != 0 || len % align != 0)
    }

    fn flush(&self) -> io::Result<()> {
        self.buffered.sync_data()
    }

    fn may_block(&self) -> bool {
        !self.in_memory
    }

    /// Without `O_DIRECT`, the file. With it, the direct descriptor for
    /// aligned requests and the buffered one inside the store's buffered
    /// tail (the `direct` module); `None` for the rest, which go through a
    /// bounce buffer the synchronous way ([`Backend::read`],
    /// [`Backend::write`]), and on a memory file system, whose calls never
    /// wait (they run inline, see the module docs).
    fn file_for(&self, offset: u64, len: usize) -> Option<FileTarget> {
        if self.in_memory {
            return None;
        }
        let (file, direct) = match &self.direct {
            None => (&self.buffered, false),
            Some(d) if direct_aligned(offset, len) => (d, true),
            Some(_) if self.before_tail(offset, len) == 0 => (&self.buffered, false),
            Some(_) => return None,
        };
        Some(FileTarget {
            file: file.clone(),
            direct,
        })
    }

    fn provisioning_granularity(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        if self.kind == "block" {
            // Discard on a block device need not read back as zeros.
            return 0;
        }
        self.buffered
            .metadata()
            .map(|m| m.blksize().max(512))
            .unwrap_or(4096)
    }

    /// Punches a hole (`fallocate(PUNCH_HOLE | KEEP_SIZE)`): whole file
    /// system blocks are released, partial ones zeroed.
    fn deallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let ulen = usize::try_from(len).map_err(|_| io::Error::other("range too large"))?;
        check_range(offset, ulen, self.size_bytes())?;
        if len == 0 || self.kind == "block" {
            return if len == 0 {
                Ok(())
            } else {
                Err(io::Error::from(io::ErrorKind::Unsupported))
            };
        }
        if let Some(d) = &self.direct {
            return self.deallocate_direct(d, offset, len);
        }
        let mode = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        Ok(rustix::fs::fallocate(&*self.buffered, mode, offset, len)?)
    }

    /// Holes and data as the file system reports them (`SEEK_DATA`,
    /// `SEEK_HOLE`).
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<crate::Extent>> {
        let ulen = usize::try_from(len).map_err(|_| io::Error::other("range too large"))?;
        check_range(offset, ulen, self.size_bytes())?;
        let end = offset + len;
        // The file offset these seeks move is not used by this backend,
        // which reads and writes with pread/pwrite.
        let seek = |to: rustix::fs::SeekFrom| -> io::Result<Option<u64>> {
            match rustix::fs::seek(&*self.buffered, to) {
                Ok(r) => Ok(Some(r)),
                // ENXIO: no more data after the offset (SEEK_DATA).
                Err(Errno::NXIO) => Ok(None),
                Err(e) => Err(e.into()),
            }
        };
        let mut out = Vec::new();
        let mut at = offset;
        while at < end {
            let data = seek(rustix::fs::SeekFrom::Data(at))?
                .unwrap_or(end)
                .min(end);
            crate::push_extent(&mut out, data - at, false);
            if data >= end {
                break;
            }
            let hole = seek(rustix::fs::SeekFrom::Hole(data))?
                .unwrap_or(end)
                .min(end);
            crate::push_extent(&mut out, hole - data, true);
            at = hole;
        }
        Ok(out)
    }

    /// A file grows or shrinks with `ftruncate`; a block device's size
    /// is the device's (resize it, then rescan).
    fn resize(&self, bytes: u64) -> io::Result<()> {
        if self.kind == "block" {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a block device's size is the device's: resize the device, then rescan",
            ));
        }
        self.buffered.set_len(bytes)?;
        self.refresh_size().map(drop)
    }

    fn refresh_size(&self) -> io::Result<u64> {
        let size = if self.kind == "block" {
            (&*self.buffered).seek(SeekFrom::End(0))?
        } else {
            self.buffered.metadata()?.len()
        };
        self.size.store(size, Ordering::Relaxed);
        Ok(size)
    }
}

mod direct;

#[cfg(test)]
mod direct_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// A file in memory does not rotate; a file on a disk reports what
    /// Linux says of the disk under it (its partition's parent included).
    #[test]
    fn rotation_follows_the_device_under_the_file() {
        let opts = FileOptions {
            size: Some(1 << 20),
            ..Default::default()
        };
        if Path::new("/dev/shm").is_dir() {
            let dir = tempfile::tempdir_in("/dev/shm").unwrap();
            let b = FileBackend::open_file(&dir.path().join("lu"), &opts).unwrap();
            assert!(b.in_memory());
            assert_eq!(b.rotation(), Rotation::NonRotating);
        }
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let b = FileBackend::open_file(&dir.path().join("lu"), &opts).unwrap();
        if b.in_memory() {
            return;
        }
        let dev = std::fs::metadata(dir.path()).unwrap().dev();
        let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
        let sys = format!("/sys/dev/block/{major}:{minor}");
        let flag = std::fs::read_to_string(format!("{sys}/queue/rotational"))
            .or_else(|_| std::fs::read_to_string(format!("{sys}/../queue/rotational")));
        let expected = match flag.as_deref().map(str::trim) {
            Ok("0") => Rotation::NonRotating,
            _ => Rotation::NotReported,
        };
        assert_eq!(b.rotation(), expected, "{sys}: {flag:?}");
    }

    /// A file's physical block is its file system's block (`st_blksize`,
    /// 4096 on ext4, XFS and tmpfs); with O_DIRECT never below the 4 KiB
    /// that direct requests are aligned to.
    #[test]
    fn physical_block_is_the_file_systems_block() {
        let opts = FileOptions {
            size: Some(1 << 20),
            ..Default::default()
        };
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("lu");
        let b = FileBackend::open_file(&path, &opts).unwrap();
        let blksize = std::fs::metadata(&path).unwrap().blksize();
        assert_eq!(b.physical_block_size().map(u64::from), Some(blksize));
        drop(b);
        if let Some(d) = open_direct(&path) {
            let p = d.physical_block_size().unwrap();
            assert!(p >= 4096 && u64::from(p) >= blksize, "{p}");
        }
        if Path::new("/dev/shm").is_dir() {
            let dir = tempfile::tempdir_in("/dev/shm").unwrap();
            let b = FileBackend::open_file(&dir.path().join("lu"), &opts).unwrap();
            let p = b.physical_block_size().unwrap();
            assert!(p >= 4096 && p.is_power_of_two(), "tmpfs: a page, not {p}");
        }
    }

    /// Large writes to a memory file take turns (`write_buffered`); from
    /// many threads at once, small and large, each lands where it was
    /// sent, whole.
    #[test]
    fn concurrent_writes_to_a_memory_file_all_land() {
        if !Path::new("/dev/shm").is_dir() {
            return;
        }
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let opts = FileOptions {
            size: Some(8 << 20),
            ..Default::default()
        };
        let b = Arc::new(FileBackend::open_file(&dir.path().join("lu"), &opts).unwrap());
        assert!(b.in_memory());
        let len = |t: usize| if t % 2 == 0 { TURNS_FROM } else { 4096 };
        let hs: Vec<_> = (0..6usize)
            .map(|t| {
                let b = b.clone();
                std::thread::spawn(move || {
                    for i in 0..8usize {
                        let off = ((t * 8 + i) * TURNS_FROM) as u64;
                        let fill = u8::try_from(t * 8 + i + 1).unwrap();
                        let data = vec![fill; len(t)];
                        b.write_vectored(off, &[&data[..len(t) / 2], &data[len(t) / 2..]], false)
                            .unwrap();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        for t in 0..6usize {
            for i in 0..8usize {
                let off = ((t * 8 + i) * TURNS_FROM) as u64;
                let got = b.read(off, len(t)).unwrap();
                let fill = u8::try_from(t * 8 + i + 1).unwrap();
                assert!(got.iter().all(|x| *x == fill), "thread {t} write {i}");
            }
        }
    }

    /// Used bytes are the file's allocated blocks: a sparse 4 MiB file
    /// takes what was written (in file system blocks), and a hole punched
    /// gives it back; free bytes are the file system's.
    #[test]
    fn used_bytes_follow_the_files_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let opts = FileOptions {
            size: Some(4 << 20),
            ..Default::default()
        };
        let b = FileBackend::open_file(&dir.path().join("lu"), &opts).unwrap();
        assert!(b.free_bytes().is_some());
        let empty = b.used_bytes().unwrap();
        assert!(empty < 64 << 10, "sparse: {empty}");
        b.write(1 << 20, &[7; 256 << 10], false).unwrap();
        let used = b.used_bytes().unwrap();
        assert!(used >= empty + (256 << 10) && used < 1 << 20, "{used}");
        b.deallocate(1 << 20, 256 << 10).unwrap();
        assert_eq!(b.used_bytes(), Some(empty));
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn creates_sparse_file_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lun.img");
        let opts = FileOptions {
            size: Some(1 << 20),
            ..Default::default()
        };
        let b = FileBackend::open_file(&path, &opts).unwrap();
        assert_eq!(b.size_bytes(), 1 << 20);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
        let data = pattern(8192, 3);
        b.write(4096, &data, false).unwrap();
        b.write(100, &[9, 9], true).unwrap();
        assert_eq!(&b.read(4096, 8192).unwrap()[..], &data[..]);
        assert_eq!(&b.read(100, 2).unwrap()[..], &[9, 9]);
        assert!(b.read(1 << 20, 1).is_err());
        b.flush().unwrap();
        drop(b);
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(&on_disk[4096..4096 + 8192], &data[..]);
    }

    /// The file system type of the mount holding `path`, from /proc/mounts
    /// (longest matching mount point).
    fn fs_type_of(path: &Path) -> Option<String> {
        let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
        mounts
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let (_, at, ty) = (f.next()?, f.next()?, f.next()?);
                path.starts_with(at).then(|| (at.len(), ty.to_owned()))
            })
            .max_by_key(|(n, _)| *n)
            .map(|(_, ty)| ty)
    }

    #[test]
    fn a_file_on_tmpfs_runs_inline_reads_in_place_and_one_on_disk_may_block() {
        let opts = FileOptions {
            size: Some(1 << 20),
            ..Default::default()
        };
        let mut seen = 0;
        for base in ["/dev/shm", env!("CARGO_MANIFEST_DIR")] {
            let base = Path::new(base);
            let Some(ty) = fs_type_of(base) else { continue };
            let Ok(dir) = tempfile::tempdir_in(base) else {
                continue;
            };
            let b = FileBackend::open_file(&dir.path().join("lun.img"), &opts).unwrap();
            let memory = matches!(ty.as_str(), "tmpfs" | "ramfs" | "hugetlbfs");
            assert_eq!(b.in_memory(), memory, "{} is {ty}", base.display());
            assert_eq!(b.may_block(), !memory);
            // Reads of any length come back whole (no zeroing first).
            let data = pattern(300_000, 7);
            b.write(777, &data, false).unwrap();
            assert_eq!(&b.read(777, data.len()).unwrap()[..], &data[..]);
            // Large reads from memory are file ranges; small ones, and
            // all from disk, are bytes read now.
            let big = b.read_payload(777, data.len()).unwrap();
            assert_eq!(big.as_mem().is_none(), memory, "{ty}");
            assert_eq!(b.reads_in_place(data.len()), memory);
            assert_eq!(&big.to_bytes().unwrap()[..], &data[..]);
            let small = b.read_payload(777, ZERO_COPY_MIN - 1).unwrap();
            assert!(small.as_mem().is_some());
            assert!(!b.reads_in_place(ZERO_COPY_MIN - 1));
            seen += 1;
        }
        assert!(
            seen > 0,
            "neither /dev/shm nor the target dir could be used"
        );
    }

    #[test]
    fn missing_file_without_size_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = FileBackend::open_file(&dir.path().join("nope"), &FileOptions::default())
            .err()
            .unwrap();
        assert!(err.to_string().contains("give size="));
    }

    fn sized(size: u64, grow: bool) -> FileOptions {
        FileOptions {
            size: Some(size),
            grow,
            ..Default::default()
        }
    }

    fn open_err(path: &Path, opts: &FileOptions) -> String {
        FileBackend::open_file(path, opts)
            .err()
            .unwrap()
            .to_string()
    }

    #[test]
    fn existing_file_keeps_its_size_and_grows_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 4096]).unwrap();
        let b = FileBackend::open_file(&path, &FileOptions::default()).unwrap();
        assert_eq!(b.size_bytes(), 4096);
        assert_eq!(b.read(0, 1).unwrap()[0], 1);
        drop(b);
        // The size it has already, with or without grow.
        for grow in [false, true] {
            let b = FileBackend::open_file(&path, &sized(4096, grow)).unwrap();
            assert_eq!(b.size_bytes(), 4096);
        }
        // Larger: refused, saying how to grow it, and the file unchanged.
        let e = open_err(&path, &sized(8192, false));
        assert_eq!(
            e,
            format!(
                "{}: the file is 4KiB, smaller than size=8KiB: add ,grow to the spec to grow it to 8KiB, or leave size= out to serve it as it is (ironlun admin lun resize grows a LUN being served)",
                path.display()
            )
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4096);
        let b = FileBackend::open_file(&path, &sized(8192, true)).unwrap();
        assert_eq!(b.size_bytes(), 8192);
        assert_eq!(b.read(4096, 1).unwrap()[0], 0);
        assert_eq!(b.read(0, 1).unwrap()[0], 1);
    }

    #[test]
    fn a_size_below_the_files_is_refused_not_served_in_part() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 8192]).unwrap();
        for grow in [false, true] {
            let e = open_err(&path, &sized(4096, grow));
            assert!(
                e.starts_with(&format!(
                    "{}: the file is 8KiB, larger than size=4KiB: a file is served whole",
                    path.display()
                )),
                "{e}"
            );
            assert!(e.contains("leave size= out, or write size=8KiB"), "{e}");
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
        // Read-only: any other size is refused, grow or not.
        for (size, grow) in [(4096, false), (16384, false), (16384, true)] {
            let opts = FileOptions {
                read_only: true,
                ..sized(size, grow)
            };
            let e = open_err(&path, &opts);
            assert!(e.contains("a read-only LUN does not change it"), "{e}");
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
    }

    #[test]
    fn an_empty_file_is_sized_like_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty");
        std::fs::write(&path, []).unwrap();
        let e = open_err(&path, &FileOptions::default());
        assert!(e.ends_with("empty file; give size="), "{e}");
        let b = FileBackend::open_file(&path, &sized(8192, false)).unwrap();
        assert_eq!(b.size_bytes(), 8192);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
    }

    /// A second backend on a served file (the same process, as a second
    /// LUN would; read-only and through a link, too) is refused and
    /// changes nothing; once the first is gone, the lock is free.
    #[test]
    fn a_served_file_is_refused_to_a_second_backend() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("served");
        let first = FileBackend::open_file(&path, &sized(4096, false)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let opts = [
            sized(8192, true),
            FileOptions::default(),
            FileOptions {
                read_only: true,
                ..Default::default()
            },
        ];
        for (p, o) in [&path, &link].into_iter().zip(&opts) {
            let e = open_err(p, o);
            assert!(e.starts_with(&format!("{}: in use: ", p.display())), "{e}");
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4096);
        drop(first);
        let again = FileBackend::open_file(&link, &sized(8192, true)).unwrap();
        assert_eq!(again.size_bytes(), 8192);
    }

    #[test]
    fn preallocated_file_has_blocks() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let opts = FileOptions {
            size: Some(1 << 20),
            preallocate: true,
            ..Default::default()
        };
        let _b = FileBackend::open_file(&path, &opts).unwrap();
        assert!(std::fs::metadata(&path).unwrap().blocks() * 512 >= 1 << 20);
    }

    /// Whether the file system holding `path` refuses O_DIRECT itself:
    /// open(2) fails with EINVAL ("The filesystem does not support the
    /// O_DIRECT flag", open(2) ERRORS).
    fn o_direct_unsupported(path: &Path) -> bool {
        OpenOptions::new()
            .read(true)
            .custom_flags(O_DIRECT)
            .open(path)
            .is_err_and(|e| e.raw_os_error() == Some(Errno::INVAL.raw_os_error()))
    }

    /// A 1 MiB file backend with O_DIRECT at `path`; `Ok(None)` only where
    /// the file system does not support O_DIRECT. Any other failure to
    /// open is an error.
    fn try_open_direct(path: &Path) -> Result<Option<FileBackend>, String> {
        let opts = FileOptions {
            size: Some(1 << 20),
            grow: true,
            direct: true,
            ..Default::default()
        };
        match FileBackend::open_file(path, &opts) {
            Ok(b) => Ok(Some(b)),
            Err(e) if path.exists() && o_direct_unsupported(path) => {
                assert!(e.to_string().contains(path.to_str().unwrap()), "{e}");
                Ok(None)
            }
            Err(e) => Err(format!("opening with O_DIRECT: {e}")),
        }
    }

    pub(super) fn open_direct(path: &Path) -> Option<FileBackend> {
        let opened = try_open_direct(path).unwrap_or_else(|e| panic!("{e}"));
        if opened.is_none() {
            // Fails instead where every test is required.
            crate::skip::skip(
                "an O_DIRECT test",
                &format!(
                    "the file system under {} does not take O_DIRECT",
                    path.display()
                ),
            );
        }
        opened
    }

    #[test]
    fn o_direct_tests_skip_only_where_o_direct_is_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        // A failure that is not about O_DIRECT (no such directory) fails,
        // though its message names the file.
        let missing = dir.path().join("no-such-dir").join("d");
        let err = try_open_direct(&missing).err().unwrap();
        assert!(err.contains(missing.to_str().unwrap()), "{err}");
        assert!(!o_direct_unsupported(&missing));
        // Where the file system takes O_DIRECT, the backend opens.
        let here = dir.path().join("d");
        std::fs::write(&here, [0u8; 512]).unwrap();
        if !o_direct_unsupported(&here) {
            assert!(try_open_direct(&here).unwrap().is_some());
        }
    }

    #[test]
    fn direct_io_round_trips_aligned_and_unaligned() {
        let dir = tempfile::tempdir().unwrap();
        let Some(b) = open_direct(&dir.path().join("d")) else {
            return;
        };
        let data = pattern(16384, 7);
        b.write(8192, &data, false).unwrap();
        assert_eq!(&b.read(8192, 16384).unwrap()[..], &data[..]);
        // 512-byte requests go through the buffered descriptor.
        b.write(512, &data[..512], true).unwrap();
        assert_eq!(&b.read(512, 512).unwrap()[..], &data[..512]);
        assert_eq!(&b.read(8192, 4096).unwrap()[..], &data[..4096]);
    }

    #[test]
    fn vectored_writes_land_in_order_across_several_calls() {
        let dir = tempfile::tempdir().unwrap();
        let opts = FileOptions {
            size: Some(1 << 20),
            ..Default::default()
        };
        let b = FileBackend::open_file(&dir.path().join("v"), &opts).unwrap();
        // More pieces than one pwritev2 call takes, of uneven sizes, some
        // empty.
        let data = pattern(3 * IOV_PER_CALL * 37, 3);
        let mut parts: Vec<&[u8]> = Vec::new();
        let mut rest = &data[..];
        let mut n = 0;
        while !rest.is_empty() {
            n = (n * 7 + 5) % 73;
            let (a, r) = rest.split_at(n.min(rest.len()));
            parts.push(a);
            parts.push(&[]);
            rest = r;
        }
        assert!(parts.len() > 2 * IOV_PER_CALL);
        for durable in [false, true] {
            b.write(0, &vec![0; 8192], false).unwrap();
            b.write_vectored(1001, &parts, durable).unwrap();
            assert_eq!(&b.read(1001, data.len()).unwrap()[..], &data[..]);
            assert_eq!(&b.read(1000, 1).unwrap()[..], &[0]);
        }
        assert!(b
            .write_vectored((1 << 20) - 4, &[&[1; 3], &[2; 3]], false)
            .is_err());
        b.write_vectored(0, &[], false).unwrap();
    }

    #[test]
    fn vectored_writes_with_direct_io_go_through_one_aligned_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let Some(b) = open_direct(&dir.path().join("dv")) else {
            return;
        };
        let data = pattern(8192, 9);
        let parts = [&data[..100], &data[100..4196], &data[4196..]];
        b.write_vectored(4096, &parts, true).unwrap();
        assert_eq!(&b.read(4096, 8192).unwrap()[..], &data[..]);
    }

    #[test]
    fn read_only_refuses_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ro");
        std::fs::write(&path, vec![5u8; 4096]).unwrap();
        let b = FileBackend::open_file(
            &path,
            &FileOptions {
                read_only: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(b.write(0, &[1], false).is_err());
        assert_eq!(b.read(0, 1).unwrap()[0], 5);
    }

    #[test]
    fn refresh_sees_a_grown_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        let b = FileBackend::open_file(
            &path,
            &FileOptions {
                size: Some(4096),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(b.read(4096, 1).is_err());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(8192)
            .unwrap();
        assert_eq!(b.refresh_size().unwrap(), 8192);
        assert_eq!(b.size_bytes(), 8192);
        assert_eq!(b.read(4096, 1).unwrap()[0], 0);
    }

    #[test]
    fn punch_hole_deallocates_and_seek_data_reports_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("thin");
        let b = FileBackend::open_file(
            &path,
            &FileOptions {
                size: Some(1 << 20),
                ..Default::default()
            },
        )
        .unwrap();
        let g = b.provisioning_granularity();
        assert!(g >= 512);
        assert_eq!(
            b.allocation(0, 1 << 20).unwrap(),
            vec![crate::Extent {
                len: 1 << 20,
                allocated: false
            }]
        );
        b.write(0, &vec![1u8; 256 << 10], false).unwrap();
        b.flush().unwrap();
        let ext = b.allocation(0, 1 << 20).unwrap();
        assert_eq!(
            ext[0],
            crate::Extent {
                len: 256 << 10,
                allocated: true
            }
        );
        b.deallocate(64 << 10, 64 << 10).unwrap();
        let ext = b.allocation(0, 256 << 10).unwrap();
        assert_eq!(
            ext,
            vec![
                crate::Extent {
                    len: 64 << 10,
                    allocated: true
                },
                crate::Extent {
                    len: 64 << 10,
                    allocated: false
                },
                crate::Extent {
                    len: 128 << 10,
                    allocated: true
                },
            ]
        );
        assert!(b.read(64 << 10, 64 << 10).unwrap().iter().all(|&x| x == 0));
        // A partial block is zeroed but stays allocated.
        b.deallocate(100, 10).unwrap();
        assert!(b.read(100, 10).unwrap().iter().all(|&x| x == 0));
        assert_eq!(b.read(99, 1).unwrap()[0], 1);
    }

    #[test]
    fn block_backend_refuses_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![0u8; 4096]).unwrap();
        assert!(FileBackend::open_block(&path, &FileOptions::default()).is_err());
    }
}
