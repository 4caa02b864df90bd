//! How a threaded run shares its work: which thread runs which workers,
//! each thread's share of an I/O count, the default number of threads,
//! and the slice of a LUN a thread verifies.

use crate::engine::Slice;

/// The workers each thread runs, by target: `plan[thread][target]` lists
/// worker numbers. Worker `k` of target `j` goes to thread
/// `(j × stride + k) mod threads`, `stride` being the most workers any
/// workload of the run has per target: with that many, a thread's load
/// differs from another's by at most one worker, and with fewer a worker
/// stays on a thread that has its target open ([`openings`]).
pub(crate) fn assign(
    targets: usize,
    workers: u32,
    threads: usize,
    stride: u32,
) -> Vec<Vec<Vec<u32>>> {
    let threads = threads.max(1);
    let mut plan = vec![vec![Vec::new(); targets]; threads];
    for j in 0..targets {
        for k in 0..workers.min(stride) {
            let t = (j * stride as usize + k as usize) % threads;
            if let Some(t) = plan.get_mut(t).and_then(|p| p.get_mut(j)) {
                t.push(k);
            }
        }
    }
    plan
}

/// One target a thread opens: its number, and the thread's rank among
/// the `of` threads that open it (its verification slice).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opening {
    pub target: usize,
    pub rank: u32,
    pub of: u32,
}

/// The targets each thread opens: those it runs a worker of when every
/// target has `stride` workers. A target with one worker is opened by one
/// thread only, so `--sessions N` opens N sessions whatever the threads.
pub(crate) fn openings(targets: usize, stride: u32, threads: usize) -> Vec<Vec<Opening>> {
    let plan = assign(targets, stride, threads, stride);
    let mut out = vec![Vec::new(); plan.len()];
    for j in 0..targets {
        let on: Vec<usize> = (0..plan.len())
            .filter(|&t| {
                plan.get(t)
                    .and_then(|p| p.get(j))
                    .is_some_and(|w| !w.is_empty())
            })
            .collect();
        for (rank, &t) in on.iter().enumerate() {
            if let Some(o) = out.get_mut(t) {
                o.push(Opening {
                    target: j,
                    rank: rank as u32,
                    of: on.len() as u32,
                });
            }
        }
    }
    out
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
            let plan = assign(targets, workers, threads, workers);
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
        assert_eq!(active(&assign(1, 1, 4, 1)), [true, false, false, false]);
    }

    #[test]
    fn threads_open_only_the_targets_they_run_workers_of() {
        // 16 single-worker sessions on 2 threads: 8 each, none twice.
        let o = openings(16, 1, 2);
        assert_eq!(o[0].len() + o[1].len(), 16);
        assert!(o.iter().flatten().all(|x| x.of == 1 && x.rank == 0));
        // One target, four workers, two threads: both open it, each its
        // own rank.
        let o = openings(1, 4, 2);
        assert_eq!(
            o[0],
            [Opening {
                target: 0,
                rank: 0,
                of: 2
            }]
        );
        assert_eq!(
            o[1],
            [Opening {
                target: 0,
                rank: 1,
                of: 2
            }]
        );
        // A workload with fewer workers than the stride only uses threads
        // that have its targets open.
        let open = openings(3, 4, 4);
        let plan = assign(3, 2, 4, 4);
        for (t, p) in plan.iter().enumerate() {
            for (j, ws) in p.iter().enumerate() {
                if !ws.is_empty() {
                    assert!(open[t].iter().any(|x| x.target == j), "{t} {j}");
                }
            }
        }
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
