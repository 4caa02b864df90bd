//! Per-thread shards for what every command of a logical unit writes (its
//! counters, its access gate's hold count).
//!
//! One atomic that every network thread adds to on every command keeps
//! its cache line moving between cores: on many cores that costs more
//! than the command's own work. Each thread instead writes the shard its
//! index names, on a cache line of its own; a reader (a snapshot, an
//! exclusive holder) visits every shard. Threads take indexes in turn, so
//! up to [`count`] threads never share one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The most shards one unit has: beyond this many cores, threads share.
const MAX_SHARDS: usize = 16;

/// A value on a cache line of its own (128 bytes: two 64-byte lines, as
/// adjacent-line prefetchers pull pairs in).
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

/// Shards per unit: the machine's threads of execution, within
/// [`MAX_SHARDS`]; at least one.
pub(crate) fn count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_SHARDS)
    })
}

/// This thread's shard, below [`count`].
#[inline]
pub(crate) fn index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT
            .fetch_add(1, Ordering::Relaxed)
            .checked_rem(count())
            .unwrap_or(0);
    }
    // A thread being torn down (its locals gone) uses shard 0.
    INDEX.try_with(|i| *i).unwrap_or(0)
}

/// [`count`] default values, each on its own cache line.
pub(crate) fn new_set<T: Default>() -> Box<[Padded<T>]> {
    (0..count()).map(|_| Padded::default()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_take_indexes_in_turn_within_the_count() {
        let n = count();
        assert!((1..=MAX_SHARDS).contains(&n));
        let mut seen: Vec<usize> = (0..n)
            .map(|_| std::thread::spawn(index).join().unwrap())
            .collect();
        assert!(seen.iter().all(|i| *i < n));
        // Other tests take indexes meanwhile, so not every one need be
        // distinct; but a thread keeps its own.
        assert_eq!(index(), index());
        seen.dedup();
        assert!(!seen.is_empty());
        assert_eq!(std::mem::align_of::<Padded<u8>>(), 128);
    }
}
