//! The allocated extents `rbd_diff_iterate2` reports, merged and bounded.

use std::ops::Range;

/// Allocated byte ranges of an image within the range asked about, in
/// order, adjacent ranges merged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extents {
    /// The allocated ranges, sorted and disjoint.
    pub ranges: Vec<Range<u64>>,
    /// True when the limit on ranges stopped the walk: what lies after
    /// the last range was not examined.
    pub truncated: bool,
}

/// Collects the callback's reports: keeps extents that exist, clipped to
/// the range asked about, merges adjacent ones, and stops at `limit`.
#[derive(Debug)]
pub(crate) struct Collector {
    within: Range<u64>,
    limit: usize,
    out: Extents,
}

impl Collector {
    pub(crate) fn new(within: Range<u64>, limit: usize) -> Collector {
        Collector {
            within,
            limit,
            out: Extents::default(),
        }
    }

    /// One report: `exists` false is a hole. Returns false when the limit
    /// is reached and the walk should stop.
    pub(crate) fn add(&mut self, offset: u64, len: u64, exists: bool) -> bool {
        if !exists || len == 0 {
            return true;
        }
        let start = offset.max(self.within.start);
        let end = offset.saturating_add(len).min(self.within.end);
        if start >= end {
            return true;
        }
        if let Some(last) = self.out.ranges.last_mut() {
            if last.end >= start {
                last.end = last.end.max(end);
                return true;
            }
        }
        if self.out.ranges.len() >= self.limit {
            self.out.truncated = true;
            return false;
        }
        self.out.ranges.push(start..end);
        true
    }

    pub(crate) fn finish(self) -> Extents {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_are_dropped_and_neighbours_merged() {
        let mut c = Collector::new(0..1 << 20, 8);
        assert!(c.add(0, 4096, true));
        assert!(c.add(4096, 4096, true));
        assert!(c.add(8192, 4096, false));
        assert!(c.add(65536, 512, true));
        let e = c.finish();
        assert_eq!(e.ranges, vec![0..8192, 65536..66048]);
        assert!(!e.truncated);
    }

    #[test]
    fn reports_are_clipped_to_the_range_asked_about() {
        let mut c = Collector::new(1000..5000, 8);
        assert!(c.add(0, 4096, true));
        assert!(c.add(4096, 4096, true));
        assert!(c.add(8192, 4096, true));
        assert_eq!(c.finish().ranges, vec![1000..5000]);
    }

    #[test]
    fn the_limit_stops_the_walk_and_says_so() {
        let mut c = Collector::new(0..u64::MAX, 2);
        assert!(c.add(0, 1, true));
        assert!(c.add(10, 1, true));
        assert!(c.add(11, 1, true), "merging needs no new range");
        assert!(!c.add(20, 1, true));
        let e = c.finish();
        assert_eq!(e.ranges, vec![0..1, 10..12]);
        assert!(e.truncated);
    }
}
