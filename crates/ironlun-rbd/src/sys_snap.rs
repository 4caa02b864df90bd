//! The librbd calls for snapshots and clones, declared by hand like the
//! rest of `sys` and checked against Debian 12's `rbd/librbd.h` (Ceph
//! 16.2.15). Resolved from librbd with the others, into [`SnapApi`], a
//! field of `sys::Api`.

use std::ffi::{c_char, c_int, c_void};

use crate::error::Error;
use crate::sys::{Opened, RadosIoctxT, RbdImageT};

/// `rbd_image_options_t`: a bag of options for create and clone.
pub type RbdImageOptionsT = *mut c_void;

/// `RBD_IMAGE_OPTION_CLONE_FORMAT` (librbd.h's option enum): 1 or 2.
pub const RBD_IMAGE_OPTION_CLONE_FORMAT: c_int = 12;

/// `rbd_snap_info_t` (librbd.h), filled by `rbd_snap_list`.
#[repr(C)]
pub struct RbdSnapInfo {
    pub id: u64,
    pub size: u64,
    pub name: *const c_char,
}

/// The entry points for snapshots, one typed function pointer each.
pub struct SnapApi {
    pub rbd_snap_create: unsafe extern "C" fn(RbdImageT, *const c_char) -> c_int,
    pub rbd_snap_remove: unsafe extern "C" fn(RbdImageT, *const c_char) -> c_int,
    pub rbd_snap_rollback: unsafe extern "C" fn(RbdImageT, *const c_char) -> c_int,
    pub rbd_snap_list: unsafe extern "C" fn(RbdImageT, *mut RbdSnapInfo, *mut c_int) -> c_int,
    pub rbd_snap_list_end: unsafe extern "C" fn(*mut RbdSnapInfo),
    pub rbd_snap_get_timestamp: unsafe extern "C" fn(RbdImageT, u64, *mut libc::timespec) -> c_int,
    pub rbd_image_options_create: unsafe extern "C" fn(*mut RbdImageOptionsT),
    pub rbd_image_options_destroy: unsafe extern "C" fn(RbdImageOptionsT),
    pub rbd_image_options_set_uint64: unsafe extern "C" fn(RbdImageOptionsT, c_int, u64) -> c_int,
    pub rbd_clone3: unsafe extern "C" fn(
        RadosIoctxT,
        *const c_char,
        *const c_char,
        RadosIoctxT,
        *const c_char,
        RbdImageOptionsT,
    ) -> c_int,
    pub rbd_open_read_only:
        unsafe extern "C" fn(RadosIoctxT, *const c_char, *mut RbdImageT, *const c_char) -> c_int,
}

/// Resolves [`SnapApi`] from librbd.
pub(crate) fn resolve(rbd: &Opened) -> Result<SnapApi, Error> {
    let (
        rbd_snap_create,
        rbd_snap_remove,
        rbd_snap_rollback,
        rbd_snap_list,
        rbd_snap_list_end,
        rbd_snap_get_timestamp,
    ) = crate::sys::resolve_fields!(rbd; rbd_snap_create, rbd_snap_remove, rbd_snap_rollback,
        rbd_snap_list, rbd_snap_list_end, rbd_snap_get_timestamp);
    let (
        rbd_image_options_create,
        rbd_image_options_destroy,
        rbd_image_options_set_uint64,
        rbd_clone3,
        rbd_open_read_only,
    ) = crate::sys::resolve_fields!(rbd; rbd_image_options_create, rbd_image_options_destroy,
        rbd_image_options_set_uint64, rbd_clone3, rbd_open_read_only);
    Ok(SnapApi {
        rbd_snap_create,
        rbd_snap_remove,
        rbd_snap_rollback,
        rbd_snap_list,
        rbd_snap_list_end,
        rbd_snap_get_timestamp,
        rbd_image_options_create,
        rbd_image_options_destroy,
        rbd_image_options_set_uint64,
        rbd_clone3,
        rbd_open_read_only,
    })
}
