//! # ironlun-rbd: Ceph RBD images through librbd's asynchronous API
//!
//! **Owns:** loading librados and librbd at run time ([`Library`]), the
//! cluster connection ([`Cluster`], [`ClusterConfig`]), pools
//! ([`Pool`]) and open images ([`Image`]): asynchronous read, write,
//! flush, discard, write-same and compare-and-write whose completions
//! reach the async runtime without a thread per I/O or polling, the
//! allocated extents (`rbd_diff_iterate2`) and resize notifications;
//! single objects beside the images ([`RadosObject`]: versioned reads,
//! compare-and-swap writes, watch and notify) for state the gateways of
//! a group share.
//!
//! **Must not know:** SCSI, iSCSI, LUNs or how ironlun maps them onto an
//! image; that belongs to the backend that uses this crate.
//!
//! ## Why the libraries are loaded, not linked
//!
//! ironlun must build and run on a machine without Ceph
//! (`cargo run --release -- lab` on a fresh Debian). The few functions
//! used are declared by hand in `sys` (checked against Ceph 16's
//! headers) and resolved with `dlopen` on first use; without librbd the
//! error says to `apt install librbd1`.
//!
//! ## Where the `unsafe` is
//!
//! Only in `sys` (symbol lookup) and `ffi` (every call into the C
//! libraries, and the completion state librbd owns while an operation is
//! in flight); each block carries its soundness argument. The rest of
//! the crate denies unsafe code.

#![deny(unsafe_code)]
// Every unsafe block (in `sys` and `ffi`) must say why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

mod args;
mod cluster;
mod error;
mod extents;
#[allow(unsafe_code)]
mod ffi;
#[allow(unsafe_code)]
mod ffi_object;
#[allow(unsafe_code)]
mod ffi_snap;
mod image;
#[allow(unsafe_code)]
mod lock;
mod miscompare;
mod object;
#[allow(unsafe_code)]
mod sys;
#[allow(unsafe_code)]
mod sys_object;
#[allow(unsafe_code)]
mod sys_snap;

pub use args::{MAX_IO_BYTES, MAX_WRITE_SAME_BYTES};
pub use cluster::{Cluster, ClusterConfig, Library, Pool};
pub use error::{Error, Result};
pub use extents::Extents;
pub use ffi_snap::{SnapInfo, MAX_SNAPSHOTS};
pub use image::{CompareOutcome, Image, ImageInfo, ResizeWatch, DEFAULT_EXTENT_LIMIT};
pub use lock::LockOwners;
pub use object::{
    NotifyOutcome, ObjectWatch, RadosObject, Versioned, WatchEvent, WriteOutcome,
    MAX_NOTIFY_PAYLOAD, MAX_OBJECT_NAME, MAX_WATCH_EVENTS,
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_missing_library_says_what_to_install() {
        // SAFETY: nothing is loaded from paths that do not exist.
        #[allow(unsafe_code)]
        let err = unsafe {
            Library::load_from(
                Path::new("/nonexistent/librados.so.2"),
                Path::new("/nonexistent/librbd.so.1"),
            )
        }
        .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::NotInstalled(_)), "{msg}");
        assert!(msg.contains("librbd is not installed"), "{msg}");
        assert!(msg.contains("apt install librbd1"), "{msg}");
        assert!(msg.contains("/nonexistent/librados.so.2"), "{msg}");
    }

    #[test]
    fn a_library_without_the_symbols_is_refused_by_name() {
        // libc loads but has none of librados' functions.
        // SAFETY: libc exports none of the names looked up, so no symbol
        // is taken as a librados function: the load fails at the first.
        #[allow(unsafe_code)]
        let err = unsafe { Library::load_from(Path::new("libc.so.6"), Path::new("libc.so.6")) }
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("symbol rados_create2 missing from libc.so.6"),
            "{msg}"
        );
        assert!(msg.contains("apt install librbd1"), "{msg}");
    }

    #[test]
    fn errno_is_shown_with_the_call() {
        let err = Error::Ceph {
            call: "rbd_open",
            errno: 2,
        };
        assert_eq!(err.errno(), Some(2));
        assert!(
            err.to_string()
                .starts_with("rbd_open: No such file or directory"),
            "{err}"
        );
    }
}
