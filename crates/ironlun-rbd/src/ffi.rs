//! Every call into librados and librbd, and every `unsafe` block of the
//! crate outside the loader (`sys`). The types here own the C handles and
//! close them on drop; the rest of the crate is safe code over them.
//!
//! ## How an asynchronous operation stays sound
//!
//! `submit` moves everything librbd may touch until the operation ends
//! (the buffers, the compare-and-write mismatch word, the sender half of a
//! tokio oneshot) into one heap allocation, `AioState`, and passes its
//! address as the completion's callback argument. From then on this side
//! never touches it again: librbd's callback (`aio_complete`, on one of
//! librbd's threads) takes it back with `Box::from_raw`, releases the
//! completion and sends the result. A future dropped early only drops the
//! receiver; the buffers live on until librbd is done with them. If the
//! submit call itself fails, librbd never calls back (the completion is
//! unused: librbd.cc returns its error before handing it to the I/O
//! queue), so `submit` takes the state back itself.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{oneshot, watch};

use crate::error::{Error, Result};
use crate::extents::{Collector, Extents};
use crate::sys::{Api, RadosIoctxT, RadosT, RbdCompletionT, RbdImageInfo, RbdImageT};

/// A connected cluster handle (`rados_t`). Shut down on drop.
pub(crate) struct Rados {
    pub(crate) api: &'static Api,
    pub(crate) raw: RadosT,
}

// SAFETY: librados handles are thread-safe (librados.h: a `rados_t` may be
// used from several threads; qemu and tgt share one across their I/O
// threads). The pointer is only passed to librados, never dereferenced.
unsafe impl Send for Rados {}
// SAFETY: see Send; `&Rados` only passes the handle to thread-safe calls.
unsafe impl Sync for Rados {}

impl Rados {
    /// `rados_create2` with cluster name "ceph" and `name`
    /// ("client.ID"). Not yet connected.
    pub(crate) fn create(api: &'static Api, name: &CStr) -> Result<Rados> {
        let mut raw: RadosT = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; both strings are
        // NUL-terminated and live across the call.
        let r = unsafe { (api.rados_create2)(&mut raw, c"ceph".as_ptr(), name.as_ptr(), 0) };
        Error::check("rados_create2", r.into())?;
        Ok(Rados { api, raw })
    }

    /// `rados_conf_read_file`; `None` searches librados' default places.
    pub(crate) fn read_conf(&self, path: Option<&CStr>) -> Result<()> {
        let p = path.map_or(ptr::null(), CStr::as_ptr);
        // SAFETY: `self.raw` is a live, unconnected handle (only `create`
        // made it; `connect` is called after configuration); `p` is NULL
        // (allowed: default search) or a NUL-terminated string.
        let r = unsafe { (self.api.rados_conf_read_file)(self.raw, p) };
        Error::check("rados_conf_read_file", r.into()).map(drop)
    }

    /// `rados_conf_set`.
    pub(crate) fn set(&self, option: &CStr, value: &CStr) -> Result<()> {
        // SAFETY: live handle; both strings NUL-terminated, live across the call.
        let r = unsafe { (self.api.rados_conf_set)(self.raw, option.as_ptr(), value.as_ptr()) };
        Error::check("rados_conf_set", r.into()).map(drop)
    }

    /// `rados_conf_get`: an option's value as librados holds it now.
    pub(crate) fn get(&self, option: &CStr) -> Result<String> {
        // Option values are short (numbers, names, paths); one longer
        // than this is refused with ENAMETOOLONG, not cut.
        let mut buf = vec![0u8; 4096];
        // SAFETY: live handle; `option` NUL-terminated; `buf` is writable
        // for the length passed, and librados NUL-terminates within it.
        let r = unsafe {
            (self.api.rados_conf_get)(
                self.raw,
                option.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        Error::check("rados_conf_get", r.into())?;
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        buf.truncate(end);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// `rados_connect` (blocks until the monitors answer or the mount
    /// timeout passes).
    pub(crate) fn connect(&self) -> Result<()> {
        // SAFETY: live, configured handle.
        let r = unsafe { (self.api.rados_connect)(self.raw) };
        Error::check("rados_connect", r.into()).map(drop)
    }

    /// `rados_getaddrs`: this client's addresses as librados prints them.
    pub(crate) fn addrs(&self) -> Result<String> {
        let mut out: *mut c_char = ptr::null_mut();
        // SAFETY: live, connected handle (only `Cluster` calls this, after
        // `connect`); `out` is a valid out-pointer.
        let r = unsafe { (self.api.rados_getaddrs)(self.raw, &mut out) };
        Error::check("rados_getaddrs", r.into())?;
        if out.is_null() {
            return Err(Error::Abandoned("rados_getaddrs returned no string"));
        }
        // SAFETY: on success librados sets `out` to a NUL-terminated copy
        // (`strdup`, librados_c.cc) that only this side holds.
        let text = unsafe { CStr::from_ptr(out) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: `out` came from librados' `strdup` and is freed once;
        // rados_buffer_free is librados' `free` for the buffers it hands
        // out. Nothing reads it after this.
        unsafe { (self.api.rados_buffer_free)(out) };
        Ok(text)
    }
}

impl Drop for Rados {
    fn drop(&mut self) {
        let (api, raw) = (self.api, SendPtr(self.raw));
        off_runtime(move || {
            let raw = raw;
            // SAFETY: `raw` came from rados_create2 and is shut down once,
            // here (moved out of the dropped handle). rados_shutdown also
            // frees a handle that never connected (librados.h: clean-up is
            // "only necessary" after connect; it is still the only way to
            // free one). Every IoCtx holds an Arc of this Rados, so none
            // outlives it.
            unsafe { (api.rados_shutdown)(raw.0) }
        });
    }
}

/// A C handle moved to the thread that closes it. librados and librbd
/// handles may be used from any thread (see the `Send` impls above).
pub(crate) struct SendPtr(pub(crate) *mut c_void);
// SAFETY: only ever a librados/librbd handle, closed once on the thread it
// is moved to; those handles are thread-safe (see Rados, ImageHandle).
unsafe impl Send for SendPtr {}

/// Runs a close that may block (rados_shutdown waits for the monitor
/// session to end, rbd_close for the image's I/O and watch) off the async
/// runtime: on tokio's blocking pool when called from inside a runtime,
/// else here. A runtime that is shutting down may drop the blocking task
/// without running it: the close then runs wherever that drop happens,
/// so the handle is closed (its watch and lock released) either way.
pub(crate) fn off_runtime(close: impl FnOnce() + Send + 'static) {
    struct CloseOnDrop<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for CloseOnDrop<F> {
        fn drop(&mut self) {
            if let Some(close) = self.0.take() {
                close();
            }
        }
    }
    let guard = CloseOnDrop(Some(close));
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn_blocking(move || drop(guard))),
        Err(_) => drop(guard),
    }
}

/// A pool's I/O context (`rados_ioctx_t`). Destroyed on drop.
pub(crate) struct IoCtx {
    pub(crate) api: &'static Api,
    pub(crate) raw: RadosIoctxT,
    pub(crate) cluster: Arc<Rados>,
}

// SAFETY: librados I/O contexts are thread-safe for the calls made here
// (rbd_create/remove/open on one context from several threads is what
// librbd's own tools do). The pointer is never dereferenced here.
unsafe impl Send for IoCtx {}
// SAFETY: as for Send.
unsafe impl Sync for IoCtx {}

impl IoCtx {
    pub(crate) fn create(cluster: Arc<Rados>, pool: &CStr) -> Result<IoCtx> {
        let api = cluster.api;
        let mut raw: RadosIoctxT = ptr::null_mut();
        // SAFETY: connected handle (Cluster only exists connected); `pool`
        // NUL-terminated; `raw` a valid out-pointer.
        let r = unsafe { (api.rados_ioctx_create)(cluster.raw, pool.as_ptr(), &mut raw) };
        Error::check("rados_ioctx_create", r.into())?;
        Ok(IoCtx { api, raw, cluster })
    }

    /// `rbd_create`: a new image of `size` bytes, objects of 2^`order`
    /// bytes (0: librbd's default, 4 MiB).
    pub(crate) fn create_image(&self, name: &CStr, size: u64, order: u8) -> Result<()> {
        let mut order = c_int::from(order);
        // SAFETY: live context; `name` NUL-terminated; `order` a valid
        // in/out pointer for the call's duration.
        let r = unsafe { (self.api.rbd_create)(self.raw, name.as_ptr(), size, &mut order) };
        Error::check("rbd_create", r.into()).map(drop)
    }

    /// `rbd_remove`.
    pub(crate) fn remove_image(&self, name: &CStr) -> Result<()> {
        // SAFETY: live context; `name` NUL-terminated.
        let r = unsafe { (self.api.rbd_remove)(self.raw, name.as_ptr()) };
        Error::check("rbd_remove", r.into()).map(drop)
    }
}

impl Drop for IoCtx {
    fn drop(&mut self) {
        // SAFETY: `raw` came from rados_ioctx_create and is destroyed
        // once; every ImageHandle holds an Arc of this IoCtx, so no image
        // opened on it is still open.
        unsafe { (self.api.rados_ioctx_destroy)(self.raw) }
    }
}

/// An open image (`rbd_image_t`). Closed on drop.
pub(crate) struct ImageHandle {
    pub(crate) api: &'static Api,
    pub(crate) raw: RbdImageT,
    pub(crate) _ioctx: Arc<IoCtx>,
    /// The image's name in its pool (a clone names its parent by it).
    pub(crate) name: std::ffi::CString,
}

// SAFETY: librbd image handles are thread-safe: I/O may be submitted from
// any thread concurrently (tgt's bs_rbd submits from several worker
// threads), and the synchronous calls used here take librbd's own locks.
// Only rbd_close must not race with other calls: it runs in Drop, when no
// other reference exists.
unsafe impl Send for ImageHandle {}
// SAFETY: as for Send.
unsafe impl Sync for ImageHandle {}

/// One asynchronous operation and what its buffers are.
pub(crate) enum Op {
    Read {
        offset: u64,
        len: usize,
    },
    Write {
        offset: u64,
        data: Bytes,
    },
    Flush,
    Discard {
        offset: u64,
        len: u64,
    },
    WriteSame {
        offset: u64,
        len: usize,
        pattern: Bytes,
    },
    CompareAndWrite {
        offset: u64,
        compare: Bytes,
        data: Bytes,
    },
}

/// What an operation's callback hands back.
pub(crate) struct AioDone {
    /// `rbd_aio_get_return_value`: bytes for a read, 0 or -errno.
    pub(crate) ret: isize,
    /// The read buffer (empty for other operations).
    pub(crate) read: Vec<u8>,
    /// Compare-and-write: librbd's mismatch offset (valid on -EILSEQ).
    pub(crate) mismatch: u64,
}

/// Everything librbd may use until the callback: see the module comment.
struct AioState {
    api: &'static Api,
    read: Vec<u8>,
    /// Write buffers, held only to keep them alive.
    _held: [Bytes; 2],
    mismatch: u64,
    done: oneshot::Sender<AioDone>,
}

/// librbd's completion callback (`rbd_callback_t`).
///
/// # Safety
/// Called by librbd exactly once per completion made by `submit`, with the
/// `AioState` pointer `submit` registered as `arg`.
unsafe extern "C" fn aio_complete(c: RbdCompletionT, arg: *mut c_void) {
    // SAFETY: this function's own contract, passed on unchanged.
    no_unwind(|| unsafe { aio_complete_body(c, arg) });
}

/// The body of [`aio_complete`].
///
/// # Safety
/// As [`aio_complete`].
unsafe fn aio_complete_body(c: RbdCompletionT, arg: *mut c_void) {
    // SAFETY: `arg` is the pointer Box::into_raw gave in `submit`; librbd
    // calls this once, and `submit` gave up the pointer when the submit
    // call succeeded, so this is the only owner.
    let state = unsafe { Box::from_raw(arg.cast::<AioState>()) };
    // SAFETY: `c` is this callback's live completion; reading its return
    // value and then releasing it inside the callback is what qemu's
    // block/rbd.c does (librbd holds its own reference until the callback
    // returns). It is not used after the release.
    let ret = unsafe {
        let ret = (state.api.rbd_aio_get_return_value)(c);
        (state.api.rbd_aio_release)(c);
        ret
    };
    let AioState {
        read,
        mismatch,
        done,
        ..
    } = *state;
    // A dropped receiver means nobody waits: the buffers drop here.
    let _ = done.send(AioDone {
        ret,
        read,
        mismatch,
    });
}

impl ImageHandle {
    /// `rbd_open` (blocks: reads the header, registers a watch).
    pub(crate) fn open(ioctx: Arc<IoCtx>, name: &CStr) -> Result<ImageHandle> {
        let api = ioctx.api;
        let mut raw: RbdImageT = ptr::null_mut();
        // SAFETY: live context; `name` NUL-terminated; snapshot NULL opens
        // the writable head; `raw` a valid out-pointer.
        let r = unsafe { (api.rbd_open)(ioctx.raw, name.as_ptr(), &mut raw, ptr::null()) };
        Error::check("rbd_open", r.into())?;
        Ok(ImageHandle {
            api,
            raw,
            _ioctx: ioctx,
            name: name.to_owned(),
        })
    }

    /// The `rbd_image_t` itself, for the calls of `lock` (which checks
    /// its own symbols). Valid while `self` lives.
    pub(crate) fn raw(&self) -> RbdImageT {
        self.raw
    }

    /// `rbd_get_size`: the size as this handle last saw it.
    pub(crate) fn size(&self) -> Result<u64> {
        let mut size = 0u64;
        // SAFETY: open image; `size` a valid out-pointer.
        let r = unsafe { (self.api.rbd_get_size)(self.raw, &mut size) };
        Error::check("rbd_get_size", r.into())?;
        Ok(size)
    }

    /// `rbd_stat`: refreshes the header first when librbd was told it
    /// changed. Returns (size, object size, order).
    pub(crate) fn stat(&self) -> Result<(u64, u64, u8)> {
        let mut info = RbdImageInfo::zeroed();
        let n = std::mem::size_of::<RbdImageInfo>();
        // SAFETY: open image; `info` is a writable rbd_image_info_t of
        // the size passed (the layout transcribed from librbd.h).
        let r = unsafe { (self.api.rbd_stat)(self.raw, &mut info, n) };
        Error::check("rbd_stat", r.into())?;
        let order = u8::try_from(info.order).unwrap_or(0);
        Ok((info.size, info.obj_size, order))
    }

    /// `rbd_get_id`: the image's id (EINVAL for an old-format image,
    /// which has none).
    pub(crate) fn id(&self) -> Result<String> {
        // Ids are a few hex digits (librbd makes them from the client's
        // instance id and a random number): 64 bytes is room to spare,
        // and a longer one is ERANGE, not cut.
        let mut buf = [0 as c_char; 64];
        // SAFETY: open image; `buf` is writable for the length passed,
        // and librbd NUL-terminates what it writes there.
        let r = unsafe { (self.api.rbd_get_id)(self.raw, buf.as_mut_ptr(), buf.len()) };
        Error::check("rbd_get_id", r.into())?;
        let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).collect();
        let id = CStr::from_bytes_until_nul(&bytes)
            .map_err(|_| Error::InvalidArgument("rbd_get_id: no NUL in the id".into()))?;
        Ok(id.to_string_lossy().into_owned())
    }

    /// `rbd_get_stripe_count`: objects a stripe spans (1: not striped).
    pub(crate) fn stripe_count(&self) -> Result<u64> {
        let mut count = 0u64;
        // SAFETY: open image; `count` a valid out-pointer.
        let r = unsafe { (self.api.rbd_get_stripe_count)(self.raw, &mut count) };
        Error::check("rbd_get_stripe_count", r.into())?;
        Ok(count)
    }

    /// `rbd_resize` (blocks).
    pub(crate) fn resize(&self, size: u64) -> Result<()> {
        // SAFETY: open image.
        let r = unsafe { (self.api.rbd_resize)(self.raw, size) };
        Error::check("rbd_resize", r.into()).map(drop)
    }

    /// Starts `op`; the receiver gets the outcome when librbd calls back.
    pub(crate) fn submit(&self, op: Op) -> Result<oneshot::Receiver<AioDone>> {
        let (tx, rx) = oneshot::channel();
        let (read, held) = match &op {
            Op::Read { len, .. } => (vec![0u8; *len], [Bytes::new(), Bytes::new()]),
            Op::Write { data, .. } => (Vec::new(), [data.clone(), Bytes::new()]),
            Op::WriteSame { pattern, .. } => (Vec::new(), [pattern.clone(), Bytes::new()]),
            Op::CompareAndWrite { compare, data, .. } => {
                (Vec::new(), [compare.clone(), data.clone()])
            }
            Op::Flush | Op::Discard { .. } => (Vec::new(), [Bytes::new(), Bytes::new()]),
        };
        let state = Box::into_raw(Box::new(AioState {
            api: self.api,
            read,
            _held: held,
            mismatch: 0,
            done: tx,
        }));
        let mut c: RbdCompletionT = ptr::null_mut();
        // SAFETY: `state` is a valid pointer we own; `aio_complete` has
        // the rbd_callback_t signature; `c` is a valid out-pointer.
        let r = unsafe { (self.api.rbd_aio_create_completion)(state.cast(), aio_complete, &mut c) };
        if r < 0 {
            // SAFETY: no completion exists, so nothing else has `state`.
            drop(unsafe { Box::from_raw(state) });
            Error::check("rbd_aio_create_completion", r.into())?;
        }
        // SAFETY: `state` is still ours (nothing submitted yet): the read
        // buffer's heap block and the mismatch word stay where they are
        // until aio_complete frees the box, which is after librbd stops
        // using them. The pointers are taken without creating references
        // that outlive this statement.
        let (read_ptr, mismatch_ptr) = unsafe {
            (
                (*state).read.as_mut_ptr().cast::<c_char>(),
                ptr::addr_of_mut!((*state).mismatch),
            )
        };
        // SAFETY: see `start`. Nothing below touches `state` unless librbd
        // refused the operation.
        let r = unsafe { self.start(&op, c, read_ptr, mismatch_ptr) };
        if r < 0 {
            // SAFETY: librbd returned an error before queueing, so the
            // completion was never used and the callback will not run: the
            // completion and the state are still ours alone.
            unsafe {
                (self.api.rbd_aio_release)(c);
                drop(Box::from_raw(state));
            }
            // `check`, not `-r`: negating isize::MIN would overflow.
            Error::check(op.call(), i64::try_from(r).unwrap_or(i64::MIN))?;
        }
        Ok(rx)
    }

    /// The one librbd call that starts `op` on completion `c`.
    ///
    /// # Safety
    /// `c` is a fresh completion whose argument is an `AioState` holding
    /// `op`'s buffers (so the `Bytes` in `op` point into memory kept alive
    /// until the callback), `read` points to that state's read buffer of
    /// `op`'s length, and `mismatch` to its mismatch word.
    unsafe fn start(
        &self,
        op: &Op,
        c: RbdCompletionT,
        read: *mut c_char,
        mismatch: *mut u64,
    ) -> isize {
        let a = self.api;
        let img = self.raw;
        // SAFETY: the caller's contract; lengths passed are the buffers'
        // own lengths (compare and data are equally long: args checked).
        unsafe {
            match op {
                Op::Read { offset, len } => (a.rbd_aio_read)(img, *offset, *len, read, c) as isize,
                Op::Write { offset, data } => {
                    (a.rbd_aio_write)(img, *offset, data.len(), data.as_ptr().cast(), c) as isize
                }
                Op::Flush => (a.rbd_aio_flush)(img, c) as isize,
                Op::Discard { offset, len } => (a.rbd_aio_discard)(img, *offset, *len, c) as isize,
                Op::WriteSame {
                    offset,
                    len,
                    pattern,
                } => {
                    let p = pattern.as_ptr().cast();
                    (a.rbd_aio_writesame)(img, *offset, *len, p, pattern.len(), c, 0) as isize
                }
                Op::CompareAndWrite {
                    offset,
                    compare,
                    data,
                } => {
                    let (cmp, buf) = (compare.as_ptr().cast(), data.as_ptr().cast());
                    (a.rbd_aio_compare_and_write)(
                        img,
                        *offset,
                        data.len(),
                        cmp,
                        buf,
                        c,
                        mismatch,
                        0,
                    )
                }
            }
        }
    }

    /// `rbd_diff_iterate2` from the beginning of time over `range`
    /// (blocks; the callback runs on librbd's threads while this waits).
    pub(crate) fn allocated(
        &self,
        offset: u64,
        len: u64,
        whole_object: bool,
        limit: usize,
    ) -> Result<Extents> {
        let end = offset.saturating_add(len);
        let collector = Mutex::new(Collector::new(offset..end, limit));
        let arg = ptr::addr_of!(collector).cast_mut().cast::<c_void>();
        // SAFETY: open image; NULL from-snapshot means "since creation";
        // `diff_extent` has the callback's C signature; `arg` points to
        // `collector`, which lives on this frame until the call returns,
        // and librbd calls the callback only before it returns.
        let r = unsafe {
            (self.api.rbd_diff_iterate2)(
                self.raw,
                ptr::null(),
                offset,
                len,
                1,
                u8::from(whole_object),
                diff_extent,
                arg,
            )
        };
        let extents = collector
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .finish();
        if r < 0 && !(r == -ECANCELED && extents.truncated) {
            Error::check("rbd_diff_iterate2", r.into())?;
        }
        Ok(extents)
    }

    /// Registers `tx` to be bumped whenever librbd says the header
    /// changed (resize, snapshots, features).
    pub(crate) fn watch(self: &Arc<Self>, tx: watch::Sender<u64>) -> Result<UpdateWatch> {
        let state = Box::into_raw(Box::new(WatchState { tx }));
        let mut handle = 0u64;
        // SAFETY: open image; `update_notify` has rbd_update_callback_t's
        // signature; `state` stays valid until after rbd_update_unwatch
        // returns (UpdateWatch::drop), and unwatch waits for callbacks in
        // flight (ImageUpdateWatchers::unregister_watcher).
        let r = unsafe {
            (self.api.rbd_update_watch)(self.raw, &mut handle, update_notify, state.cast())
        };
        if r < 0 {
            // SAFETY: registration failed, so librbd never calls back.
            drop(unsafe { Box::from_raw(state) });
            Error::check("rbd_update_watch", r.into())?;
        }
        Ok(UpdateWatch(Some(WatchReg {
            image: Arc::clone(self),
            handle,
            state,
        })))
    }
}

/// Linux's ECANCELED: `diff_extent` returns its negative to stop the walk.
const ECANCELED: c_int = 125;

/// `rbd_diff_iterate2`'s callback.
///
/// # Safety
/// `arg` is the `Mutex<Collector>` `allocated` passed, alive for the call.
unsafe extern "C" fn diff_extent(
    offset: u64,
    len: usize,
    exists: c_int,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: this function's own contract, passed on unchanged.
    no_unwind(|| unsafe { diff_extent_body(offset, len, exists, arg) })
}

/// The body of [`diff_extent`].
///
/// # Safety
/// As [`diff_extent`].
unsafe fn diff_extent_body(offset: u64, len: usize, exists: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: the caller's contract; shared access through the Mutex only.
    let collector = unsafe { &*arg.cast::<Mutex<Collector>>() };
    let mut c = collector.lock().unwrap_or_else(|p| p.into_inner());
    if c.add(offset, len as u64, exists != 0) {
        0
    } else {
        -ECANCELED
    }
}

impl Drop for ImageHandle {
    fn drop(&mut self) {
        let (api, raw) = (self.api, SendPtr(self.raw));
        // The pool (and cluster) stay until the image is closed.
        let ioctx = Arc::clone(&self._ioctx);
        off_runtime(move || {
            let raw = raw;
            // SAFETY: `raw` came from rbd_open and is closed once, here,
            // with no other reference left (the handle was behind an Arc
            // and is being dropped), so no call races with the close.
            // Operations still in flight need nothing from this handle:
            // their callbacks own their state and never touch the image.
            // (librbd's close shuts its I/O queue down only after the
            // requests in it have finished, so their callbacks have run
            // by then.)
            unsafe {
                (api.rbd_close)(raw.0);
            }
            drop(ioctx);
        });
    }
}

struct WatchState {
    tx: watch::Sender<u64>,
}

/// `rbd_update_callback_t`: bumps the generation; never blocks.
///
/// # Safety
/// `arg` is a live `WatchState` (see `ImageHandle::watch`).
unsafe extern "C" fn update_notify(arg: *mut c_void) {
    // SAFETY: the caller's contract; only shared access.
    let state = unsafe { &*arg.cast::<WatchState>() };
    no_unwind(|| state.tx.send_modify(|g| *g = g.wrapping_add(1)));
}

/// Runs a callback's body for librbd. A panic must not unwind into C
/// (undefined behaviour before Rust 1.81, the workspace's MSRV being
/// 1.80): it aborts the process instead, after the panic message.
pub(crate) fn no_unwind<R>(body: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(_) => std::process::abort(),
    }
}

/// A registered header watch; unregistered on drop, off the runtime
/// (`rbd_update_unwatch` waits for callbacks in flight).
pub(crate) struct UpdateWatch(Option<WatchReg>);

/// The registration an [`UpdateWatch`] undoes.
struct WatchReg {
    image: Arc<ImageHandle>,
    handle: u64,
    state: *mut WatchState,
}

// SAFETY: `state` is only freed in `unregister` (after unwatch) and
// otherwise only read through `&` by librbd's callback; WatchState is
// Send + Sync; the image handle is Send + Sync.
unsafe impl Send for WatchReg {}
// SAFETY: UpdateWatch has no methods that use `state`.
unsafe impl Sync for UpdateWatch {}

impl WatchReg {
    fn unregister(self) {
        // SAFETY: the image is open (we hold an Arc) and `handle` is the
        // registration made in `watch`, undone once (self is consumed).
        // After rbd_update_unwatch returns no callback is running or will
        // run (it waits for those in flight), so `state` is ours to free.
        unsafe {
            (self.image.api.rbd_update_unwatch)(self.image.raw, self.handle);
            drop(Box::from_raw(self.state));
        }
    }
}

impl Drop for UpdateWatch {
    fn drop(&mut self) {
        if let Some(reg) = self.0.take() {
            off_runtime(move || reg.unregister());
        }
    }
}

impl Op {
    /// The C function that starts this operation.
    pub(crate) fn call(&self) -> &'static str {
        match self {
            Op::Read { .. } => "rbd_aio_read",
            Op::Write { .. } => "rbd_aio_write",
            Op::Flush => "rbd_aio_flush",
            Op::Discard { .. } => "rbd_aio_discard",
            Op::WriteSame { .. } => "rbd_aio_writesame",
            Op::CompareAndWrite { .. } => "rbd_aio_compare_and_write",
        }
    }
}
