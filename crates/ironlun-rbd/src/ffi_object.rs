//! Every call into librados for single objects ([`crate::object`]): a
//! read that returns the object's version, a write that asserts one (or
//! that the object does not exist yet), watch and notify. Like `ffi`, the
//! types here own what librados may touch and give it back on drop.
//!
//! ## How a watch stays sound
//!
//! `watch` moves the callback state (`WatchState`: the sending half of a
//! bounded channel) into one heap allocation and registers its address
//! with `rados_watch3`. librados calls `watch_notify` and `watch_error`
//! on its own threads with that address until `rados_unwatch2` has
//! returned and `rados_watch_flush` has run the callbacks already queued
//! (librados.h: the flush "will block until all pending watch/notify
//! callbacks have been executed"). Only then does `WatchReg::drop` free
//! the state. The callbacks only read it through `&` and never block.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::ffi::{no_unwind, off_runtime, IoCtx};
use crate::sys_object::{ObjectApi, CREATE_EXCLUSIVE};

const ENOENT: c_int = 2;
const EEXIST: c_int = 17;
const ERANGE: c_int = 34;
const EOVERFLOW: c_int = 75;
const ETIMEDOUT: c_int = 110;

/// One object's I/O context (a context of its own, so that
/// `rados_get_last_version` after an operation is that operation's).
pub(crate) struct ObjectIo {
    ioctx: IoCtx,
    oid: std::ffi::CString,
    /// Held across an operation and the version read after it.
    ops: Mutex<()>,
}

/// What a conditional write found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written; the object's version is now this one.
    Written(u64),
    /// Someone else wrote (or created, or removed) the object since the
    /// version given: nothing was written.
    Stale,
}

/// What a notify heard back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotifyOutcome {
    /// Watchers that acknowledged (this client's own watch included).
    pub acks: u32,
    /// Watchers that did not answer within the timeout.
    pub timeouts: u32,
}

/// One event of a watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// Someone notified: acknowledge with [`crate::RadosObject::ack`].
    Notify {
        notify_id: u64,
        cookie: u64,
        /// The notifier's client id (its global id).
        notifier: u64,
    },
    /// The watch failed (`-errno`): notifications may have been missed;
    /// the watch must be made again.
    Error(i32),
}

impl ObjectIo {
    pub(crate) fn new(ioctx: IoCtx, oid: std::ffi::CString) -> ObjectIo {
        ObjectIo {
            ioctx,
            oid,
            ops: Mutex::new(()),
        }
    }

    fn api(&self) -> &'static ObjectApi {
        &self.ioctx.api.objects
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.ops.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The whole object (at most `max` bytes: a longer one is EFBIG) and
    /// its version; `None` when it does not exist. Blocks.
    pub(crate) fn read(&self, max: usize) -> Result<Option<(Vec<u8>, u64)>> {
        let a = self.api();
        let mut buf = vec![0u8; max.saturating_add(1)];
        let (mut got, mut prval) = (0usize, 0 as c_int);
        let _held = self.lock();
        // SAFETY: the op is created here and released below, once; the
        // read step's buffer, length and out-pointers live on this frame
        // until `rados_read_op_operate` (synchronous) has returned, which
        // is the last time librados writes them; the context is live (we
        // own it) and the oid NUL-terminated.
        let r = unsafe {
            let op = (a.rados_create_read_op)();
            if op.is_null() {
                return Err(Error::Abandoned("rados_create_read_op returned NULL"));
            }
            (a.rados_read_op_read)(
                op,
                0,
                buf.len(),
                buf.as_mut_ptr().cast(),
                &mut got,
                &mut prval,
            );
            let r = (a.rados_read_op_operate)(op, self.ioctx.raw, self.oid.as_ptr(), 0);
            (a.rados_release_read_op)(op);
            r
        };
        if r == -ENOENT {
            return Ok(None);
        }
        Error::check("rados_read_op_operate", r.into())?;
        Error::check("rados_read_op_read", prval.into())?;
        // SAFETY: live context; the op above finished on it under `ops`,
        // so the last version is that read's.
        let version = unsafe { (a.rados_get_last_version)(self.ioctx.raw) };
        if got > max {
            return Err(Error::Ceph {
                call: "rados_read_op_read",
                errno: 27, // EFBIG
            });
        }
        buf.truncate(got);
        Ok(Some((buf, version)))
    }

    /// Replaces the object with `data` if it is still at `version`
    /// (`None`: only if it does not exist). Blocks.
    pub(crate) fn write(&self, version: Option<u64>, data: &[u8]) -> Result<WriteOutcome> {
        let a = self.api();
        let _held = self.lock();
        // SAFETY: the op is created and released here, once; `data`
        // outlives the synchronous operate call, the last use of its
        // pointer; the context is live and the oid NUL-terminated; a NULL
        // mtime asks librados for the current time, a NULL category is
        // what librados.h documents as ignored.
        let r = unsafe {
            let op = (a.rados_create_write_op)();
            if op.is_null() {
                return Err(Error::Abandoned("rados_create_write_op returned NULL"));
            }
            match version {
                Some(v) => (a.rados_write_op_assert_version)(op, v),
                None => (a.rados_write_op_create)(op, CREATE_EXCLUSIVE, ptr::null()),
            }
            (a.rados_write_op_write_full)(op, data.as_ptr().cast(), data.len());
            let r = (a.rados_write_op_operate)(
                op,
                self.ioctx.raw,
                self.oid.as_ptr(),
                ptr::null_mut(),
                0,
            );
            (a.rados_release_write_op)(op);
            r
        };
        // ERANGE/EOVERFLOW: the version moved (librados.h,
        // rados_write_op_assert_version); EEXIST: created meanwhile;
        // ENOENT: removed meanwhile.
        if matches!(-r, ERANGE | EOVERFLOW | EEXIST | ENOENT) {
            return Ok(WriteOutcome::Stale);
        }
        Error::check("rados_write_op_operate", r.into())?;
        // SAFETY: live context; the write above finished on it under `ops`.
        let version = unsafe { (a.rados_get_last_version)(self.ioctx.raw) };
        Ok(WriteOutcome::Written(version))
    }

    /// `rados_notify2` with `payload`, waiting up to `timeout_ms` for the
    /// watchers' acknowledgements. Blocks for up to that long.
    pub(crate) fn notify(&self, payload: &[u8], timeout_ms: u64) -> Result<NotifyOutcome> {
        let a = self.api();
        let len = c_int::try_from(payload.len())
            .map_err(|_| Error::InvalidArgument("notify payload too long".into()))?;
        let (mut reply, mut reply_len): (*mut c_char, usize) = (ptr::null_mut(), 0);
        // SAFETY: live context; oid NUL-terminated; `payload` lives across
        // the synchronous call and `len` is its length; the reply
        // out-pointers are valid.
        let r = unsafe {
            (a.rados_notify2)(
                self.ioctx.raw,
                self.oid.as_ptr(),
                payload.as_ptr().cast(),
                len,
                timeout_ms,
                &mut reply,
                &mut reply_len,
            )
        };
        let counts = if reply.is_null() {
            None
        } else {
            // SAFETY: librados set `reply` to a buffer of `reply_len`
            // bytes that only this side holds until rados_buffer_free.
            let bytes = unsafe { std::slice::from_raw_parts(reply.cast::<u8>(), reply_len) };
            let counts = crate::object::notify_counts(bytes);
            // SAFETY: the buffer came from librados and is freed once
            // (librados.h: "must be released with rados_buffer_free");
            // `bytes` is not used after this.
            unsafe { (self.ioctx.api.rados_buffer_free)(reply) };
            counts
        };
        if r < 0 && r != -ETIMEDOUT {
            Error::check("rados_notify2", r.into())?;
        }
        let (acks, timeouts) = counts.unwrap_or((0, u32::from(r == -ETIMEDOUT)));
        Ok(NotifyOutcome { acks, timeouts })
    }

    /// `rados_notify_ack` for a notification this watch received.
    pub(crate) fn ack(&self, notify_id: u64, cookie: u64) -> Result<()> {
        // SAFETY: live context; oid NUL-terminated; an empty reply (NULL,
        // 0) is allowed by librados.h ("optional").
        let r = unsafe {
            (self.api().rados_notify_ack)(
                self.ioctx.raw,
                self.oid.as_ptr(),
                notify_id,
                cookie,
                ptr::null(),
                0,
            )
        };
        Error::check("rados_notify_ack", r.into()).map(drop)
    }

    /// Watches the object: each event goes to `tx` (bounded; one that
    /// does not fit sets `lost`). Blocks while the watch is registered.
    pub(crate) fn watch(
        self: &Arc<Self>,
        tx: SyncSender<WatchEvent>,
        timeout_secs: u32,
    ) -> Result<WatchReg> {
        let state = Box::into_raw(Box::new(WatchState {
            tx,
            lost: AtomicBool::new(false),
        }));
        let mut cookie = 0u64;
        // SAFETY: live context; oid NUL-terminated; both callbacks have
        // the C signatures (sys_object); `state` stays valid until
        // WatchReg's drop, which unwatches and flushes the callbacks
        // first (module comment); `cookie` is a valid out-pointer.
        let r = unsafe {
            (self.api().rados_watch3)(
                self.ioctx.raw,
                self.oid.as_ptr(),
                &mut cookie,
                watch_notify,
                watch_error,
                timeout_secs,
                state.cast(),
            )
        };
        if r < 0 {
            // SAFETY: the watch was not registered: librados never calls
            // back with `state`, which is still ours alone.
            drop(unsafe { Box::from_raw(state) });
            Error::check("rados_watch3", r.into())?;
        }
        Ok(WatchReg(Some(Registered {
            object: Arc::clone(self),
            cookie,
            state,
        })))
    }

    pub(crate) fn oid(&self) -> &CStr {
        &self.oid
    }
}

/// What a watch's callbacks use.
struct WatchState {
    tx: SyncSender<WatchEvent>,
    /// An event did not fit the channel: the reader must assume it
    /// missed a change.
    lost: AtomicBool,
}

impl WatchState {
    fn send(&self, event: WatchEvent) {
        match self.tx.try_send(event) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => self.lost.store(true, Ordering::Release),
        }
    }
}

/// `rados_watchcb2_t`.
///
/// # Safety
/// `arg` is a live `WatchState` (see the module comment).
unsafe extern "C" fn watch_notify(
    arg: *mut c_void,
    notify_id: u64,
    cookie: u64,
    notifier: u64,
    _data: *mut c_void,
    _len: usize,
) {
    // SAFETY: the caller's contract; shared access only.
    let state = unsafe { &*arg.cast::<WatchState>() };
    no_unwind(|| {
        state.send(WatchEvent::Notify {
            notify_id,
            cookie,
            notifier,
        })
    });
}

/// `rados_watcherrcb_t`.
///
/// # Safety
/// `arg` is a live `WatchState` (see the module comment).
unsafe extern "C" fn watch_error(arg: *mut c_void, _cookie: u64, err: c_int) {
    // SAFETY: the caller's contract; shared access only.
    let state = unsafe { &*arg.cast::<WatchState>() };
    no_unwind(|| state.send(WatchEvent::Error(err)));
}

/// A registered watch; unregistered on drop, off the runtime
/// (unwatching waits for the OSD, and the flush for callbacks queued).
pub(crate) struct WatchReg(Option<Registered>);

/// The registration a [`WatchReg`] undoes.
struct Registered {
    object: Arc<ObjectIo>,
    cookie: u64,
    state: *mut WatchState,
}

// SAFETY: `state` is only freed in `unregister` (after unwatch and the
// flush) and otherwise only read through `&` by librados' callbacks and
// `take_lost`; WatchState is Send + Sync (a SyncSender and an atomic);
// ObjectIo is Send + Sync (IoCtx is, and a Mutex).
unsafe impl Send for Registered {}
// SAFETY: as for Send: shared access to `state` reads an atomic only.
unsafe impl Sync for Registered {}

impl WatchReg {
    /// The watch's cookie (the `cookie` of its notifications).
    pub(crate) fn cookie(&self) -> u64 {
        self.0.as_ref().map_or(0, |r| r.cookie)
    }

    /// `rados_watch_check`: milliseconds since the OSD last confirmed
    /// the watch, or the error that ended it.
    pub(crate) fn check(&self) -> Result<u64> {
        let Some(r) = &self.0 else {
            return Err(Error::Abandoned("watch already unregistered"));
        };
        // SAFETY: live context (the registration holds the object);
        // `cookie` is this live registration.
        let ms = unsafe { (r.object.api().rados_watch_check)(r.object.ioctx.raw, r.cookie) };
        Error::check("rados_watch_check", ms.into())
    }

    /// Whether an event was dropped since the last call (channel full).
    pub(crate) fn take_lost(&self) -> bool {
        self.0.as_ref().is_some_and(|r| {
            // SAFETY: `state` is live until `unregister`, which only
            // runs once the registration is taken out of `self`.
            unsafe { &*r.state }.lost.swap(false, Ordering::AcqRel)
        })
    }
}

impl Registered {
    fn unregister(self) {
        let api = self.object.api();
        // SAFETY: live context; `cookie` is this registration, undone
        // once (self is consumed). After rados_unwatch2 no new callback
        // is queued for it, and rados_watch_flush returns after the
        // queued ones have run, so `state` is ours to free. The cluster
        // handle is live (the context holds it).
        unsafe {
            (api.rados_unwatch2)(self.object.ioctx.raw, self.cookie);
            (api.rados_watch_flush)(self.object.ioctx.cluster.raw);
            drop(Box::from_raw(self.state));
        }
    }
}

impl Drop for WatchReg {
    fn drop(&mut self) {
        if let Some(reg) = self.0.take() {
            off_runtime(move || reg.unregister());
        }
    }
}
