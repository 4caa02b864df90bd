//! How a threaded run shares its work: which thread runs which workers,
//! each thread's share of an I/O count, the default number of threads,
//! and the slice of a LUN a thread verifies.

use crate::engine::Slice;

/// The workers each thread runs, by target: `plan[thread][target]` lists
/// worker numbers. Worker `k` of target `j` is the `j × workers + k`-th
/// pair and goes to thread `pair mod threads`, so a thread's load
/// differs from another's by at most one worker.
pub(crate) fn assign(targets: usize, workers: u32, threads: usize) -> Vec<Vec<Vec<u32>>> {
    let threads = threads.max(1);
    let mut plan = vec![vec![Vec::new(); targets]; threads];
    let mut pair = 0usize;
    for j in 0..targets {
        for k in 0..workers {
            if let Some(t) = plan.get_mut(pair % threads).and_then(|p| p.get_mut(j)) {
                t.push(k);
            }
            pair += 1;
        }
    }
    plan
}

/// A thread of `plan` runs at least one worker.
pub(crate) fn active(plan: &[Vec<Vec<u32>>]) -> Vec<bool> {
    plan.iter()
        .map(|t| t.iter().any(|w| !w.is_empty()))
        .collect()
}

/// Each thread's share of a workload's I/O count: equal parts among the
/// active threads, the first ones taking one more each until the count
/// is used up; the shares add up to the count.
pub(crate) fn split_ios(ios: Option<u64>, active: &[bool]) -> Vec<Option<u64>> {
    let Some(n) = ios else {
        return vec![None; active.len()];
    };
    let count = active.iter().filter(|a| **a).count().max(1) as u64;
    let mut rank = 0u64;
    active
        .iter()
        .map(|a| {
            if !a {
                return Some(0);
            }
            let share = n / count + u64::from(rank < n % count);
            rank += 1;
            Some(share)
        })
        .collect()
}

/// Threads when none are asked for: one per worker, at most one per core.
pub fn default_threads(targets: usize, workers: u32, cores: usize) -> usize {
    (targets.saturating_mul(workers as usize)).clamp(1, cores.max(1))
}

/// The slice thread `t` of `n` drives of a target opened with slice `s`
/// when verifying: its own part of `s`, so that no thread's verification
/// sees another thread's writes.
pub fn thread_slice(s: Slice, t: u32, n: u32) -> Slice {
    let n = n.max(1);
    Slice {
        index: s.index.saturating_mul(n).saturating_add(t.min(n - 1)),
        count: s.count.max(1).saturating_mul(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_worker_runs_once_and_threads_are_balanced() {
        for (targets, workers, threads) in [(1, 4, 2), (3, 1, 2), (2, 3, 4), (1, 1, 4)] {
            let plan = assign(targets, workers, threads);
            assert_eq!(plan.len(), threads);
            for j in 0..targets {
                let mut ks: Vec<u32> = plan.iter().flat_map(|t| t[j].clone()).collect();
                ks.sort_unstable();
                assert_eq!(ks, (0..workers).collect::<Vec<_>>(), "{plan:?}");
            }
            let loads: Vec<usize> = plan.iter().map(|t| t.iter().map(Vec::len).sum()).collect();
            let (lo, hi) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
            assert!(hi - lo <= 1, "{loads:?}");
        }
        assert_eq!(active(&assign(1, 1, 4)), [true, false, false, false]);
    }

    #[test]
    fn io_shares_add_up() {
        let shares = split_ios(Some(10), &[true, false, true, true]);
        assert_eq!(shares, [Some(4), Some(0), Some(3), Some(3)]);
        assert_eq!(split_ios(None, &[true, true]), [None, None]);
    }

    #[test]
    fn default_is_one_per_worker_up_to_the_cores() {
        assert_eq!(default_threads(1, 1, 2), 1);
        assert_eq!(default_threads(2, 4, 2), 2);
        assert_eq!(default_threads(0, 4, 2), 1);
    }

    #[test]
    fn thread_slices_are_disjoint_parts_of_a_session_slice() {
        let s = Slice { index: 1, count: 3 };
        let parts: Vec<Slice> = (0..2).map(|t| thread_slice(s, t, 2)).collect();
        assert_eq!(
            parts,
            [Slice { index: 2, count: 6 }, Slice { index: 3, count: 6 }]
        );
        assert_eq!(thread_slice(Slice::WHOLE, 0, 1), Slice::WHOLE);
    }
}
