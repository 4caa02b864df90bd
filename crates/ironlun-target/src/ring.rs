//! A connection's io_uring for commands on file and block LUNs.
//!
//! READ, WRITE and SYNCHRONIZE CACHE on such LUNs are staged by the device
//! ([`LogicalUnit::start`](ironlun_scsi::LogicalUnit::start)); their
//! medium access goes on this ring, which the connection's task submits
//! once per batch of PDUs and reaps when the ring's descriptor turns
//! readable. No thread hop per command, and every command the initiator
//! has outstanding is in the kernel at once.
//!
//! The ring is made on the first command that needs it, sized to the
//! session's queue depth (at most [`RING_MAX`]); a command finding it full
//! runs on the blocking pool, as does everything when io_uring is
//! unavailable ([`probe`] says so once, at start).

use std::io;
use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use ironlun_backend::ring::{Completion, Ring};
use ironlun_target_core::Staged;
use tokio::io::unix::AsyncFd;
use tracing::{info, warn};

use crate::config::IoEngine;

/// Largest ring per connection; commands beyond it use the blocking pool.
pub const RING_MAX: u32 = 512;

/// The ring and its readiness. Field order matters: the descriptor leaves
/// tokio's reactor before the ring closes it.
pub struct ConnRing {
    ready: AsyncFd<RawFd>,
    ring: Ring<Staged>,
}

/// The connection's ring: not made yet, made, or not to be used.
pub enum RingSlot {
    Unused,
    Ready(Box<ConnRing>),
    Off,
}

impl RingSlot {
    pub fn new(engine: IoEngine) -> RingSlot {
        match engine {
            IoEngine::Uring => RingSlot::Unused,
            IoEngine::Pool => RingSlot::Off,
        }
    }

    /// The ring, made on first use for `depth` commands; `None` when
    /// there is none to use (it could not be made: logged once).
    pub fn get(&mut self, depth: u32) -> Option<&mut ConnRing> {
        if let RingSlot::Unused = self {
            *self = match ConnRing::new(depth.min(RING_MAX)) {
                Ok(r) => RingSlot::Ready(Box::new(r)),
                Err(e) => {
                    warn_once(&e);
                    RingSlot::Off
                }
            };
        }
        match self {
            RingSlot::Ready(r) => Some(r),
            _ => None,
        }
    }

    /// The ring, if made.
    pub fn made(&mut self) -> Option<&mut ConnRing> {
        match self {
            RingSlot::Ready(r) => Some(r),
            _ => None,
        }
    }

    /// Requests in the kernel (or queued for it).
    pub fn in_flight(&self) -> usize {
        match self {
            RingSlot::Ready(r) => r.ring.in_flight(),
            _ => 0,
        }
    }

    /// Resolves when completions may be waiting (readiness already
    /// cleared: the caller then takes every completion there is, so none
    /// posted meanwhile is missed). Pending forever without a ring. The
    /// future borrows only the descriptor's registration.
    pub fn completions(&self) -> impl std::future::Future<Output = io::Result<()>> + Send + '_ {
        let ready = match self {
            RingSlot::Ready(r) => Some(&r.ready),
            _ => None,
        };
        async move {
            match ready {
                Some(ready) => {
                    let mut guard = ready.readable().await?;
                    guard.clear_ready();
                    Ok(())
                }
                None => std::future::pending().await,
            }
        }
    }

    /// Gives the ring up; whatever the kernel still holds is waited for
    /// on a blocking thread (dropping a ring waits), not on this one.
    pub fn abandon(&mut self) {
        if let RingSlot::Ready(r) = std::mem::replace(self, RingSlot::Off) {
            if r.ring.in_flight() > 0 {
                tokio::task::spawn_blocking(move || drop(r));
            }
        }
    }
}

impl ConnRing {
    fn new(depth: u32) -> io::Result<ConnRing> {
        let ring = Ring::new(depth)?;
        // SAFETY: the descriptor is the ring's, open until the ring drops;
        // the AsyncFd is declared before the ring in ConnRing, so it is
        // dropped (and deregistered) first, and the two never part.
        let ready =
            unsafe { AsyncFd::register_with_interest(ring.fd(), tokio::io::Interest::READABLE)? };
        Ok(ConnRing { ready, ring })
    }

    /// Queues a staged command; a refused one comes back (run it on the
    /// blocking pool).
    #[must_use]
    pub fn push(&mut self, cmd: Staged) -> Option<Staged> {
        self.ring.push(cmd).err().map(|(_, cmd)| cmd)
    }

    /// Submits what is queued and takes what has finished.
    pub fn drive(&mut self, out: &mut Vec<Completion<Staged>>) -> io::Result<()> {
        self.ring.submit()?;
        self.ring.complete(out)
    }
}

static WARNED: AtomicBool = AtomicBool::new(false);

fn warn_once(e: &io::Error) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        warn!("io_uring unavailable ({e}): commands on file and block LUNs run on the blocking thread pool");
    }
}

/// The engine the daemon will use: io_uring when asked for and a ring can
/// be made here, else the pool. Logged once, at start.
pub fn probe(asked: IoEngine) -> IoEngine {
    let engine = match asked {
        IoEngine::Uring => match Ring::<Staged>::new(4) {
            Ok(_) => IoEngine::Uring,
            Err(e) => {
                warn_once(&e);
                IoEngine::Pool
            }
        },
        IoEngine::Pool => IoEngine::Pool,
    };
    info!("file and block LUNs: I/O through {}", engine.name());
    engine
}
