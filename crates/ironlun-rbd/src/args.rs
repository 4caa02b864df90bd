//! Argument checks made before anything reaches librbd: librbd would
//! refuse some of these itself, but others (an offset that wraps, a
//! buffer larger than the crate's limit) it would take on trust.

use std::ffi::CString;

use crate::error::{Error, Result};

/// The most bytes one read, write, write-same or compare-and-write may
/// carry: a read allocates this much, so the limit bounds memory. iSCSI
/// transfers are far smaller (ironlun's MaxBurstLength and the LUN's
/// maximum transfer length).
pub const MAX_IO_BYTES: usize = 1 << 30;

fn invalid(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

/// `offset + len` must not wrap.
pub fn range(offset: u64, len: u64) -> Result<()> {
    match offset.checked_add(len) {
        Some(_) => Ok(()),
        None => Err(invalid(format!("offset {offset} + length {len} overflows"))),
    }
}

/// A read or write of `len` bytes at `offset`.
pub fn io(offset: u64, len: usize) -> Result<()> {
    if len > MAX_IO_BYTES {
        return Err(invalid(format!(
            "{len} bytes is over the {MAX_IO_BYTES}-byte limit"
        )));
    }
    range(offset, len as u64)
}

/// The most bytes one write-same may cover: librbd refuses (EINVAL) a
/// length over `INT_MAX` (`Image::writesame`, Ceph 16).
pub const MAX_WRITE_SAME_BYTES: u64 = i32::MAX as u64;

/// WRITE SAME of `pattern_len`-byte copies over `len` bytes: librbd needs
/// a non-empty pattern that divides the length and a length of at most
/// [`MAX_WRITE_SAME_BYTES`] (it answers EINVAL otherwise), and the length
/// must fit in `size_t`.
pub fn write_same(offset: u64, len: u64, pattern_len: usize) -> Result<usize> {
    if pattern_len == 0 {
        return Err(invalid("write_same: empty pattern".into()));
    }
    if pattern_len > MAX_IO_BYTES {
        return Err(invalid(format!(
            "write_same: {pattern_len}-byte pattern is over the limit"
        )));
    }
    if len % pattern_len as u64 != 0 {
        return Err(invalid(format!(
            "write_same: length {len} is not a multiple of the {pattern_len}-byte pattern"
        )));
    }
    if len > MAX_WRITE_SAME_BYTES {
        return Err(invalid(format!(
            "write_same: length {len} is over librbd's {MAX_WRITE_SAME_BYTES}-byte limit"
        )));
    }
    range(offset, len)?;
    usize::try_from(len).map_err(|_| invalid(format!("write_same: length {len} too large")))
}

/// COMPARE AND WRITE: both buffers the same, non-zero length.
pub fn compare_and_write(offset: u64, compare_len: usize, data_len: usize) -> Result<()> {
    if compare_len != data_len {
        return Err(invalid(format!(
            "compare_and_write: {compare_len} bytes to compare but {data_len} to write"
        )));
    }
    if data_len == 0 {
        return Err(invalid("compare_and_write: nothing to compare".into()));
    }
    io(offset, data_len)
}

/// A name handed to C: no NUL inside.
pub fn c_string(what: &str, value: &str) -> Result<CString> {
    CString::new(value).map_err(|_| invalid(format!("{what} {value:?} contains a NUL byte")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_ranges_are_refused() {
        assert!(range(u64::MAX, 1).is_err());
        assert!(range(u64::MAX - 1, 1).is_ok());
        assert!(io(u64::MAX - 10, 11).is_err());
    }

    #[test]
    fn io_over_the_limit_is_refused() {
        assert!(io(0, MAX_IO_BYTES).is_ok());
        let err = io(0, MAX_IO_BYTES + 1).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }

    #[test]
    fn write_same_needs_a_pattern_that_divides_the_length() {
        assert!(write_same(0, 4096, 0).is_err());
        assert!(write_same(0, 4097, 512).is_err());
        assert_eq!(write_same(0, 8192, 512).ok(), Some(8192));
        assert!(write_same(u64::MAX - 511, 512, 512).is_err());
        let top = MAX_WRITE_SAME_BYTES / 512 * 512;
        assert_eq!(write_same(0, top, 512).ok(), usize::try_from(top).ok());
        assert!(write_same(0, top + 512, 512).is_err());
    }

    #[test]
    fn compare_and_write_needs_equal_non_empty_buffers() {
        assert!(compare_and_write(0, 512, 1024).is_err());
        assert!(compare_and_write(0, 0, 0).is_err());
        assert!(compare_and_write(0, 512, 512).is_ok());
    }

    #[test]
    fn names_with_nul_are_refused() {
        assert!(c_string("image", "a\0b").is_err());
        assert_eq!(c_string("image", "disk").ok().as_deref(), Some(c"disk"));
    }
}
