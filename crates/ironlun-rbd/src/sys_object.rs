//! The librados calls for single objects (read and write operations,
//! watch and notify), declared by hand like the rest of `sys` and checked
//! against Debian 12's `rados/librados.h` (Ceph 16.2.15). Resolved from
//! librados with the others, into [`ObjectApi`], a field of `sys::Api`.

use std::ffi::{c_char, c_int, c_void};

use crate::error::Error;
use crate::sys::{Opened, RadosIoctxT, RadosT};

/// `rados_write_op_t` / `rados_read_op_t`: an operation being built.
pub type RadosOpT = *mut c_void;

/// `rados_watchcb2_t`: `void (*)(void *arg, uint64_t notify_id, uint64_t
/// handle, uint64_t notifier_id, void *data, size_t data_len)`.
pub type WatchCb2 = unsafe extern "C" fn(*mut c_void, u64, u64, u64, *mut c_void, usize);
/// `rados_watcherrcb_t`: `void (*)(void *pre, uint64_t cookie, int err)`.
pub type WatchErrCb = unsafe extern "C" fn(*mut c_void, u64, c_int);

/// `LIBRADOS_CREATE_EXCLUSIVE` (librados.h): create fails with EEXIST.
pub const CREATE_EXCLUSIVE: c_int = 1;

/// The entry points for objects, one typed function pointer each.
pub struct ObjectApi {
    pub rados_create_write_op: unsafe extern "C" fn() -> RadosOpT,
    pub rados_release_write_op: unsafe extern "C" fn(RadosOpT),
    pub rados_write_op_assert_version: unsafe extern "C" fn(RadosOpT, u64),
    pub rados_write_op_create: unsafe extern "C" fn(RadosOpT, c_int, *const c_char),
    pub rados_write_op_write_full: unsafe extern "C" fn(RadosOpT, *const c_char, usize),
    pub rados_write_op_operate: unsafe extern "C" fn(
        RadosOpT,
        RadosIoctxT,
        *const c_char,
        *mut libc::time_t,
        c_int,
    ) -> c_int,
    pub rados_create_read_op: unsafe extern "C" fn() -> RadosOpT,
    pub rados_release_read_op: unsafe extern "C" fn(RadosOpT),
    pub rados_read_op_read:
        unsafe extern "C" fn(RadosOpT, u64, usize, *mut c_char, *mut usize, *mut c_int),
    pub rados_read_op_operate:
        unsafe extern "C" fn(RadosOpT, RadosIoctxT, *const c_char, c_int) -> c_int,
    pub rados_get_last_version: unsafe extern "C" fn(RadosIoctxT) -> u64,
    pub rados_watch3: unsafe extern "C" fn(
        RadosIoctxT,
        *const c_char,
        *mut u64,
        WatchCb2,
        WatchErrCb,
        u32,
        *mut c_void,
    ) -> c_int,
    pub rados_unwatch2: unsafe extern "C" fn(RadosIoctxT, u64) -> c_int,
    pub rados_watch_check: unsafe extern "C" fn(RadosIoctxT, u64) -> c_int,
    pub rados_watch_flush: unsafe extern "C" fn(RadosT) -> c_int,
    pub rados_notify2: unsafe extern "C" fn(
        RadosIoctxT,
        *const c_char,
        *const c_char,
        c_int,
        u64,
        *mut *mut c_char,
        *mut usize,
    ) -> c_int,
    pub rados_notify_ack:
        unsafe extern "C" fn(RadosIoctxT, *const c_char, u64, u64, *const c_char, c_int) -> c_int,
}

/// Resolves [`ObjectApi`] from librados.
pub(crate) fn resolve(rados: &Opened) -> Result<ObjectApi, Error> {
    let (
        rados_create_write_op,
        rados_release_write_op,
        rados_write_op_assert_version,
        rados_write_op_create,
        rados_write_op_write_full,
        rados_write_op_operate,
    ) = crate::sys::resolve_fields!(rados; rados_create_write_op, rados_release_write_op,
        rados_write_op_assert_version, rados_write_op_create, rados_write_op_write_full,
        rados_write_op_operate);
    let (
        rados_create_read_op,
        rados_release_read_op,
        rados_read_op_read,
        rados_read_op_operate,
        rados_get_last_version,
    ) = crate::sys::resolve_fields!(rados; rados_create_read_op, rados_release_read_op,
        rados_read_op_read, rados_read_op_operate, rados_get_last_version);
    let (rados_watch3, rados_unwatch2, rados_watch_flush, rados_notify2, rados_notify_ack) = crate::sys::resolve_fields!(rados; rados_watch3, rados_unwatch2, rados_watch_flush,
            rados_notify2, rados_notify_ack);
    let (rados_watch_check,) = crate::sys::resolve_fields!(rados; rados_watch_check);
    Ok(ObjectApi {
        rados_create_write_op,
        rados_release_write_op,
        rados_write_op_assert_version,
        rados_write_op_create,
        rados_write_op_write_full,
        rados_write_op_operate,
        rados_create_read_op,
        rados_release_read_op,
        rados_read_op_read,
        rados_read_op_operate,
        rados_get_last_version,
        rados_watch3,
        rados_unwatch2,
        rados_watch_check,
        rados_watch_flush,
        rados_notify2,
        rados_notify_ack,
    })
}
