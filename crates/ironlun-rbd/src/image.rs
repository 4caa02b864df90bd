//! An open image: asynchronous I/O through librbd's completions, and the
//! blocking calls (size, resize, allocation) moved off the runtime.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::watch;

use crate::args;
use crate::error::{Error, Result};
use crate::extents::Extents;
use crate::ffi::{AioDone, ImageHandle, Op, UpdateWatch};
use crate::miscompare;

/// EILSEQ: librbd's answer to a compare-and-write whose compare failed.
const EILSEQ: isize = 84;

/// The most allocated ranges [`Image::allocated_extents`] returns by
/// default (GET LBA STATUS reports far fewer per command).
pub const DEFAULT_EXTENT_LIMIT: usize = 4096;

/// What a compare-and-write found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOutcome {
    /// The compare matched and the data was written.
    Written,
    /// The compare failed; nothing was written.
    Mismatch {
        /// Offset into the request (not the image) of the first byte
        /// that differed.
        offset: u64,
    },
}

/// The image's geometry as librbd reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageInfo {
    /// Size in bytes.
    pub size: u64,
    /// Bytes per RADOS object.
    pub object_size: u64,
    /// log2 of `object_size`.
    pub order: u8,
}

/// An open RBD image. Cheap to clone (shared handle); the image is closed
/// when the last clone and every watch on it are gone, after librbd has
/// finished the I/O in flight.
#[derive(Clone)]
pub struct Image {
    handle: Arc<ImageHandle>,
    /// Bytes per object, fixed when the image was created.
    object_size: u64,
}

impl Image {
    /// Takes an open handle. Striped images (stripe count above 1) are
    /// refused: their extents come from `rbd_diff_iterate2` object by
    /// object, out of offset order, and nothing here needs them.
    pub(crate) fn new(handle: ImageHandle) -> Result<Image> {
        let stripes = handle.stripe_count()?;
        if stripes > 1 {
            return Err(Error::InvalidArgument(format!(
                "striped images (stripe count {stripes}) are not supported"
            )));
        }
        let (_, object_size, _) = handle.stat()?;
        Ok(Image {
            handle: Arc::new(handle),
            object_size,
        })
    }

    /// The open handle, for the exclusive-lock calls (`lock`).
    pub(crate) fn handle(&self) -> &ImageHandle {
        &self.handle
    }

    /// The image's id (`rbd info`'s `id`): the same for every client,
    /// unique in its pool, kept across a rename and new for an image
    /// made again under an old name. An error for an old-format image,
    /// which has none. Does not block: librbd read it when it opened the
    /// image.
    pub fn id(&self) -> Result<String> {
        self.handle.id()
    }

    /// The size as this handle last saw it. May block: librbd refreshes
    /// the header first when it was told it changed. Not for a runtime
    /// thread; [`ResizeWatch::size`] is the size without a call.
    pub fn size(&self) -> Result<u64> {
        self.handle.size()
    }

    /// Size and geometry, refreshing the header first if librbd was told
    /// it changed. May block on the cluster: see [`Image::info_async`].
    pub fn info(&self) -> Result<ImageInfo> {
        let (size, object_size, order) = self.handle.stat()?;
        Ok(ImageInfo {
            size,
            object_size,
            order,
        })
    }

    /// [`Image::info`] on tokio's blocking pool.
    pub async fn info_async(&self) -> Result<ImageInfo> {
        let image = self.clone();
        blocking(move || image.info()).await
    }

    /// Resizes the image (blocks on the cluster).
    pub fn resize(&self, size: u64) -> Result<()> {
        self.handle.resize(size)
    }

    async fn run(&self, op: Op) -> Result<AioDone> {
        let call = op.call();
        // A failed compare is an outcome, not an error.
        let miscompare_ok = matches!(op, Op::CompareAndWrite { .. });
        let rx = self.handle.submit(op)?;
        // The sender is consumed only by librbd's callback, which always
        // sends; a closed channel means the state was dropped unsent.
        let done = rx.await.map_err(|_| Error::Abandoned(call))?;
        if done.ret < 0 && !(miscompare_ok && done.ret == -EILSEQ) {
            Error::check(call, done.ret as i64)?;
        }
        Ok(done)
    }

    /// Reads `len` bytes at `offset`. Holes read as zeros; a read that
    /// reaches past the end (librbd cuts it short) is an error, never a
    /// shorter buffer.
    pub async fn read(&self, offset: u64, len: usize) -> Result<Bytes> {
        args::io(offset, len)?;
        if len == 0 {
            return Ok(Bytes::new());
        }
        let done = self.run(Op::Read { offset, len }).await?;
        let got = usize::try_from(done.ret).unwrap_or(0);
        if got != len {
            return Err(Error::ShortRead { offset, len, got });
        }
        Ok(Bytes::from(done.read))
    }

    /// Writes `data` at `offset`.
    pub async fn write(&self, offset: u64, data: Bytes) -> Result<()> {
        args::io(offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.run(Op::Write { offset, data }).await.map(drop)
    }

    /// Waits until every write completed before this call is stable.
    pub async fn flush(&self) -> Result<()> {
        self.run(Op::Flush).await.map(drop)
    }

    /// Discards `len` bytes at `offset`. librbd frees whole objects and
    /// zeroes or truncates partial ones, but skips pieces smaller than
    /// `rbd_discard_granularity_bytes` (64 KiB by default): those keep
    /// their data.
    pub async fn discard(&self, offset: u64, len: u64) -> Result<()> {
        args::range(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.run(Op::Discard { offset, len }).await.map(drop)
    }

    /// Writes `pattern` repeatedly over `len` bytes at `offset`; `len`
    /// must be a multiple of the pattern's length. An all-zero pattern
    /// becomes a discard inside librbd (reads still return zeros).
    pub async fn write_same(&self, offset: u64, len: u64, pattern: Bytes) -> Result<()> {
        let len = args::write_same(offset, len, pattern.len())?;
        if len == 0 {
            return Ok(());
        }
        self.run(Op::WriteSame {
            offset,
            len,
            pattern,
        })
        .await
        .map(drop)
    }

    /// Writes `data` at `offset` only if the image holds `compare` there,
    /// atomically. librbd refuses (EINVAL) a range that crosses an object
    /// boundary, and Ceph 16's librbd one that leaves a 512-byte sector
    /// (`ImageCompareAndWriteRequest::prune_object_extents`; lifted in
    /// later releases): with Ceph 16 a COMPARE AND WRITE is one 512-byte
    /// block. A mismatch is reported as an offset into the request
    /// (what SBC-4 §5.3 puts in the sense data's INFORMATION field),
    /// corrected for Ceph 16's object-relative report (see `miscompare`).
    pub async fn compare_and_write(
        &self,
        offset: u64,
        compare: Bytes,
        data: Bytes,
    ) -> Result<CompareOutcome> {
        args::compare_and_write(offset, compare.len(), data.len())?;
        let done = self
            .run(Op::CompareAndWrite {
                offset,
                compare: compare.clone(),
                data,
            })
            .await?;
        if done.ret != -EILSEQ {
            return Ok(CompareOutcome::Written);
        }
        let req = miscompare::Request {
            offset,
            len: compare.len() as u64,
            object_size: self.object_size,
        };
        let at = match miscompare::interpret(done.mismatch, req) {
            miscompare::Reading::Exact(at) => at,
            miscompare::Reading::Either(..) | miscompare::Reading::Neither => {
                // Rare: decide from the data as it is now.
                let now = self.read(offset, compare.len()).await?;
                miscompare::first_difference(&now, &compare).unwrap_or(0)
            }
        };
        Ok(CompareOutcome::Mismatch { offset: at })
    }

    /// The allocated ranges within `range` (from `rbd_diff_iterate2`
    /// since the image's creation, parent included), at most `limit` of
    /// them. `whole_object`: report whole objects (fast with the
    /// fast-diff feature, coarse) rather than the extents inside them.
    /// Runs on tokio's blocking pool.
    pub async fn allocated_extents(
        &self,
        range: Range<u64>,
        whole_object: bool,
        limit: usize,
    ) -> Result<Extents> {
        if range.end < range.start || limit == 0 {
            return Err(Error::InvalidArgument(format!(
                "allocated_extents: range {range:?}, limit {limit}"
            )));
        }
        let image = self.clone();
        blocking(move || image.allocated_extents_blocking(range, whole_object, limit)).await
    }

    /// [`Image::allocated_extents`] on this thread (blocks on the
    /// cluster): for callers already off the runtime.
    pub fn allocated_extents_blocking(
        &self,
        range: Range<u64>,
        whole_object: bool,
        limit: usize,
    ) -> Result<Extents> {
        if range.end < range.start || limit == 0 {
            return Err(Error::InvalidArgument(format!(
                "allocated_extents: range {range:?}, limit {limit}"
            )));
        }
        let (offset, len) = (range.start, range.end - range.start);
        self.handle.allocated(offset, len, whole_object, limit)
    }

    /// Watches for resizes made anywhere (another client, `rbd resize`).
    /// Blocks briefly (registers the watch, reads the size): call it where
    /// blocking is allowed, like [`crate::Pool::open`].
    pub fn on_resize(&self) -> Result<ResizeWatch> {
        let (tx, rx) = watch::channel(0u64);
        let registration = self.handle.watch(tx)?;
        let size = self.info()?.size;
        Ok(ResizeWatch {
            image: self.clone(),
            rx,
            seen: 0,
            size,
            _registration: registration,
        })
    }

    /// Takes a snapshot of the image as it is now (blocks). The caller
    /// stops its own writes first: librbd takes the snapshot at once.
    pub fn create_snapshot(&self, name: &str) -> Result<()> {
        self.handle.snap_create(&args::c_string("snapshot", name)?)
    }

    /// Removes a snapshot (blocks). One with clones goes to the image's
    /// trash until its last clone is gone (clone format 2).
    pub fn remove_snapshot(&self, name: &str) -> Result<()> {
        self.handle.snap_remove(&args::c_string("snapshot", name)?)
    }

    /// Puts the image's data and size back to the snapshot's (blocks;
    /// reads every object the snapshot covers).
    pub fn rollback_snapshot(&self, name: &str) -> Result<()> {
        self.handle
            .snap_rollback(&args::c_string("snapshot", name)?)
    }

    /// The image's snapshots with their sizes and times (blocks).
    pub fn snapshots(&self) -> Result<Vec<crate::SnapInfo>> {
        self.handle.snap_list()
    }

    /// Makes the new image `child` in this image's pool, a clone (format
    /// 2) of snapshot `snap`: it shares the snapshot's objects until
    /// written (blocks).
    pub fn clone_snapshot(&self, snap: &str, child: &str) -> Result<()> {
        let snap = args::c_string("snapshot", snap)?;
        self.handle
            .clone_snapshot(&snap, &args::c_string("image", child)?)
    }

    /// Closes this handle on tokio's blocking pool (closing waits for the
    /// I/O in flight). Other clones keep the image open.
    pub async fn close(self) -> Result<()> {
        blocking(move || {
            drop(self);
            Ok(())
        })
        .await
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| Error::Abandoned("blocking task"))?
}

/// Resize notifications for one image: librbd's header watch (an
/// `rbd_update_watch` callback that only bumps a counter) plus a refresh
/// of the size when it fires. Unregistered on drop.
pub struct ResizeWatch {
    image: Image,
    rx: watch::Receiver<u64>,
    /// The header generation whose size is `size` (the watch counts
    /// notifications; 0 before the first).
    seen: u64,
    size: u64,
    _registration: UpdateWatch,
}

impl ResizeWatch {
    /// The size last seen.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Waits until the image's size differs from the size last seen and
    /// returns the new size. Header changes that leave the size alone
    /// (snapshots, features) are passed over. Cancel-safe: a call dropped
    /// while it refreshes the size leaves the notification unseen, and
    /// the next call refreshes again.
    pub async fn changed(&mut self) -> Result<u64> {
        loop {
            let generation = *self.rx.borrow_and_update();
            if generation == self.seen {
                self.rx
                    .changed()
                    .await
                    .map_err(|_| Error::Abandoned("rbd_update_watch"))?;
                continue;
            }
            let size = self.image.info_async().await?.size;
            self.seen = generation;
            if size != self.size {
                self.size = size;
                return Ok(size);
            }
        }
    }
}
