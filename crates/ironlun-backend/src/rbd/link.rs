//! The connection to an image: opening it, following its size, and
//! opening it again, with a growing pause, when the cluster has cut this
//! client off (blocklisted: every request fails with ESHUTDOWN until a
//! new client connects).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use ironlun_rbd::{Cluster, Image, ResizeWatch};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::RbdOptions;

/// How long an OSD or monitor operation may take before librados fails
/// it with ETIMEDOUT (`rados_osd_op_timeout`; librados' default, 0,
/// waits forever: a lost cluster would hang the session).
pub const OP_TIMEOUT: Duration = Duration::from_secs(30);

/// librados settings this gateway gives itself where ceph.conf leaves
/// librados' own value (docs/rbd.md, "librados settings"): one thread
/// for librados' completions and librbd's state machines instead of
/// two, which hand each I/O between them (measured: 20 % less target
/// CPU per 4 KiB read on the test cluster, docs/performance.md).
pub const GATEWAY_DEFAULTS: &[(&str, &str)] = &[("librados_thread_count", "1")];

/// Reopen attempts after the cluster cut this client off, and the pause
/// before the first (doubled each time, at most [`RECONNECT_PAUSE_MAX`]).
pub const RECONNECT_TRIES: u32 = 10;
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);
const RECONNECT_PAUSE_MAX: Duration = Duration::from_secs(30);

/// ESHUTDOWN: librados' answer once the cluster has blocklisted the client.
const ESHUTDOWN: i32 = 108;

/// The open image, replaced when it is opened again.
pub(super) struct Link {
    opts: RbdOptions,
    image: RwLock<Image>,
    pub(super) size: AtomicU64,
    sizes: watch::Sender<u64>,
    watcher: Mutex<Option<AbortHandle>>,
    reconnecting: AtomicBool,
    runtime: Option<Handle>,
}

pub(super) fn io_error(e: ironlun_rbd::Error) -> io::Error {
    match e.errno() {
        Some(errno) => io::Error::from_raw_os_error(errno),
        None => io::Error::other(e.to_string()),
    }
}

/// Connects and opens the image with its header watch (blocks).
fn open_image(opts: &RbdOptions) -> io::Result<(Image, ResizeWatch)> {
    let mut cluster = opts.cluster.clone();
    let timeout = OP_TIMEOUT.as_secs().to_string();
    for key in ["rados_osd_op_timeout", "rados_mon_op_timeout"] {
        if !cluster.options.iter().any(|(k, _)| k == key) {
            cluster.options.push((key.into(), timeout.clone()));
        }
    }
    // WRITE SAME without UNMAP writes (SBC-4): librbd would turn an
    // all-zero pattern into a discard, leaving the blocks unmapped.
    let key = "rbd_discard_on_zeroed_write_same";
    if !cluster.options.iter().any(|(k, _)| k == key) {
        cluster.options.push((key.into(), "false".into()));
    }
    for (key, value) in GATEWAY_DEFAULTS {
        if !cluster.defaults.iter().any(|(k, _)| k == key) {
            cluster.defaults.push(((*key).into(), (*value).into()));
        }
    }
    let cluster = Cluster::connect(&cluster).map_err(io_error)?;
    let pool = cluster.pool(&opts.pool).map_err(io_error)?;
    let image = pool.open(&opts.image).map_err(io_error)?;
    let watch = image.on_resize().map_err(io_error)?;
    Ok((image, watch))
}

impl Link {
    /// Opens the image (blocks). Sizes are followed, and the image
    /// reopened, only when called inside a tokio runtime.
    pub(super) fn open(opts: &RbdOptions) -> io::Result<Arc<Link>> {
        let (image, watch) = open_image(opts)?;
        let (sizes, _) = watch::channel(watch.size());
        let link = Arc::new(Link {
            opts: opts.clone(),
            image: RwLock::new(image),
            size: AtomicU64::new(watch.size()),
            sizes,
            watcher: Mutex::new(None),
            reconnecting: AtomicBool::new(false),
            runtime: Handle::try_current().ok(),
        });
        link.follow(watch);
        Ok(link)
    }

    /// The image as now open.
    pub(super) fn image(&self) -> Image {
        self.image.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn subscribe(&self) -> Option<watch::Receiver<u64>> {
        self.runtime.as_ref()?;
        Some(self.sizes.subscribe())
    }

    /// Follows `watch` on a task (replacing the one that followed the
    /// image before): each new size is stored and announced.
    fn follow(self: &Arc<Self>, mut watch: ResizeWatch) {
        let Some(rt) = &self.runtime else { return };
        let link = Arc::downgrade(self);
        let task = rt.spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                let changed = watch.changed().await;
                let Some(link) = link.upgrade() else { return };
                match changed {
                    Ok(new) => {
                        pause = Duration::from_millis(100);
                        link.size.store(new, Ordering::Release);
                        link.sizes.send_replace(new);
                    }
                    Err(ironlun_rbd::Error::Abandoned(_)) => return,
                    Err(_) => {
                        drop(link);
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(10));
                    }
                }
            }
        });
        let old = self
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(task.abort_handle());
        if let Some(old) = old {
            old.abort();
        }
    }

    /// Passes an error on, first starting a reconnection if it says the
    /// cluster has cut this client off.
    pub(super) fn note(self: &Arc<Self>, e: io::Error) -> io::Error {
        if e.raw_os_error() == Some(ESHUTDOWN) {
            self.reconnect();
        }
        e
    }

    fn reconnect(self: &Arc<Self>) {
        let Some(rt) = self.runtime.clone() else {
            return;
        };
        if self.reconnecting.swap(true, Ordering::AcqRel) {
            return;
        }
        let link = Arc::clone(self);
        rt.spawn(async move {
            let mut pause = RECONNECT_PAUSE;
            for _ in 0..RECONNECT_TRIES {
                tokio::time::sleep(pause).await;
                let opts = link.opts.clone();
                let opened = tokio::task::spawn_blocking(move || open_image(&opts)).await;
                if let Ok(Ok((image, watch))) = opened {
                    link.size.store(watch.size(), Ordering::Release);
                    link.sizes.send_replace(watch.size());
                    *link.image.write().unwrap_or_else(|p| p.into_inner()) = image;
                    link.follow(watch);
                    break;
                }
                pause = (pause * 2).min(RECONNECT_PAUSE_MAX);
            }
            link.reconnecting.store(false, Ordering::Release);
        });
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(w) = self.watcher.get_mut().ok().and_then(Option::take) {
            w.abort();
        }
    }
}
