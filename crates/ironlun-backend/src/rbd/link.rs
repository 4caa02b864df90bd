//! The connection to an image: opening it, following its size, and what
//! happens when the cluster cuts this client off (blocklists it: every
//! request then fails with ESHUTDOWN, librados' EBLOCKLISTED).
//!
//! A blocklist is a fence: another gateway taking over the image, or an
//! operator, wants this client's writes stopped. By default the LU stays
//! fenced ([`Fault::Fenced`]) until an operator adds it again; with
//! `reconnect=on` ([`RbdOptions::reconnect`]) the image is opened again
//! with a new client, after a growing pause. Either way, the writes the
//! old client acknowledged and no flush covered are lost, and the next
//! flush says so ([`super::ledger`]). Timeouts and lost connections
//! (ETIMEDOUT, ENOTCONN, ...) are not fences: the same client goes on,
//! and librbd reports its own failed writes at its next flush, once: a
//! flush that fails therefore counts the writes since the last good one
//! as lost, and is answered as a lost-writes report, never as a
//! retryable error.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ironlun_rbd::{Cluster, Image, Pool, ResizeWatch};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::ledger::{Access, Admitted, Ledger, Standing, LOSS_REPORTED_FOR};
use super::RbdOptions;
use crate::events::{EventQueue, Severity, StoreEvents};
use crate::Fault;

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

/// Reopen attempts after the cluster cut this client off (with
/// `reconnect=on`), and the pause before the first (doubled each time,
/// at most `RECONNECT_PAUSE_MAX`).
pub const RECONNECT_TRIES: u32 = 10;
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);
const RECONNECT_PAUSE_MAX: Duration = Duration::from_secs(30);

/// ESHUTDOWN: librados' answer once the cluster has blocklisted the
/// client (Ceph's `EBLOCKLISTED`).
const ESHUTDOWN: i32 = 108;
/// EROFS: librbd's answer to a write while another client holds the
/// image's lock in managed mode (a gateway group's owner).
const EROFS: i32 = 30;

/// One librados client's open image, its ledger, and the image's pool
/// on the same client (for the objects beside the image, `shared.rs`:
/// one blocklist cuts off both).
pub(super) struct Client {
    image: Image,
    pool: Pool,
    ledger: Ledger,
    /// The client's address as the blocklist shows it.
    address: String,
}

/// The open image, its client replaced when it is opened again.
pub(super) struct Link {
    opts: RbdOptions,
    client: RwLock<Arc<Client>>,
    standing: Standing,
    pub(super) size: AtomicU64,
    sizes: watch::Sender<u64>,
    watcher: Mutex<Option<AbortHandle>>,
    reconnecting: AtomicBool,
    runtime: Option<Handle>,
    events: EventQueue,
}

pub(super) fn io_error(e: ironlun_rbd::Error) -> io::Error {
    match e.errno() {
        Some(errno) => io::Error::from_raw_os_error(errno),
        None => io::Error::other(e.to_string()),
    }
}

/// Connects and opens the image with its header watch (blocks).
fn open_image(opts: &RbdOptions) -> io::Result<(Arc<Client>, ResizeWatch)> {
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
    if opts.write_through {
        cluster.options.retain(|(k, _)| k != "rbd_cache");
        cluster.options.push(("rbd_cache".into(), "false".into()));
    }
    for (key, value) in GATEWAY_DEFAULTS {
        if !cluster.defaults.iter().any(|(k, _)| k == key) {
            cluster.defaults.push(((*key).into(), (*value).into()));
        }
    }
    let cluster = Cluster::connect(&cluster).map_err(io_error)?;
    let address = cluster
        .address()
        .unwrap_or_else(|e| format!("(address unknown: {e})"));
    let pool = cluster.pool(&opts.pool).map_err(io_error)?;
    // IMAGE@SNAPSHOT: the snapshot, read-only.
    let image = match opts.image.split_once('@') {
        Some((image, snap)) => pool.open_snapshot(image, snap),
        None => pool.open(&opts.image),
    }
    .map_err(io_error)?;
    let watch = image.on_resize().map_err(io_error)?;
    let client = Client {
        image,
        pool,
        ledger: Ledger::new(opts.write_through),
        address,
    };
    Ok((Arc::new(client), watch))
}

/// "1 write", "3 writes".
fn writes(n: u64) -> String {
    if n == 1 {
        "1 write".into()
    } else {
        format!("{n} writes")
    }
}

/// What a log line adds about writes lost with a client.
fn lost_clause(lost: u64) -> String {
    if lost == 0 {
        return "; every write it acknowledged had been flushed".into();
    }
    format!(
        "; lost with it: {} it acknowledged since the last flush. The next SYNCHRONIZE \
         CACHE answers MEDIUM ERROR, WRITE ERROR, and so does every FUA or write-through \
         write until then and for a minute after",
        writes(lost)
    )
}

impl Link {
    /// Opens the image (blocks). Sizes are followed, and the image
    /// reopened, only when called inside a tokio runtime.
    pub(super) fn open(opts: &RbdOptions) -> io::Result<Arc<Link>> {
        let (client, watch) = open_image(opts)?;
        let (sizes, _) = watch::channel(watch.size());
        let link = Arc::new(Link {
            opts: opts.clone(),
            client: RwLock::new(client),
            standing: Standing::default(),
            size: AtomicU64::new(watch.size()),
            sizes,
            watcher: Mutex::new(None),
            reconnecting: AtomicBool::new(false),
            runtime: Handle::try_current().ok(),
            events: EventQueue::new(),
        });
        link.follow(watch);
        let reconnect = if opts.reconnect { "on" } else { "off" };
        let acked = if opts.write_through {
            "when the OSDs have them (rbd_cache off: a gateway group)"
        } else {
            "by librbd's cache policy, made durable by a flush"
        };
        link.events.send(
            Severity::Info,
            format!(
                "{}: opened as client {}; reconnect after a blocklist: {reconnect}; writes acknowledged {acked}",
                link.name(),
                link.client().address
            ),
        );
        Ok(link)
    }

    /// The image's id; `None` for an old-format image.
    pub(super) fn image_id(&self) -> Option<String> {
        self.client().image.id().ok()
    }

    /// `rbd:POOL/IMAGE`, for log lines.
    fn name(&self) -> String {
        format!("rbd:{}/{}", self.opts.pool, self.opts.image)
    }

    /// The client now serving the image.
    fn client(&self) -> Arc<Client> {
        Arc::clone(&self.client.read().unwrap_or_else(|p| p.into_inner()))
    }

    fn is_current(&self, client: &Arc<Client>) -> bool {
        Arc::ptr_eq(&self.client(), client)
    }

    pub(super) fn subscribe(&self) -> Option<watch::Receiver<u64>> {
        self.runtime.as_ref()?;
        Some(self.sizes.subscribe())
    }

    pub(super) fn events(&self) -> Option<StoreEvents> {
        self.events.take()
    }

    /// Refused for good once fenced (TEST UNIT READY).
    pub(super) fn ready(&self) -> io::Result<()> {
        if self.standing.fenced() {
            return Err(Fault::Fenced.into());
        }
        Ok(())
    }

    /// Whether a command may go to the image; the flush that first
    /// reports lost writes is logged.
    fn admit(&self, access: Access) -> Result<(), Fault> {
        let (fault, first) = match self.standing.admit(access, Instant::now()) {
            Admitted::Yes => return Ok(()),
            Admitted::No { fault, first } => (fault, first),
        };
        if let (true, Fault::LostWrites(n)) = (first, fault) {
            self.events.send(
                Severity::Error,
                format!(
                    "{}: SYNCHRONIZE CACHE answered MEDIUM ERROR, WRITE ERROR for {} that a \
                     client the cluster cut off had acknowledged and lost; flushes and FUA \
                     writes answer so for {} s (the initiator's own retries too), then as usual",
                    self.name(),
                    writes(n),
                    LOSS_REPORTED_FOR.as_secs()
                ),
            );
        }
        Err(fault)
    }

    /// Runs `op` on the client now open: a read, an allocation query, or
    /// a compare-and-write (which librbd completes only once the OSDs
    /// have it): nothing the ledger counts. Refused once fenced.
    pub(super) fn direct<T, F>(
        self: &Arc<Self>,
        op: impl FnOnce(Image) -> F,
    ) -> impl Future<Output = io::Result<T>> + Send + 'static
    where
        F: Future<Output = ironlun_rbd::Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let link = Arc::clone(self);
        let client = self.client();
        let run = op(client.image.clone());
        async move {
            link.admit(Access::Plain)?;
            run.await.map_err(|e| link.note(&client, io_error(e)))
        }
    }

    /// Runs `op`, a write, discard or write-same, on the client now open
    /// and counts it in that client's ledger; with `durable`, flushes
    /// after it. Refused once fenced, and a durable one while lost writes
    /// are unreported.
    pub(super) fn change<T, F>(
        self: &Arc<Self>,
        durable: bool,
        op: impl FnOnce(Image) -> F,
    ) -> impl Future<Output = io::Result<T>> + Send + 'static
    where
        F: Future<Output = ironlun_rbd::Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let link = Arc::clone(self);
        let client = self.client();
        let run = op(client.image.clone());
        async move {
            // Admitted after the client was taken: a client replaced in
            // between has already counted its losses (see `replace`).
            link.admit(if durable {
                Access::Durable
            } else {
                Access::Plain
            })?;
            let out = run.await.map_err(|e| link.note(&client, io_error(e)))?;
            if !client.ledger.acked() {
                return Err(link.retired_error());
            }
            if durable {
                link.flush_on(&client).await?;
            }
            Ok(out)
        }
    }

    /// SYNCHRONIZE CACHE: the lost writes, if any, reported instead.
    pub(super) fn flush(self: &Arc<Self>) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let link = Arc::clone(self);
        let client = self.client();
        async move {
            link.admit(Access::Flush)?;
            link.flush_on(&client).await
        }
    }

    /// Flushes `client`. A failure is reported as lost writes, never as
    /// the error librbd gave (ETIMEDOUT would be NOT READY, which the
    /// initiator retries, and librbd answers the retry with success):
    /// see [`Standing::flush_done`].
    async fn flush_on(self: &Arc<Self>, client: &Arc<Client>) -> io::Result<()> {
        let mark = client.ledger.mark();
        let flushed = client.image.flush().await;
        let ok = flushed.is_ok();
        let fault = match self
            .standing
            .flush_done(&client.ledger, mark, ok, Instant::now())
        {
            Admitted::Yes => return Ok(()),
            Admitted::No { fault, .. } => fault,
        };
        if let Err(e) = flushed {
            let e = io_error(e);
            self.log_failed_flush(&e, fault);
            // A blocklist fences the LU or reopens the image; the lost
            // writes are answered first.
            let _ = self.note(client, e);
        }
        Err(fault.into())
    }

    fn log_failed_flush(&self, e: &io::Error, fault: Fault) {
        let Fault::LostWrites(n) = fault else { return };
        self.events.send(
            Severity::Error,
            format!(
                "{}: a flush failed ({e}): librbd reports a failed write to one flush only, so                  the {} acknowledged since the last successful flush may be lost. The flush                  answered MEDIUM ERROR, WRITE ERROR; flushes and FUA writes answer so for {} s                  (the initiator's own retries too), then as usual",
                self.name(),
                writes(n),
                LOSS_REPORTED_FOR.as_secs()
            ),
        );
    }

    /// A write that completed on a client already retired: not GOOD.
    fn retired_error(&self) -> io::Error {
        if self.standing.fenced() {
            return Fault::Fenced.into();
        }
        io::Error::from_raw_os_error(ESHUTDOWN)
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

    /// Passes on an error of `client`'s. ESHUTDOWN says the cluster cut
    /// the client off: the LU is fenced (the error becomes
    /// [`Fault::Fenced`]), or with `reconnect=on` a new client is opened.
    fn note(self: &Arc<Self>, client: &Arc<Client>, e: io::Error) -> io::Error {
        if e.raw_os_error() == Some(EROFS) && self.opts.grouped {
            return Fault::NotOwner.into();
        }
        if e.raw_os_error() != Some(ESHUTDOWN) {
            return e;
        }
        if !self.opts.reconnect {
            self.fence();
            return Fault::Fenced.into();
        }
        self.reconnect(client);
        e
    }

    /// Stops serving the image for good: its client's unflushed writes
    /// are lost, and an operator must act.
    fn fence(&self) {
        if !self.standing.fence() {
            return;
        }
        let client = self.client();
        let lost = client.ledger.retire();
        self.standing.lose(lost);
        self.events.send(
            Severity::Error,
            format!(
                "{}: the cluster blocklisted this gateway's client {} (ESHUTDOWN): fenced, by \
                 another gateway taking the image over or by an operator. reconnect is off, so \
                 the LU stays failed: its commands answer NOT READY, MANUAL INTERVENTION \
                 REQUIRED{}. In a gateway group: ironlun admin group rejoin TARGET. Otherwise, \
                 to serve the image from here again, make sure no other gateway \
                 writes it, then remove the LUN and add it again (ironlun admin lun remove and \
                 lun add; a target's only LUN: target remove and target add; or through the \
                 configuration file and SIGHUP), or restart the target (docs/rbd.md, \
                 \"Blocklist and reconnect\")",
                self.name(),
                client.address,
                lost_clause(lost)
            ),
        );
    }

    /// Opens the image again with a new client, unless `failed` was
    /// replaced already or a reconnection is under way.
    fn reconnect(self: &Arc<Self>, failed: &Arc<Client>) {
        let Some(rt) = self.runtime.clone() else {
            return;
        };
        if !self.is_current(failed) || self.reconnecting.swap(true, Ordering::AcqRel) {
            return;
        }
        self.events.send(
            Severity::Warning,
            format!(
                "{}: the cluster blocklisted this gateway's client {} (ESHUTDOWN); \
                 reconnect=on: opening the image again with a new client, which undoes the fence",
                self.name(),
                failed.address
            ),
        );
        let link = Arc::clone(self);
        rt.spawn(async move {
            let mut pause = RECONNECT_PAUSE;
            for _ in 0..RECONNECT_TRIES {
                tokio::time::sleep(pause).await;
                let opts = link.opts.clone();
                let opened = tokio::task::spawn_blocking(move || open_image(&opts)).await;
                if let Ok(Ok((client, watch))) = opened {
                    link.replace(client, watch);
                    link.reconnecting.store(false, Ordering::Release);
                    return;
                }
                pause = (pause * 2).min(RECONNECT_PAUSE_MAX);
            }
            link.events.send(
                Severity::Error,
                format!(
                    "{}: gave up reopening the image after {RECONNECT_TRIES} tries; the next \
                     command that fails with ESHUTDOWN starts again",
                    link.name()
                ),
            );
            link.reconnecting.store(false, Ordering::Release);
        });
    }

    /// Puts `client` in the old one's place. The old one is retired and
    /// its losses counted *before* the new one serves: a command that
    /// takes the new client is admitted after that, and sees them.
    fn replace(self: &Arc<Self>, client: Arc<Client>, watch: ResizeWatch) {
        let old = self.client();
        let lost = old.ledger.retire();
        self.standing.lose(lost);
        let address = client.address.clone();
        *self.client.write().unwrap_or_else(|p| p.into_inner()) = client;
        self.size.store(watch.size(), Ordering::Release);
        self.sizes.send_replace(watch.size());
        self.follow(watch);
        let severity = if lost > 0 {
            Severity::Error
        } else {
            Severity::Warning
        };
        self.events.send(
            severity,
            format!(
                "{}: reconnected as client {address}, replacing {}{}",
                self.name(),
                old.address,
                lost_clause(lost)
            ),
        );
    }
}

impl Client {
    /// The image's pool on this client.
    pub(super) fn pool(&self) -> &Pool {
        &self.pool
    }
}

/// What the gateway group (`super::group`) and the objects beside the
/// image (`super::shared`) need of the link.
impl Link {
    /// The client now serving the image.
    pub(super) fn current(&self) -> Arc<Client> {
        self.client()
    }

    /// An error of `client`'s, passed on as an I/O's would be:
    /// ESHUTDOWN fences the LU (or reopens the image, `reconnect=on`).
    pub(super) fn note_error(self: &Arc<Self>, client: &Arc<Client>, e: io::Error) -> io::Error {
        self.note(client, e)
    }

    /// The image as the client now serving it has it open.
    pub(super) fn image(&self) -> Image {
        self.client().image.clone()
    }

    /// A lock call's error, passed on as an I/O's would be: ESHUTDOWN
    /// (the cluster blocklisted this client) fences the LU.
    pub(super) fn lock_error(self: &Arc<Self>, e: ironlun_rbd::Error) -> io::Error {
        let client = self.client();
        self.note(&client, io_error(e))
    }

    /// Whether the cluster fenced this gateway (and nobody rejoined).
    pub(super) fn fenced(&self) -> bool {
        self.standing.fenced()
    }

    /// The explicit way back after a fence: a new client opens the image
    /// (blocks), replaces the fenced one and serves. The group calls it
    /// only for a gateway that will come back as a standby, which owns
    /// nothing and writes nothing until it takes the lock again.
    pub(super) fn rejoin(self: &Arc<Self>) -> io::Result<()> {
        let (client, watch) = open_image(&self.opts)?;
        self.replace(client, watch);
        self.standing.unfence();
        Ok(())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(w) = self.watcher.get_mut().ok().and_then(Option::take) {
            w.abort();
        }
    }
}
