//! Where a failed compare-and-write differed, as an offset into the
//! request.
//!
//! librbd is meant to report the image offset of the first differing
//! byte (tcmu-runner subtracts the request's offset from it). Ceph 16's
//! librbd does not: the OSD's cmpext answers with an offset into the
//! compare buffer, and `ObjectCompareAndWriteRequest::filter_write_result`
//! maps that number as if it were an offset into the object, so the value
//! is the object's first byte plus the offset into the buffer (measured
//! here: a request at object start + 4096 differing at its byte 100 came
//! back as object start + 100). A compare-and-write never crosses an
//! object, so both readings can be undone; when both fit the request and
//! disagree, the caller reads the data back to decide.

/// The request's offset into the image, its length and its object size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request {
    pub offset: u64,
    pub len: u64,
    pub object_size: u64,
}

/// What the reported number can mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    /// One offset into the request fits.
    Exact(u64),
    /// Both readings fit and differ: the image offset reading first, then
    /// the object-relative one.
    Either(u64, u64),
    /// Neither fits the request.
    Neither,
}

/// Interprets librbd's `mismatch_off` for `req`.
pub(crate) fn interpret(reported: u64, req: Request) -> Reading {
    let object_start = match req.object_size {
        0 => req.offset,
        size => req.offset - req.offset % size,
    };
    let fits = |start: u64| reported.checked_sub(start).filter(|o| *o < req.len);
    match (fits(req.offset), fits(object_start)) {
        (Some(a), Some(b)) if a == b => Reading::Exact(a),
        (Some(a), Some(b)) => Reading::Either(a, b),
        (Some(a), None) => Reading::Exact(a),
        (None, Some(b)) => Reading::Exact(b),
        (None, None) => Reading::Neither,
    }
}

/// The first offset at which `image` (read back) differs from `compare`.
pub(crate) fn first_difference(image: &[u8], compare: &[u8]) -> Option<u64> {
    let same = image
        .iter()
        .zip(compare)
        .take_while(|(a, b)| a == b)
        .count();
    (same < compare.len()).then_some(same as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OBJ: u64 = 1 << 22;

    fn req(offset: u64, len: u64) -> Request {
        Request {
            offset,
            len,
            object_size: OBJ,
        }
    }

    #[test]
    fn ceph16_object_relative_value_is_undone() {
        // Measured on Ceph 16.2.15: request at object 9 + 4096, byte 100.
        let r = Request {
            offset: 9 * 65536 + 4096,
            len: 512,
            object_size: 65536,
        };
        assert_eq!(interpret(9 * 65536 + 100, r), Reading::Exact(100));
    }

    #[test]
    fn image_offset_value_is_taken_as_is() {
        assert_eq!(
            interpret(3 * OBJ + 8192 + 7, req(3 * OBJ + 8192, 512)),
            Reading::Exact(7)
        );
    }

    #[test]
    fn at_an_object_start_both_readings_agree() {
        assert_eq!(
            interpret(2 * OBJ + 300, req(2 * OBJ, 512)),
            Reading::Exact(300)
        );
    }

    #[test]
    fn overlapping_readings_are_left_to_the_caller() {
        // Request 512 bytes into the object, 4096 long; reported obj+1000:
        // image reading 488, object reading 1000.
        assert_eq!(
            interpret(OBJ + 1000, req(OBJ + 512, 4096)),
            Reading::Either(488, 1000)
        );
    }

    #[test]
    fn values_outside_the_request_fit_neither() {
        assert_eq!(interpret(5, req(OBJ, 512)), Reading::Neither);
        assert_eq!(interpret(OBJ + 9000, req(OBJ + 512, 512)), Reading::Neither);
    }

    #[test]
    fn first_difference_finds_the_byte() {
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 4]), Some(2));
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 3]), None);
        assert_eq!(first_difference(&[1], &[1, 2]), Some(1));
    }
}
