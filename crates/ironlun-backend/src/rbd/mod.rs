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
//!
//! Every operation goes through the `Link`, which counts the writes
//! librbd acknowledged and the flushes that made them durable
//! (`ledger`), and fences the LU, or opens the image again, when the
//! cluster blocklists its client (`link`).

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use ironlun_rbd::{ClusterConfig, CompareOutcome, Image};

use crate::aio::{block_on, AsyncMedium, MediumFuture, SizeWatch};
use crate::events::StoreEvents;
use crate::ring::Request;
use crate::{check_range, push_extent, zeros, Backend, CompareWrite, Extent};

mod group;
mod ledger;
mod link;
mod shared;
mod snap;

use link::Link;
pub use link::{OP_TIMEOUT, RECONNECT_TRIES};
pub use shared::{SharedObject, SharedWatch};

/// librbd's `rbd_discard_granularity_bytes` default: a discard smaller
/// than this, or the unaligned ends of a larger one, keep their data
/// (Ceph 16). Deallocation writes zeros there instead.
pub const DISCARD_GRANULE: u64 = 64 << 10;

/// Ceph 16's librbd takes a compare-and-write that lies inside one
/// 512-byte sector, and inside one object
/// (`ImageCompareAndWriteRequest::prune_object_extents`; EINVAL
/// otherwise): one 512-byte block, or nothing with 4096-byte blocks.
pub const COMPARE_AND_WRITE_MAX: usize = 512;

/// Most allocated ranges one allocation query asks librbd for.
const EXTENT_LIMIT: usize = ironlun_rbd::DEFAULT_EXTENT_LIMIT;

/// Where the image is and how to reach its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RbdOptions {
    pub pool: String,
    pub image: String,
    /// ceph.conf, client id, keyring and librados options (librados'
    /// defaults when unset; the operation timeouts are [`OP_TIMEOUT`]
    /// unless given).
    pub cluster: ClusterConfig,
    pub read_only: bool,
    /// Open the image again with a new client after the cluster
    /// blocklisted this one (`reconnect=on`). Off by default: a blocklist
    /// is another gateway's or an operator's fence, and reconnecting
    /// undoes it; the LU then stays failed until an operator acts.
    pub reconnect: bool,
    /// Complete a write only once the OSDs have it (`rbd_cache = false`,
    /// over whatever ceph.conf says), as a gateway group needs: librbd's
    /// write-around cache acknowledges a write when it is dispatched
    /// (rbd/ledger.rs), and when the gateway that acknowledged it dies,
    /// the initiator's SYNCHRONIZE CACHE is retried through the survivor,
    /// whose flush knows nothing of it and answers GOOD over lost data
    /// (SBC-4 §5.22: GOOD means the cached data is on the medium). Seen
    /// with the kernel initiator through dm-multipath (tests/
    /// kernel_initiator/ha_failover.rs): a file fsync'd through the
    /// map read back different after the owner was killed.
    pub write_through: bool,
    /// Served by a gateway group, whose owner holds the image's lock in
    /// managed mode: librbd's EROFS on a write says another gateway owns
    /// the image ([`crate::Fault::NotOwner`]), not that it is read-only.
    pub grouped: bool,
}

/// An open RBD image as a store.
pub struct RbdBackend {
    link: Arc<Link>,
    read_only: bool,
    /// `rbd:POOL/id:ID` ([`Backend::identity`]): the image's id, the
    /// same for every gateway that opens it, kept across a rename;
    /// `rbd:POOL/IMAGE` for an old-format image, which has none.
    identity: String,
    /// `reconnect=on`: the gateway group refuses such an LU.
    reconnect: bool,
    /// Where the image is, for the specs of its snapshots and clones.
    pool: String,
    image: String,
}

impl RbdBackend {
    /// Connects, opens the image and starts following its size. Blocks
    /// (monitor round trips): call it where blocking is fine. Resizes are
    /// followed, and a client the cluster cut off is reconnected
    /// (`reconnect`), only when called inside a tokio runtime.
    pub fn open(opts: &RbdOptions) -> io::Result<RbdBackend> {
        let link = Link::open(opts)?;
        let identity = match link.image_id() {
            Some(id) => format!("rbd:{}/id:{id}", opts.pool),
            None => format!("rbd:{}/{}", opts.pool, opts.image),
        };
        // A snapshot is another LU than its image: its identifiers must
        // differ, or an initiator would take both for paths to one LU.
        let identity = match opts.image.split_once('@') {
            Some((_, snap)) if !identity.ends_with(&format!("@{snap}")) => {
                format!("{identity}@{snap}")
            }
            _ => identity,
        };
        Ok(RbdBackend {
            link,
            read_only: opts.read_only,
            identity,
            reconnect: opts.reconnect,
            pool: opts.pool.clone(),
            image: opts.image.clone(),
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
}

/// Zeros written over `[offset, offset + len)` (a range's ends that miss
/// whole granules: under two granules, so one write).
async fn write_zeros(image: &Image, offset: u64, len: u64) -> Result<(), ironlun_rbd::Error> {
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    image.write(offset, zeros(len)).await
}

impl AsyncMedium for RbdBackend {
    fn start(&self, request: &Request) -> MediumFuture {
        let size = self.size_bytes();
        match request {
            Request::Read { offset, len } => {
                let (offset, len) = (*offset, *len);
                let checked = check_range(offset, len, size);
                let read = self
                    .link
                    .direct(move |image| async move { image.read(offset, len).await });
                Box::pin(async move {
                    checked?;
                    read.await.map(Some)
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
                let checked = self
                    .writable()
                    .and_then(|()| check_range(offset, data.len(), size));
                let write = self.link.change(durable, move |image| async move {
                    image.write(offset, data).await
                });
                Box::pin(async move {
                    checked?;
                    write.await.map(|()| None)
                })
            }
            Request::Flush => {
                let flush = self.link.flush();
                Box::pin(async move { flush.await.map(|()| None) })
            }
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

    fn identity(&self) -> Option<String> {
        Some(self.identity.clone())
    }

    fn size_bytes(&self) -> u64 {
        self.link.size.load(Ordering::Acquire)
    }

    fn read(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        block_on(self.start(&Request::Read { offset, len })).map(|d| d.unwrap_or_default())
    }

    fn write(&self, offset: u64, data: &[u8], durable: bool) -> io::Result<()> {
        self.writable()?;
        check_range(offset, data.len(), self.size_bytes())?;
        let data = Bytes::copy_from_slice(data);
        block_on(self.link.change(durable, move |image| async move {
            image.write(offset, data).await
        }))
    }

    fn flush(&self) -> io::Result<()> {
        block_on(self.link.flush())
    }

    fn may_block(&self) -> bool {
        true
    }

    /// librbd's snapshots and format-2 clones (`snap`).
    fn snapshots(&self) -> Result<Box<dyn crate::Snapshots + '_>, String> {
        if self.image.contains('@') {
            return Err(format!(
                "rbd:{}/{} is a snapshot served read-only: it has no snapshots of its own",
                self.pool, self.image
            ));
        }
        Ok(Box::new(snap::RbdSnapshots { backend: self }))
    }

    /// The ledger (`ledger.rs`): a failed flush counts the writes since
    /// the last good one as lost, and reports them; a durable write that
    /// failed before librbd acknowledged it lost nothing.
    fn reports_lost_writes(&self) -> bool {
        true
    }

    fn async_medium(&self) -> Option<&dyn AsyncMedium> {
        Some(self)
    }

    fn image_lock(&self) -> Option<&dyn crate::ImageLock> {
        Some(self)
    }

    fn size_watch(&self) -> Option<SizeWatch> {
        self.link.subscribe().map(SizeWatch::new)
    }

    fn events(&self) -> Option<StoreEvents> {
        self.link.events()
    }

    fn ready(&self) -> io::Result<()> {
        self.link.ready()
    }

    fn refresh_size(&self) -> io::Result<u64> {
        Ok(self.size_bytes())
    }

    /// librbd's writesame: the block crosses the network once and the
    /// OSDs repeat it (an object-aligned range is one WRITESAME op per
    /// object). Ranges over librbd's limit go in pieces; a pattern that
    /// does not divide the length is left to the caller.
    fn write_same(&self, offset: u64, len: u64, pattern: &[u8], durable: bool) -> io::Result<bool> {
        let Some(piece) = write_same_piece(len, pattern.len()) else {
            return Ok(false);
        };
        self.writable()?;
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= self.size_bytes())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "range beyond the image"))?;
        let pattern = Bytes::copy_from_slice(pattern);
        block_on(self.link.change(durable, move |image| async move {
            let mut at = offset;
            while at < end {
                let n = piece.min(end - at);
                image.write_same(at, n, pattern.clone()).await?;
                at += n;
            }
            Ok(())
        }))?;
        Ok(true)
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
        block_on(self.link.change(false, move |image| async move {
            write_zeros(&image, offset, head - offset).await?;
            if tail > head {
                image.discard(head, tail - head).await?;
            }
            write_zeros(&image, tail.max(head), end - tail.max(head)).await
        }))
    }

    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        let end = offset.saturating_add(len);
        check_range(offset, 0, self.size_bytes())?;
        let found = block_on(self.link.direct(move |image| async move {
            image.allocated_extents_blocking(offset..end, false, EXTENT_LIMIT)
        }))?;
        Ok(runs(offset..end, &found))
    }

    /// Other gateways and clients write the image too: only librbd's
    /// compare-and-write is atomic for them (one 512-byte sector with
    /// Ceph 16). A durable one is flushed before it is answered, as a
    /// durable write is: librbd acknowledges a write from its cache.
    fn compare_and_write_limit(&self) -> Option<u64> {
        Some(COMPARE_AND_WRITE_MAX as u64)
    }

    fn compare_and_write(
        &self,
        offset: u64,
        compare: &[u8],
        data: &[u8],
        durable: bool,
    ) -> io::Result<CompareWrite> {
        self.writable()?;
        check_range(offset, data.len(), self.size_bytes())?;
        if data.len() > COMPARE_AND_WRITE_MAX || compare.len() != data.len() {
            return Ok(CompareWrite::Unsupported);
        }
        let (compare, data) = (
            Bytes::copy_from_slice(compare),
            Bytes::copy_from_slice(data),
        );
        // Not counted as unflushed: librbd completes it once the OSDs
        // have it (rbd/ledger.rs). Durable (FUA, WCE=0): then flushed
        // through the link, which settles the writes before it too.
        let outcome = block_on(self.link.direct(move |image| async move {
            image.compare_and_write(offset, compare, data).await
        }))?;
        if durable && outcome == CompareOutcome::Written {
            block_on(self.link.flush())?;
        }
        Ok(match outcome {
            CompareOutcome::Written => CompareWrite::Written,
            CompareOutcome::Mismatch { offset } => CompareWrite::Mismatch(offset),
        })
    }
}

/// The most bytes one librbd write-same of a `pattern`-byte pattern
/// covers over `len` bytes (a multiple of the pattern, at most librbd's
/// limit), or `None` when librbd cannot take the request: an empty
/// pattern, one that does not divide the length, or one over the limit.
fn write_same_piece(len: u64, pattern: usize) -> Option<u64> {
    let p = u64::try_from(pattern).ok().filter(|p| *p > 0)?;
    if len % p != 0 || p > ironlun_rbd::MAX_WRITE_SAME_BYTES {
        return None;
    }
    Some(ironlun_rbd::MAX_WRITE_SAME_BYTES / p * p)
}

/// The first and last granule boundaries inside `[offset, end)` (equal
/// when no whole granule fits).
fn granules(offset: u64, end: u64) -> (u64, u64) {
    // Rounding up past u64::MAX saturates: no whole granule fits.
    let head = offset
        .div_ceil(DISCARD_GRANULE)
        .saturating_mul(DISCARD_GRANULE);
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
        // Near the top of the range: rounding up must not wrap.
        assert_eq!(granules(u64::MAX - 10, u64::MAX), (u64::MAX, u64::MAX));
        let top = u64::MAX / G * G;
        assert_eq!(granules(top - G, u64::MAX), (top - G, top));
    }

    #[test]
    fn write_same_goes_to_librbd_in_pieces_it_takes() {
        let max = ironlun_rbd::MAX_WRITE_SAME_BYTES;
        assert_eq!(write_same_piece(64 * 512, 512), Some(max / 512 * 512));
        assert_eq!(write_same_piece(8 * 4096, 4096), Some(max / 4096 * 4096));
        // Left to the caller: librbd would refuse these.
        assert_eq!(write_same_piece(4096, 0), None);
        assert_eq!(write_same_piece(4097, 512), None);
        assert_eq!(write_same_piece(2 * (max + 1), (max + 1) as usize), None);
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
        let e = link::io_error(ironlun_rbd::Error::Ceph {
            call: "rbd_aio_read",
            errno: 110,
        });
        assert_eq!(e.raw_os_error(), Some(110));
    }
}
