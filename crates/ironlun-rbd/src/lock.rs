//! librbd's exclusive lock in managed mode: who owns an image in a
//! gateway group (issue 37, docs/ha.md "The gateway group").
//!
//! **Owns:** the six `rbd_lock_*` / `rbd_is_exclusive_lock_owner` calls
//! and their symbols. A gateway that calls [`Image::lock_acquire`] puts
//! its handle in librbd's managed mode (`StandardPolicy`): it never
//! hands the lock to another client that asks, so a write through any
//! other client fails with EROFS instead of moving the lock. Taking the
//! lock from a dead owner is [`Image::lock_break`]: with librbd's
//! `rbd_blocklist_on_break_lock` (true by default) the old owner's client is
//! blocklisted first and librbd waits for the OSD map that says so, so
//! none of that client's writes can land afterwards (the fence).
//!
//! The symbols are looked up here, apart from `sys`, in a second handle
//! on the same `librbd.so.1` (the loader keeps one library mapped per
//! path, so they are the same code): the lock is the gateway group's
//! concern, and a librbd without them only costs the group.
//!
//! Every call here blocks on the cluster: callers run them off the async
//! runtime (tokio's blocking pool).

use std::ffi::{c_char, c_int, CStr, CString, OsStr};
use std::sync::OnceLock;

use libloading::os::unix::{Library as UnixLibrary, RTLD_LAZY, RTLD_LOCAL};

use crate::error::{Error, Result};
use crate::image::Image;
use crate::sys::{RbdImageT, RBD_SONAME};

/// `RBD_LOCK_MODE_EXCLUSIVE` (librbd.h `rbd_lock_mode_t`).
const RBD_LOCK_MODE_EXCLUSIVE: c_int = 0;
/// ENOENT: `rbd_lock_get_owners` when nobody holds the lock.
const ENOENT: i32 = 2;
/// ERANGE: `rbd_lock_get_owners` when the array was too small.
const ERANGE: i32 = 34;
/// Owners asked for at first (an exclusive lock has one; a shared one,
/// which ironlun never takes, may have more).
const OWNERS_FIRST: usize = 4;
/// The most owners read back (refused beyond: nothing here takes shared
/// locks, so that many means something else holds the image).
const OWNERS_MAX: usize = 64;

/// The entry points, typed as librbd.h (Ceph 16) declares them.
struct LockApi {
    is_owner: unsafe extern "C" fn(RbdImageT, *mut c_int) -> c_int,
    acquire: unsafe extern "C" fn(RbdImageT, c_int) -> c_int,
    release: unsafe extern "C" fn(RbdImageT) -> c_int,
    get_owners: unsafe extern "C" fn(RbdImageT, *mut c_int, *mut *mut c_char, *mut usize) -> c_int,
    get_owners_cleanup: unsafe extern "C" fn(*mut *mut c_char, usize),
    break_lock: unsafe extern "C" fn(RbdImageT, c_int, *const c_char) -> c_int,
    _library: UnixLibrary,
}

static LOCK_API: OnceLock<std::result::Result<LockApi, Error>> = OnceLock::new();

fn api() -> Result<&'static LockApi> {
    LOCK_API.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> std::result::Result<LockApi, Error> {
    let flags = RTLD_LAZY | RTLD_LOCAL | libc::RTLD_NODELETE;
    // SAFETY: as in `sys::Opened::open`: librbd's initialisers only set
    // up its own state (and it is already loaded when an image is open,
    // so nothing runs again); RTLD_NODELETE keeps its code mapped.
    let lib = unsafe { UnixLibrary::open(Some(OsStr::new(RBD_SONAME)), flags) }
        .map_err(|e| Error::NotInstalled(format!("{RBD_SONAME}: {e}")))?;
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: the field this initialises has the type transcribed
            // from the C prototype of `$name` in librbd.h (Ceph 16); the
            // pointer stays valid because the library is never unmapped
            // (RTLD_NODELETE, and the handle is kept in the LockApi).
            let s = unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| {
                Error::NotInstalled(format!("symbol {} missing from {RBD_SONAME}: {e}", $name))
            })?;
            *s
        }};
    }
    Ok(LockApi {
        is_owner: sym!("rbd_is_exclusive_lock_owner"),
        acquire: sym!("rbd_lock_acquire"),
        release: sym!("rbd_lock_release"),
        get_owners: sym!("rbd_lock_get_owners"),
        get_owners_cleanup: sym!("rbd_lock_get_owners_cleanup"),
        break_lock: sym!("rbd_lock_break"),
        _library: lib,
    })
}

/// Who holds an image's lock, as librbd names them: each owner's client
/// address (`127.0.0.1:0/3044712`), the name [`Image::lock_break`] takes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockOwners {
    /// Whether the lock is exclusive (false: shared, which ironlun never
    /// takes).
    pub exclusive: bool,
    /// The owners' addresses; empty when nobody holds it.
    pub owners: Vec<String>,
}

impl Image {
    /// `rbd_is_exclusive_lock_owner`: whether this handle holds the lock
    /// as librbd last knew (no cluster round trip).
    pub fn is_lock_owner(&self) -> Result<bool> {
        let api = api()?;
        let mut owner: c_int = 0;
        // SAFETY: the image is open while `self` lives; `owner` is a
        // valid out-pointer.
        let r = unsafe { (api.is_owner)(self.handle().raw(), &mut owner) };
        Error::check("rbd_is_exclusive_lock_owner", r.into())?;
        Ok(owner != 0)
    }

    /// `rbd_lock_acquire(EXCLUSIVE)`: takes the lock and keeps it
    /// (managed mode, see the module comment). Fails (EROFS, EBUSY) while
    /// another live client holds it. The image needs the exclusive-lock
    /// feature (EINVAL without it).
    pub fn lock_acquire(&self) -> Result<()> {
        let api = api()?;
        // SAFETY: open image; the mode is a valid rbd_lock_mode_t.
        let r = unsafe { (api.acquire)(self.handle().raw(), RBD_LOCK_MODE_EXCLUSIVE) };
        Error::check("rbd_lock_acquire", r.into()).map(drop)
    }

    /// `rbd_lock_release`: flushes this handle's writes and gives the
    /// lock up (an orderly handover).
    pub fn lock_release(&self) -> Result<()> {
        let api = api()?;
        // SAFETY: open image.
        let r = unsafe { (api.release)(self.handle().raw()) };
        Error::check("rbd_lock_release", r.into()).map(drop)
    }

    /// `rbd_lock_get_owners`: who holds the lock, read from the cluster.
    pub fn lock_owners(&self) -> Result<LockOwners> {
        let api = api()?;
        let mut room = OWNERS_FIRST;
        loop {
            let mut slots: Vec<*mut c_char> = vec![std::ptr::null_mut(); room];
            let mut n = room;
            let mut mode: c_int = 0;
            // SAFETY: open image; `slots` has `n` writable pointers;
            // librbd sets `n` to the number it filled (or needs).
            let r = unsafe {
                (api.get_owners)(self.handle().raw(), &mut mode, slots.as_mut_ptr(), &mut n)
            };
            if r == -ERANGE && n > room && n <= OWNERS_MAX {
                room = n;
                continue;
            }
            if r == -ENOENT {
                return Ok(LockOwners::default());
            }
            Error::check("rbd_lock_get_owners", r.into())?;
            let filled = n.min(room);
            let owners = slots
                .iter()
                .take(filled)
                .filter(|p| !p.is_null())
                // SAFETY: librbd filled these `filled` slots with
                // NUL-terminated copies (strdup) that stay valid until
                // the cleanup call below.
                .map(|p| unsafe { CStr::from_ptr(*p) }.to_string_lossy().into_owned())
                .collect();
            // SAFETY: the slots librbd filled, freed once, as librbd.h
            // asks; nothing reads them after this.
            unsafe { (api.get_owners_cleanup)(slots.as_mut_ptr(), filled) };
            return Ok(LockOwners {
                exclusive: mode == RBD_LOCK_MODE_EXCLUSIVE,
                owners,
            });
        }
    }

    /// `rbd_lock_break(EXCLUSIVE, owner)`: takes the lock from `owner`
    /// (an address from [`Image::lock_owners`]). With librbd's
    /// `rbd_blocklist_on_break_lock` (default true) the owner's client is
    /// blocklisted first: its writes in flight never land. EBUSY when
    /// `owner` no longer holds the lock (someone else broke it first).
    pub fn lock_break(&self, owner: &str) -> Result<()> {
        let api = api()?;
        let owner = CString::new(owner)
            .map_err(|_| Error::InvalidArgument("lock owner with a NUL byte".into()))?;
        // SAFETY: open image; `owner` NUL-terminated and alive across the
        // call.
        let r = unsafe {
            (api.break_lock)(self.handle().raw(), RBD_LOCK_MODE_EXCLUSIVE, owner.as_ptr())
        };
        Error::check("rbd_lock_break", r.into()).map(drop)
    }
}
