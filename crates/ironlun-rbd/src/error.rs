//! What can go wrong, with the librados/librbd call that said so.

use std::io;

/// The errors of this crate. Clone, so the loader's one outcome can be
/// handed to every caller.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// librbd or librados could not be loaded (or lacks a symbol).
    #[error("librbd is not installed ({0}): apt install librbd1")]
    NotInstalled(String),
    /// The ceph.conf named by `conf=` is missing, or none was named and
    /// librados found none where it looks: which, and what to do.
    #[error("{0}")]
    ConfMissing(String),
    /// A C call returned a negative errno.
    #[error("{call}: {}", io::Error::from_raw_os_error(*.errno))]
    Ceph {
        /// The C function that failed.
        call: &'static str,
        /// The positive errno (librados/librbd return `-errno`).
        errno: i32,
    },
    /// An argument this crate refuses before calling into librbd.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A read came back shorter than asked: it reached past the image's
    /// end (the image shrank under it).
    #[error("read of {len} bytes at {offset} returned {got}: past the image's end")]
    ShortRead {
        /// Where the read started.
        offset: u64,
        /// Bytes asked for.
        len: usize,
        /// Bytes librbd returned.
        got: usize,
    },
    /// A completion's state was lost without its callback running, or a
    /// blocking helper task ended early (runtime shutting down).
    #[error("the operation was abandoned: {0}")]
    Abandoned(&'static str),
}

impl Error {
    /// The errno of a failed C call, if this is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Ceph { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    /// Turns a C return value into `Ok(value)` when it is not negative.
    pub(crate) fn check(call: &'static str, ret: i64) -> Result<u64> {
        if ret < 0 {
            let errno = i32::try_from(ret.unsigned_abs()).unwrap_or(i32::MAX);
            Err(Error::Ceph { call, errno })
        } else {
            Ok(ret.unsigned_abs())
        }
    }
}

/// This crate's result.
pub type Result<T> = std::result::Result<T, Error>;
