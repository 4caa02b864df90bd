//! [`DataOutBuffer`]: the data an initiator sent for one command (SAM-5
//! calls it the Data-Out Buffer).

use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};

/// The data an initiator sent for one command (SCSI Data-Out), kept in the
/// pieces the PDUs carried: each segment is a slice of the buffer the
/// driver received it into. A write hands the segments to the backend as
/// they are (`pwritev`), so a command that arrived in several PDUs is
/// never joined; a consumer that needs one slice (a parameter list, a
/// compare) asks for [`DataOutBuffer::contiguous`], which joins at most once.
#[derive(Clone, Default)]
pub struct DataOutBuffer {
    segments: Segments,
    len: usize,
    /// The segments joined, made on the first [`DataOutBuffer::contiguous`] call
    /// when there are several.
    joined: OnceLock<Bytes>,
}

#[derive(Clone, Default)]
enum Segments {
    #[default]
    Empty,
    One(Bytes),
    Many(Vec<Bytes>),
}

impl DataOutBuffer {
    pub fn new() -> DataOutBuffer {
        DataOutBuffer::default()
    }

    /// Data copied from a slice (tests, harnesses).
    pub fn copy_from_slice(data: &[u8]) -> DataOutBuffer {
        DataOutBuffer::from(Bytes::copy_from_slice(data))
    }

    /// Data in these segments, in order (empty ones are dropped).
    pub fn from_segments(segments: impl IntoIterator<Item = Bytes>) -> DataOutBuffer {
        let mut d = DataOutBuffer::new();
        for s in segments {
            d.push(s);
        }
        d
    }

    /// Appends a segment.
    pub fn push(&mut self, segment: Bytes) {
        if segment.is_empty() {
            return;
        }
        self.joined.take();
        self.len += segment.len();
        self.segments = match std::mem::take(&mut self.segments) {
            Segments::Empty => Segments::One(segment),
            Segments::One(first) => Segments::Many(vec![first, segment]),
            Segments::Many(mut v) => {
                v.push(segment);
                Segments::Many(v)
            }
        };
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segments, in order, none of them empty.
    pub fn segments(&self) -> &[Bytes] {
        match &self.segments {
            Segments::Empty => &[],
            Segments::One(b) => std::slice::from_ref(b),
            Segments::Many(v) => v,
        }
    }

    /// All the data as one slice: the segment itself when there is one,
    /// otherwise the segments joined (once; later calls reuse the copy).
    pub fn contiguous(&self) -> &[u8] {
        match &self.segments {
            Segments::Empty => &[],
            Segments::One(b) => b,
            Segments::Many(v) => self.joined.get_or_init(|| {
                let mut buf = BytesMut::with_capacity(self.len);
                for s in v {
                    buf.extend_from_slice(s);
                }
                buf.freeze()
            }),
        }
    }

    /// The pieces of the segments that hold the bytes in `range` (clamped
    /// to the data), in order and without copying.
    pub fn slices(&self, range: Range<usize>) -> Slices<'_> {
        let end = range.end.min(self.len);
        Slices {
            segments: self.segments(),
            skip: range.start.min(end),
            left: end.saturating_sub(range.start),
        }
    }
}

/// Iterator over the pieces of a [`DataOutBuffer`] within a byte range.
pub struct Slices<'a> {
    segments: &'a [Bytes],
    /// Bytes still to skip before the range starts.
    skip: usize,
    /// Bytes of the range not yet yielded.
    left: usize,
}

impl<'a> Iterator for Slices<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        while self.left > 0 {
            let (first, rest) = self.segments.split_first()?;
            self.segments = rest;
            let seg: &'a [u8] = first;
            if self.skip >= seg.len() {
                self.skip -= seg.len();
                continue;
            }
            let start = self.skip;
            self.skip = 0;
            let n = (seg.len() - start).min(self.left);
            self.left -= n;
            return seg.get(start..start + n);
        }
        None
    }
}

impl From<Bytes> for DataOutBuffer {
    fn from(b: Bytes) -> DataOutBuffer {
        let mut d = DataOutBuffer::new();
        d.push(b);
        d
    }
}

impl From<Vec<u8>> for DataOutBuffer {
    fn from(v: Vec<u8>) -> DataOutBuffer {
        DataOutBuffer::from(Bytes::from(v))
    }
}

impl PartialEq for DataOutBuffer {
    fn eq(&self, other: &DataOutBuffer) -> bool {
        self.len == other.len
            && self
                .slices(0..self.len)
                .flatten()
                .eq(other.slices(0..other.len).flatten())
    }
}

impl Eq for DataOutBuffer {}

impl fmt::Debug for DataOutBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DataOutBuffer({} bytes in {} segments)",
            self.len,
            self.segments().len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> DataOutBuffer {
        DataOutBuffer::from_segments([
            Bytes::from_static(b"abc"),
            Bytes::new(),
            Bytes::from_static(b"defg"),
            Bytes::from_static(b"h"),
        ])
    }

    #[test]
    fn segments_are_kept_and_empty_ones_dropped() {
        let d = three();
        assert_eq!(d.len(), 8);
        assert_eq!(d.segments().len(), 3);
        assert_eq!(d.contiguous(), b"abcdefgh");
        // The join is made once and reused.
        assert_eq!(d.contiguous().as_ptr(), d.contiguous().as_ptr());
        assert!(DataOutBuffer::new().is_empty());
        assert_eq!(DataOutBuffer::new().contiguous(), b"");
        assert!(DataOutBuffer::from(Bytes::new()).segments().is_empty());
    }

    #[test]
    fn one_segment_is_its_own_contiguous_view() {
        let b = Bytes::from_static(b"xyz");
        let d = DataOutBuffer::from(b.clone());
        assert_eq!(d.contiguous().as_ptr(), b.as_ptr());
    }

    #[test]
    fn slices_cover_exactly_the_range() {
        let d = three();
        let all = |r: Range<usize>| -> Vec<&[u8]> { d.slices(r).collect() };
        assert_eq!(all(0..8), vec![&b"abc"[..], b"defg", b"h"]);
        assert_eq!(all(2..5), vec![&b"c"[..], b"de"]);
        assert_eq!(all(3..7), vec![&b"defg"[..]]);
        assert_eq!(all(7..100), vec![&b"h"[..]]);
        assert!(all(8..9).is_empty());
        assert!(all(5..5).is_empty());
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = 6..2;
        assert!(all(backwards).is_empty());
        // Every range of every length matches the joined bytes.
        let joined = d.contiguous().to_vec();
        for s in 0..=8 {
            for e in s..=9 {
                let got: Vec<u8> = d.slices(s..e).flatten().copied().collect();
                assert_eq!(got, joined[s..e.min(8)], "{s}..{e}");
            }
        }
    }

    #[test]
    fn equality_ignores_how_the_data_was_split() {
        assert_eq!(three(), DataOutBuffer::copy_from_slice(b"abcdefgh"));
        assert_ne!(three(), DataOutBuffer::copy_from_slice(b"abcdefgX"));
        assert_ne!(three(), DataOutBuffer::copy_from_slice(b"abcdefg"));
    }

    #[test]
    fn push_after_a_join_drops_the_stale_join() {
        let mut d = three();
        assert_eq!(d.contiguous(), b"abcdefgh");
        d.push(Bytes::from_static(b"ij"));
        assert_eq!(d.contiguous(), b"abcdefghij");
    }
}
