//! `rbd`: a Ceph RBD image, through librbd's asynchronous API
//! (ironlun-rbd).
//!
//! READ, WRITE and SYNCHRONIZE CACHE arrive as [`Request`]s through
//! [`AsyncMedium`]: each is one librbd operation whose completion wakes the
//! connection's task. The other commands (UNMAP, WRITE SAME, COMPARE AND
//! WRITE, GET LBA STATUS, partial-block writes) come through the
//! synchronous [`Backend`] methods on tokio's blocking pool, which wait for
//! the same operations with [`block_on`].
//!
//! The size is the image's, kept current by a header watch: a resize
//! made in Ceph (`rbd resize`) updates it and reaches the LU through
//! [`Backend::size_watch`].

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ironlun_rbd::{Cluster, ClusterConfig, CompareOutcome, Image, ResizeWatch};

use crate::aio::{block_on, AsyncMedium, MediumFuture, SizeWatch};
use crate::ring::Request;
use crate::{check_range, push_extent, zeros, Backend, CompareWrite, Extent};

/// librbd's `rbd_discard_granularity_bytes` default: a discard smaller
/// than this, or the unaligned ends of a larger one, keep their data
/// (Ceph 16). Deallocation writes zeros there instead.
pub const DISCARD_GRANULE: u64 = 64 << 10;

/// Ceph 16's librbd takes a compare-and-write of at most one 512-byte
/// sector (`ImageCompareAndWriteRequest::prune_object_extents`).
pub const COMPARE_AND_WRITE_MAX: usize = 512;

/// How long an OSD operation may take before librados fails it with
/// ETIMEDOUT (`rados_osd_op_timeout`; librados' default, 0, waits
/// forever: a lost cluster would hang the session).
pub const OSD_OP_TIMEOUT: Duration = Duration::from_secs(30);

/// Most allocated ranges one allocation query asks librbd for.
const EXTENT_LIMIT: usize = ironlun_rbd::DEFAULT_EXTENT_LIMIT;

/// Where the image is and how to reach its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RbdOptions {
    pub pool: String,
    pub image: String,
    /// ceph.conf, client id and keyring (librados' defaults when unset).
    pub cluster: ClusterConfig,
    pub read_only: bool,
}

/// An open RBD image as a store.
pub struct RbdBackend {
    image: Image,
    size: Arc<AtomicU64>,
    sizes: tokio::sync::watch::Receiver<u64>,
    /// The task that follows the image's header; ended on drop.
    watcher: Option<tokio::task::AbortHandle>,
    read_only: bool,
}

fn io_error(e: ironlun_rbd::Error) -> io::Error {
    match e.errno() {
        Some(errno) => io::Error::from_raw_os_error(errno),
        None => io::Error::other(e.to_string()),
    }
}

impl RbdBackend {
    /// Connects, opens the image and starts following its size. Blocks
    /// (monitor round trips): call it where blocking is fine. Resizes are
    /// followed only when called inside a tokio runtime.
    pub fn open(opts: &RbdOptions) -> io::Result<RbdBackend> {
        let mut cluster = opts.cluster.clone();
        let timeout = OSD_OP_TIMEOUT.as_secs().to_string();
        for key in ["rados_osd_op_timeout", "rados_mon_op_timeout"] {
            if !cluster.options.iter().any(|(k, _)| k == key) {
                cluster.options.push((key.into(), timeout.clone()));
            }
        }
        let cluster = Cluster::connect(&cluster).map_err(io_error)?;
        let pool = cluster.pool(&opts.pool).map_err(io_error)?;
        let image = pool.open(&opts.image).map_err(io_error)?;
        let watch = image.on_resize().map_err(io_error)?;
        let size = Arc::new(AtomicU64::new(watch.size()));
        let (tx, sizes) = tokio::sync::watch::channel(watch.size());
        let watcher = tokio::runtime::Handle::try_current().ok().map(|rt| {
            rt.spawn(follow(watch, Arc::clone(&size), tx))
                .abort_handle()
        });
        Ok(RbdBackend {
            image,
            size,
            sizes,
            watcher,
            read_only: opts.read_only,
        })
    }

    fn writable(&self) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "read-only LUN",
            ));
        }
        Ok(())
    }

    /// Zeros written over `[offset, offset + len)` (a range's ends that
    /// miss whole granules: under two granules, so one write).
    async fn write_zeros(image: Image, offset: u64, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(io::Error::other)?;
        image.write(offset, zeros(len)).await.map_err(io_error)
    }
}

/// Follows the header: each new size is stored and announced. A refresh
/// that fails (cluster unreachable) is retried with a growing pause.
async fn follow(mut watch: ResizeWatch, size: Arc<AtomicU64>, tx: tokio::sync::watch::Sender<u64>) {
    let mut pause = Duration::from_millis(100);
    loop {
        match watch.changed().await {
            Ok(new) => {
                pause = Duration::from_millis(100);
                size.store(new, Ordering::Release);
                if tx.send(new).is_err() {
                    return;
                }
            }
            Err(ironlun_rbd::Error::Abandoned(_)) => return,
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(10));
            }
        }
    }
}

impl Drop for RbdBackend {
    fn drop(&mut self) {
        if let Some(w) = self.watcher.take() {
            w.abort();
        }
    }
}

impl AsyncMedium for RbdBackend {
    fn start(&self, request: &Request) -> MediumFuture {
        let image = self.image.clone();
        let size = self.size_bytes();
        match request {
            Request::Read { offset, len } => {
                let (offset, len) = (*offset, *len);
                Box::pin(async move {
                    check_range(offset, len, size)?;
                    image.read(offset, len).await.map(Some).map_err(io_error)
                })
            }
            Request::Write {
                offset,
                data,
                len,
                durable,
            } => {
                let (offset, durable) = (*offset, *durable);
                let data = write_bytes(data, *len);
                let ro = self.writable();
                Box::pin(async move {
                    ro?;
                    check_range(offset, data.len(), size)?;
                    image.write(offset, data).await.map_err(io_error)?;
                    if durable {
                        image.flush().await.map_err(io_error)?;
                    }
                    Ok(None)
                })
            }
            Request::Flush => Box::pin(async move {
                image.flush().await.map_err(io_error)?;
                Ok(None)
            }),
        }
    }
}

/// The first `len` bytes of a command's Data-Out as one buffer: the
/// segment itself when it arrived in one, else joined once.
fn write_bytes(data: &ironlun_payload::DataOutBuffer, len: usize) -> Bytes {
    match data.segments() {
        [one] if one.len() >= len => one.slice(..len),
        _ => Bytes::copy_from_slice(data.contiguous().get(..len).unwrap_or_default()),
    }
}

impl Backend for RbdBackend {
    fn kind(&self) -> &'static str {
        "rbd"
    }

    fn size_bytes(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    fn read(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        block_on(self.start(&Request::Read { offset, len })).map(|d| d.unwrap_or_default())
    }

    fn write(&self, offset: u64, data: &[u8], durable: bool) -> io::Result<()> {
        self.writable()?;
        check_range(offset, data.len(), self.size_bytes())?;
        let image = &self.image;
        block_on(async {
            image
                .write(offset, Bytes::copy_from_slice(data))
                .await
                .map_err(io_error)?;
            if durable {
                image.flush().await.map_err(io_error)?;
            }
            Ok(())
        })
    }

    fn flush(&self) -> io::Result<()> {
        block_on(self.image.flush()).map_err(io_error)
    }

    fn may_block(&self) -> bool {
        true
    }

    fn async_medium(&self) -> Option<&dyn AsyncMedium> {
        Some(self)
    }

    fn size_watch(&self) -> Option<SizeWatch> {
        self.watcher.as_ref()?;
        Some(SizeWatch::new(self.sizes.clone()))
    }

    fn refresh_size(&self) -> io::Result<u64> {
        Ok(self.size_bytes())
    }

    fn provisioning_granularity(&self) -> u64 {
        DISCARD_GRANULE
    }

    /// Discards the whole 64 KiB granules of the range and writes zeros
    /// over its ends: librbd would skip those and keep their data.
    fn deallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.writable()?;
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= self.size_bytes())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "range beyond the image"))?;
        let (head, tail) = granules(offset, end);
        let image = self.image.clone();
        block_on(async move {
            Self::write_zeros(image.clone(), offset, head - offset).await?;
            if tail > head {
                image.discard(head, tail - head).await.map_err(io_error)?;
            }
            Self::write_zeros(image, tail.max(head), end - tail.max(head)).await
        })
    }

    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        let end = offset.saturating_add(len);
        check_range(offset, 0, self.size_bytes())?;
        let found = self
            .image
            .allocated_extents_blocking(offset..end, false, EXTENT_LIMIT)
            .map_err(io_error)?;
        Ok(runs(offset..end, &found))
    }

    fn compare_and_write(
        &self,
        offset: u64,
        compare: &[u8],
        data: &[u8],
    ) -> io::Result<CompareWrite> {
        self.writable()?;
        check_range(offset, data.len(), self.size_bytes())?;
        if data.len() > COMPARE_AND_WRITE_MAX || compare.len() != data.len() {
            return Ok(CompareWrite::Unsupported);
        }
        let outcome = block_on(self.image.compare_and_write(
            offset,
            Bytes::copy_from_slice(compare),
            Bytes::copy_from_slice(data),
        ))
        .map_err(io_error)?;
        Ok(match outcome {
            CompareOutcome::Written => CompareWrite::Written,
            CompareOutcome::Mismatch { offset } => CompareWrite::Mismatch(offset),
        })
    }
}

/// The first and last granule boundaries inside `[offset, end)` (equal
/// when no whole granule fits).
fn granules(offset: u64, end: u64) -> (u64, u64) {
    let head = offset.div_ceil(DISCARD_GRANULE) * DISCARD_GRANULE;
    let tail = end / DISCARD_GRANULE * DISCARD_GRANULE;
    if tail <= head {
        (end.min(head), end.min(head))
    } else {
        (head, tail)
    }
}

/// Allocated ranges (sorted, inside `within`) as runs covering `within`.
/// A walk that stopped at its limit leaves the rest unexamined: it is
/// reported allocated, which only costs the initiator an UNMAP it could
/// have skipped.
fn runs(within: std::ops::Range<u64>, found: &ironlun_rbd::Extents) -> Vec<Extent> {
    let mut out = Vec::new();
    let mut at = within.start;
    for r in &found.ranges {
        push_extent(&mut out, r.start.saturating_sub(at), false);
        push_extent(&mut out, r.end - r.start.max(at), true);
        at = at.max(r.end);
    }
    push_extent(&mut out, within.end.saturating_sub(at), found.truncated);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = DISCARD_GRANULE;

    #[test]
    fn granules_split_a_range_into_zeroed_ends_and_discarded_middle() {
        assert_eq!(granules(0, 4 * G), (0, 4 * G));
        assert_eq!(granules(512, 4 * G + 512), (G, 4 * G));
        // Smaller than a granule: all of it is zeroed.
        assert_eq!(granules(512, 4096), (4096, 4096));
        assert_eq!(granules(G - 512, G + 512), (G, G));
    }

    #[test]
    fn runs_cover_the_range_in_order() {
        let found = ironlun_rbd::Extents {
            ranges: vec![100..200, 300..400],
            truncated: false,
        };
        let e = |len, allocated| Extent { len, allocated };
        assert_eq!(
            runs(0..500, &found),
            vec![
                e(100, false),
                e(100, true),
                e(100, false),
                e(100, true),
                e(100, false)
            ]
        );
        let cut = ironlun_rbd::Extents {
            ranges: std::iter::once(0..100).collect(),
            truncated: true,
        };
        assert_eq!(runs(0..500, &cut), vec![e(500, true)]);
        let none = ironlun_rbd::Extents::default();
        assert_eq!(runs(10..20, &none), vec![e(10, false)]);
    }

    #[test]
    fn errors_keep_their_errno() {
        let e = io_error(ironlun_rbd::Error::Ceph {
            call: "rbd_aio_read",
            errno: 110,
        });
        assert_eq!(e.raw_os_error(), Some(110));
    }
}
