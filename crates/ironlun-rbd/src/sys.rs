//! The C interface of librados and librbd that this crate uses, written
//! by hand, and its loader.
//!
//! Every type and signature below was checked against Debian 12's
//! `librados-dev` and `librbd-dev` (Ceph 16.2.15): `rados/librados.h` and
//! `rbd/librbd.h`. The libraries are opened with `dlopen` when first
//! needed and never unmapped: librados starts threads that run library
//! code until the process ends, and Ceph's libraries register static
//! destructors and at-exit work as they load, so unloading would pull
//! code from under them. They are opened with `RTLD_NODELETE`, so even a
//! load that fails half-way (the first library opened, the second
//! missing or lacking a symbol) leaves no handler or thread pointing into
//! unmapped code: the handles are closed, the code stays.

use std::ffi::{c_char, c_int, c_void, OsStr};
use std::sync::OnceLock;

use libloading::os::unix::{Library as UnixLibrary, RTLD_LAZY, RTLD_LOCAL};
use libloading::Library;

use crate::error::Error;

/// `rados_t`: a cluster handle.
pub type RadosT = *mut c_void;
/// `rados_ioctx_t`: a pool's I/O context.
pub type RadosIoctxT = *mut c_void;
/// `rbd_image_t`: an open image.
pub type RbdImageT = *mut c_void;
/// `rbd_completion_t`: one asynchronous operation's completion.
pub type RbdCompletionT = *mut c_void;
/// `rbd_callback_t`: `void (*)(rbd_completion_t cb, void *arg)`.
pub type RbdCallbackT = unsafe extern "C" fn(RbdCompletionT, *mut c_void);
/// `rbd_update_callback_t`: `void (*)(void *arg)`.
pub type RbdUpdateCallbackT = unsafe extern "C" fn(*mut c_void);
/// `rbd_diff_iterate2`'s callback: `int (*)(uint64_t, size_t, int, void *)`.
pub type DiffIterateCallback = unsafe extern "C" fn(u64, usize, c_int, *mut c_void) -> c_int;

/// `RBD_MAX_BLOCK_NAME_SIZE` (librbd.h).
const RBD_MAX_BLOCK_NAME_SIZE: usize = 24;
/// `RBD_MAX_IMAGE_NAME_SIZE` (librbd.h).
const RBD_MAX_IMAGE_NAME_SIZE: usize = 96;

/// `rbd_image_info_t` (librbd.h), filled by `rbd_stat`.
#[repr(C)]
pub struct RbdImageInfo {
    pub size: u64,
    pub obj_size: u64,
    pub num_objs: u64,
    pub order: c_int,
    block_name_prefix: [c_char; RBD_MAX_BLOCK_NAME_SIZE],
    parent_pool: i64,
    parent_name: [c_char; RBD_MAX_IMAGE_NAME_SIZE],
}

impl RbdImageInfo {
    pub fn zeroed() -> RbdImageInfo {
        RbdImageInfo {
            size: 0,
            obj_size: 0,
            num_objs: 0,
            order: 0,
            block_name_prefix: [0; RBD_MAX_BLOCK_NAME_SIZE],
            parent_pool: 0,
            parent_name: [0; RBD_MAX_IMAGE_NAME_SIZE],
        }
    }
}

/// The resolved entry points, one typed function pointer per C function.
/// Only reachable as `&'static Api`: the libraries stay loaded for the
/// life of the process, so every pointer stays valid.
pub struct Api {
    pub rados_create2:
        unsafe extern "C" fn(*mut RadosT, *const c_char, *const c_char, u64) -> c_int,
    pub rados_conf_read_file: unsafe extern "C" fn(RadosT, *const c_char) -> c_int,
    pub rados_conf_set: unsafe extern "C" fn(RadosT, *const c_char, *const c_char) -> c_int,
    pub rados_conf_get: unsafe extern "C" fn(RadosT, *const c_char, *mut c_char, usize) -> c_int,
    pub rados_connect: unsafe extern "C" fn(RadosT) -> c_int,
    pub rados_getaddrs: unsafe extern "C" fn(RadosT, *mut *mut c_char) -> c_int,
    pub rados_buffer_free: unsafe extern "C" fn(*mut c_char),
    pub rados_shutdown: unsafe extern "C" fn(RadosT),
    pub rados_ioctx_create: unsafe extern "C" fn(RadosT, *const c_char, *mut RadosIoctxT) -> c_int,
    pub rados_ioctx_destroy: unsafe extern "C" fn(RadosIoctxT),
    pub rbd_create: unsafe extern "C" fn(RadosIoctxT, *const c_char, u64, *mut c_int) -> c_int,
    pub rbd_remove: unsafe extern "C" fn(RadosIoctxT, *const c_char) -> c_int,
    pub rbd_open:
        unsafe extern "C" fn(RadosIoctxT, *const c_char, *mut RbdImageT, *const c_char) -> c_int,
    pub rbd_close: unsafe extern "C" fn(RbdImageT) -> c_int,
    pub rbd_get_size: unsafe extern "C" fn(RbdImageT, *mut u64) -> c_int,
    pub rbd_stat: unsafe extern "C" fn(RbdImageT, *mut RbdImageInfo, usize) -> c_int,
    pub rbd_resize: unsafe extern "C" fn(RbdImageT, u64) -> c_int,
    pub rbd_get_stripe_count: unsafe extern "C" fn(RbdImageT, *mut u64) -> c_int,
    pub rbd_get_id: unsafe extern "C" fn(RbdImageT, *mut c_char, usize) -> c_int,
    pub rbd_aio_create_completion:
        unsafe extern "C" fn(*mut c_void, RbdCallbackT, *mut RbdCompletionT) -> c_int,
    pub rbd_aio_release: unsafe extern "C" fn(RbdCompletionT),
    pub rbd_aio_get_return_value: unsafe extern "C" fn(RbdCompletionT) -> isize,
    pub rbd_aio_read:
        unsafe extern "C" fn(RbdImageT, u64, usize, *mut c_char, RbdCompletionT) -> c_int,
    pub rbd_aio_write:
        unsafe extern "C" fn(RbdImageT, u64, usize, *const c_char, RbdCompletionT) -> c_int,
    pub rbd_aio_flush: unsafe extern "C" fn(RbdImageT, RbdCompletionT) -> c_int,
    pub rbd_aio_discard: unsafe extern "C" fn(RbdImageT, u64, u64, RbdCompletionT) -> c_int,
    pub rbd_aio_writesame: unsafe extern "C" fn(
        RbdImageT,
        u64,
        usize,
        *const c_char,
        usize,
        RbdCompletionT,
        c_int,
    ) -> c_int,
    pub rbd_aio_compare_and_write: unsafe extern "C" fn(
        RbdImageT,
        u64,
        usize,
        *const c_char,
        *const c_char,
        RbdCompletionT,
        *mut u64,
        c_int,
    ) -> isize,
    pub rbd_diff_iterate2: unsafe extern "C" fn(
        RbdImageT,
        *const c_char,
        u64,
        u64,
        u8,
        u8,
        DiffIterateCallback,
        *mut c_void,
    ) -> c_int,
    pub rbd_update_watch:
        unsafe extern "C" fn(RbdImageT, *mut u64, RbdUpdateCallbackT, *mut c_void) -> c_int,
    pub rbd_update_unwatch: unsafe extern "C" fn(RbdImageT, u64) -> c_int,
    /// Single objects: read/write operations, watch and notify.
    pub objects: crate::sys_object::ObjectApi,
    /// Snapshots and clones.
    pub snaps: crate::sys_snap::SnapApi,
    /// Held only so that the libraries are never closed.
    _libraries: [Library; 2],
}

/// The sonames Debian's `librados2` and `librbd1` install.
pub const RADOS_SONAME: &str = "librados.so.2";
pub const RBD_SONAME: &str = "librbd.so.1";

static SYSTEM: OnceLock<std::result::Result<&'static Api, Error>> = OnceLock::new();

/// The system's librados and librbd, loaded on first use.
pub fn system() -> std::result::Result<&'static Api, Error> {
    SYSTEM
        .get_or_init(|| load(OsStr::new(RADOS_SONAME), OsStr::new(RBD_SONAME)))
        .clone()
}

/// Opens the two libraries at these paths (or sonames) and resolves every
/// symbol. The result is leaked on purpose (see the module's comment);
/// callers load once. On failure nothing is kept: no `Api`, no function
/// pointer; the handles opened so far are closed (their code stays
/// mapped, `RTLD_NODELETE`), and the error names the library and the
/// first symbol it lacks.
pub fn load(rados: &OsStr, rbd: &OsStr) -> std::result::Result<&'static Api, Error> {
    let rados_lib = Opened::open(rados)?;
    let rbd_lib = Opened::open(rbd)?;
    let api = resolve(rados_lib, rbd_lib)?;
    Ok(Box::leak(Box::new(api)))
}

/// An opened library and the name it was opened by (for messages).
pub(crate) struct Opened {
    lib: Library,
    name: String,
}

impl Opened {
    fn open(path: &OsStr) -> std::result::Result<Opened, Error> {
        let name = path.to_string_lossy().into_owned();
        let flags = RTLD_LAZY | RTLD_LOCAL | libc::RTLD_NODELETE;
        // SAFETY: loading runs the library's initialisers. librados and
        // librbd are ordinary C/C++ shared libraries whose initialisers
        // only set up their own static state; they are the same libraries
        // qemu and tgt load. RTLD_LOCAL: their symbols do not replace any
        // of ours; RTLD_NODELETE: closing the handle never unmaps them
        // (see the module comment).
        match unsafe { UnixLibrary::open(Some(path), flags) } {
            Ok(lib) => Ok(Opened {
                lib: lib.into(),
                name,
            }),
            Err(e) => Err(Error::NotInstalled(format!("{name}: {e}"))),
        }
    }

    /// Looks up `name` (NUL-terminated) and copies out its address as `T`.
    ///
    /// # Safety
    /// `T` must be the `unsafe extern "C" fn` type whose signature matches
    /// the C declaration of `name` in the headers named in the module
    /// comment.
    pub(crate) unsafe fn sym<T: Copy>(&self, name: &'static [u8]) -> std::result::Result<T, Error> {
        // SAFETY: the caller guarantees `T` is the symbol's true type; the
        // copied pointer outlives the `Symbol` borrow only because the
        // library is kept in `Api::_libraries` forever (`load` leaks the
        // Api), and a failed load drops every pointer it copied.
        let symbol = unsafe { self.lib.get::<T>(name) };
        match symbol {
            Ok(s) => Ok(*s),
            Err(e) => {
                let shown = String::from_utf8_lossy(name.strip_suffix(b"\0").unwrap_or(name));
                Err(Error::NotInstalled(format!(
                    "symbol {shown} missing from {}: {e}",
                    self.name
                )))
            }
        }
    }
}

/// Resolves one symbol into the field of the same name; the field's type
/// (from the struct declaration above, checked against the headers) is
/// what `Opened::sym` is asked for.
macro_rules! resolve_fields {
    ($lib:expr; $($field:ident),* $(,)?) => {
        ($({
            // SAFETY: the field's declared type was transcribed from the C
            // prototype of the function of the same name in librados.h /
            // librbd.h (Ceph 16), as `sym` requires.
            unsafe { $lib.sym(concat!(stringify!($field), "\0").as_bytes()) }?
        },)*)
    };
}
pub(crate) use resolve_fields;

fn resolve(rados: Opened, rbd: Opened) -> std::result::Result<Api, Error> {
    let (
        rados_create2,
        rados_conf_read_file,
        rados_conf_set,
        rados_conf_get,
        rados_connect,
        rados_shutdown,
        rados_ioctx_create,
        rados_ioctx_destroy,
    ) = resolve_fields!(rados; rados_create2, rados_conf_read_file, rados_conf_set,
        rados_conf_get, rados_connect, rados_shutdown, rados_ioctx_create, rados_ioctx_destroy);
    let (rados_getaddrs, rados_buffer_free) =
        resolve_fields!(rados; rados_getaddrs, rados_buffer_free);
    let (rbd_create, rbd_remove, rbd_open, rbd_close, rbd_get_size, rbd_stat, rbd_resize) = resolve_fields!(rbd; rbd_create, rbd_remove, rbd_open, rbd_close, rbd_get_size,
            rbd_stat, rbd_resize);
    let (
        rbd_aio_create_completion,
        rbd_aio_release,
        rbd_aio_get_return_value,
        rbd_aio_read,
        rbd_aio_write,
        rbd_aio_flush,
        rbd_aio_discard,
        rbd_aio_writesame,
        rbd_aio_compare_and_write,
    ) = resolve_fields!(rbd; rbd_aio_create_completion, rbd_aio_release,
        rbd_aio_get_return_value, rbd_aio_read, rbd_aio_write, rbd_aio_flush,
        rbd_aio_discard, rbd_aio_writesame, rbd_aio_compare_and_write);
    let (rbd_diff_iterate2, rbd_update_watch, rbd_update_unwatch, rbd_get_stripe_count) = resolve_fields!(rbd; rbd_diff_iterate2, rbd_update_watch, rbd_update_unwatch,
            rbd_get_stripe_count);
    let (rbd_get_id,) = resolve_fields!(rbd; rbd_get_id);
    let objects = crate::sys_object::resolve(&rados)?;
    let snaps = crate::sys_snap::resolve(&rbd)?;
    Ok(Api {
        rados_create2,
        rados_conf_read_file,
        rados_conf_set,
        rados_conf_get,
        rados_connect,
        rados_getaddrs,
        rados_buffer_free,
        rados_shutdown,
        rados_ioctx_create,
        rados_ioctx_destroy,
        rbd_create,
        rbd_remove,
        rbd_open,
        rbd_close,
        rbd_get_size,
        rbd_stat,
        rbd_resize,
        rbd_get_stripe_count,
        rbd_get_id,
        rbd_aio_create_completion,
        rbd_aio_release,
        rbd_aio_get_return_value,
        rbd_aio_read,
        rbd_aio_write,
        rbd_aio_flush,
        rbd_aio_discard,
        rbd_aio_writesame,
        rbd_aio_compare_and_write,
        rbd_diff_iterate2,
        rbd_update_watch,
        rbd_update_unwatch,
        objects,
        snaps,
        _libraries: [rados.lib, rbd.lib],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A small C library of Debian's essential set (coreutils needs it)
    /// that neither the test process nor librados and librbd load, without
    /// GNU unique symbols (glibc never unloads a library that has them,
    /// so librados itself could not show the flag's effect).
    const PROBE: &str = "libacl.so.1";

    fn probe_loaded() -> bool {
        // SAFETY: RTLD_NOLOAD loads nothing: it only finds a library that
        // is already loaded (running no initialiser); the handle is closed
        // at once.
        unsafe { UnixLibrary::open(Some(PROBE), RTLD_LAZY | libc::RTLD_NOLOAD) }.is_ok()
    }

    #[test]
    fn a_half_failed_load_leaves_its_first_library_mapped() {
        assert!(
            !probe_loaded(),
            "{PROBE} is already loaded in the test process: the test cannot tell"
        );
        // The first library opens; the symbols are missing from it.
        let err = load(OsStr::new(PROBE), OsStr::new("libc.so.6"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let expected = format!("symbol rados_create2 missing from {PROBE}");
        if !err.contains(&expected) && err.contains(&format!("{PROBE}: ")) {
            // The probe itself did not open.
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{err}");
            let _ = writeln!(std::io::stderr(), "\n*** SKIPPED: {err} ***\n");
            return;
        }
        assert!(err.contains(&expected), "{err}");
        // Its handle was closed, its code not unmapped (RTLD_NODELETE).
        assert!(probe_loaded(), "{PROBE} was unloaded by the failed load");
    }
}
