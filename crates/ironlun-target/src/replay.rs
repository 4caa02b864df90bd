//! Mutual CHAP challenges from recent logins. An initiator draws a fresh
//! random challenge for every login (RFC 1994 §2.3: each challenge value
//! should be unique); one that comes back is a replay, and answering it
//! would hand out a response that was already seen on the wire.

use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};

/// Challenges remembered, newest first out last.
pub const REMEMBERED_CHALLENGES: usize = 4096;

/// A bounded memory of challenge fingerprints (keyed hashes: the
/// per-process random key keeps a peer from choosing colliding values).
#[derive(Debug)]
pub struct ChallengeMemory {
    hasher: RandomState,
    order: VecDeque<u64>,
    seen: HashSet<u64>,
    limit: usize,
}

impl ChallengeMemory {
    pub fn new(limit: usize) -> Self {
        ChallengeMemory {
            hasher: RandomState::new(),
            order: VecDeque::new(),
            seen: HashSet::new(),
            limit: limit.max(1),
        }
    }

    /// Records `challenge`; true if it was already among the remembered.
    pub fn seen_before(&mut self, challenge: &[u8]) -> bool {
        let h = self.hasher.hash_one(challenge);
        if self.seen.contains(&h) {
            return true;
        }
        if self.order.len() >= self.limit {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.order.push_back(h);
        self.seen.insert(h);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_is_seen_once_and_memory_is_bounded() {
        let mut m = ChallengeMemory::new(3);
        assert!(!m.seen_before(b"first challenge."));
        assert!(m.seen_before(b"first challenge."));
        for c in [b"second".as_slice(), b"third", b"fourth"] {
            assert!(!m.seen_before(c));
        }
        assert_eq!((m.order.len(), m.seen.len()), (3, 3));
        // The oldest was forgotten; the newer ones are still known.
        assert!(!m.seen_before(b"first challenge."));
        assert!(m.seen_before(b"fourth"));
    }
}
