//! Snapshots and clones of an open image: the librbd calls (`sys_snap`)
//! and the soundness of each. Every call here blocks on the cluster.

use std::ffi::{c_int, CStr};
use std::ptr;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ffi::{ImageHandle, IoCtx};
use crate::sys::RbdImageT;
use crate::sys_snap::{RbdImageOptionsT, RbdSnapInfo, RBD_IMAGE_OPTION_CLONE_FORMAT};

/// The most snapshots of one image a listing reads: a bound on what one
/// call allocates (Ceph itself allows more; ironlun's own refuse to be
/// taken past [`MAX_SNAPSHOTS`]).
pub const MAX_SNAPSHOTS: usize = 512;

/// ERANGE: `rbd_snap_list`'s answer when the array is too small.
const ERANGE: c_int = 34;

/// One snapshot of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapInfo {
    /// librbd's id of the snapshot.
    pub id: u64,
    pub name: String,
    /// The image's size when it was taken, in bytes.
    pub size: u64,
    /// When it was taken, in seconds since the Unix epoch (`None` when
    /// librbd could not say).
    pub taken: Option<i64>,
}

impl ImageHandle {
    /// `rbd_snap_create`.
    pub(crate) fn snap_create(&self, name: &CStr) -> Result<()> {
        // SAFETY: open image; `name` NUL-terminated, alive for the call.
        let r = unsafe { (self.api.snaps.rbd_snap_create)(self.raw, name.as_ptr()) };
        Error::check("rbd_snap_create", r.into()).map(drop)
    }

    /// `rbd_snap_remove`.
    pub(crate) fn snap_remove(&self, name: &CStr) -> Result<()> {
        // SAFETY: as for snap_create.
        let r = unsafe { (self.api.snaps.rbd_snap_remove)(self.raw, name.as_ptr()) };
        Error::check("rbd_snap_remove", r.into()).map(drop)
    }

    /// `rbd_snap_rollback`: the image's data (and size) become the
    /// snapshot's.
    pub(crate) fn snap_rollback(&self, name: &CStr) -> Result<()> {
        // SAFETY: as for snap_create.
        let r = unsafe { (self.api.snaps.rbd_snap_rollback)(self.raw, name.as_ptr()) };
        Error::check("rbd_snap_rollback", r.into()).map(drop)
    }

    /// `rbd_snap_list`, at most [`MAX_SNAPSHOTS`], with each one's time
    /// (`rbd_snap_get_timestamp`).
    pub(crate) fn snap_list(&self) -> Result<Vec<SnapInfo>> {
        let mut room: c_int = 16;
        loop {
            let cap = usize::try_from(room).unwrap_or(0).max(1);
            if cap > MAX_SNAPSHOTS + 1 {
                return Err(Error::InvalidArgument(format!(
                    "the image has more than {MAX_SNAPSHOTS} snapshots"
                )));
            }
            let mut snaps: Vec<RbdSnapInfo> = (0..cap)
                .map(|_| RbdSnapInfo {
                    id: 0,
                    size: 0,
                    name: ptr::null(),
                })
                .collect();
            let mut max = c_int::try_from(cap).unwrap_or(c_int::MAX);
            // SAFETY: open image; `snaps` is writable for `max` entries
            // (librbd writes at most `max`, the last one a terminator,
            // and answers ERANGE with the room it needs otherwise).
            let r =
                unsafe { (self.api.snaps.rbd_snap_list)(self.raw, snaps.as_mut_ptr(), &mut max) };
            if r == -ERANGE {
                room = max.max(room.saturating_mul(2));
                continue;
            }
            Error::check("rbd_snap_list", r.into())?;
            let n = usize::try_from(r).unwrap_or(0).min(cap);
            let out = snaps
                .iter()
                .take(n)
                .map(|s| SnapInfo {
                    id: s.id,
                    name: if s.name.is_null() {
                        String::new()
                    } else {
                        // SAFETY: librbd filled the first `n` entries
                        // with NUL-terminated names it owns until
                        // list_end, below; this copies the name out.
                        let name = unsafe { CStr::from_ptr(s.name) };
                        name.to_string_lossy().into_owned()
                    },
                    size: s.size,
                    taken: self.snap_time(s.id),
                })
                .collect();
            // SAFETY: the array librbd filled (terminator included), freed
            // once; nothing reads the names after this.
            unsafe { (self.api.snaps.rbd_snap_list_end)(snaps.as_mut_ptr()) };
            return Ok(out);
        }
    }

    fn snap_time(&self, id: u64) -> Option<i64> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: open image; `ts` a valid out-pointer for the call.
        let r = unsafe { (self.api.snaps.rbd_snap_get_timestamp)(self.raw, id, &mut ts) };
        (r == 0).then_some(ts.tv_sec)
    }

    /// `rbd_clone3` of this image's snapshot `snap` as the new image
    /// `child` in the same pool, clone format 2 (the snapshot needs no
    /// protection, Ceph 13 and later).
    pub(crate) fn clone_snapshot(&self, snap: &CStr, child: &CStr) -> Result<()> {
        let s = &self.api.snaps;
        let mut opts: RbdImageOptionsT = ptr::null_mut();
        // SAFETY: `opts` a valid out-pointer; destroyed below, once.
        unsafe { (s.rbd_image_options_create)(&mut opts) };
        // SAFETY: `opts` made just above; the option takes an integer.
        let set =
            unsafe { (s.rbd_image_options_set_uint64)(opts, RBD_IMAGE_OPTION_CLONE_FORMAT, 2) };
        let r = if set < 0 {
            set
        } else {
            let io = self._ioctx.raw;
            // SAFETY: live context (held by this handle) for parent and
            // child; every string NUL-terminated and alive for the call;
            // `opts` live until destroyed below.
            unsafe {
                (s.rbd_clone3)(
                    io,
                    self.name.as_ptr(),
                    snap.as_ptr(),
                    io,
                    child.as_ptr(),
                    opts,
                )
            }
        };
        // SAFETY: made by options_create above, destroyed once.
        unsafe { (s.rbd_image_options_destroy)(opts) };
        Error::check("rbd_clone3", r.into()).map(drop)
    }

    /// `rbd_open_read_only` at snapshot `snap`: the image as it was then.
    pub(crate) fn open_snapshot(
        ioctx: Arc<IoCtx>,
        name: &CStr,
        snap: &CStr,
    ) -> Result<ImageHandle> {
        let api = ioctx.api;
        let mut raw: RbdImageT = ptr::null_mut();
        // SAFETY: live context; both strings NUL-terminated; `raw` a
        // valid out-pointer.
        let r = unsafe {
            (api.snaps.rbd_open_read_only)(ioctx.raw, name.as_ptr(), &mut raw, snap.as_ptr())
        };
        Error::check("rbd_open_read_only", r.into())?;
        Ok(ImageHandle {
            api,
            raw,
            _ioctx: ioctx,
            name: name.to_owned(),
        })
    }
}
