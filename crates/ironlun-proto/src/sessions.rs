//! The target's session table: which sessions exist, the TSIH each was
//! given, and session reinstatement. Pure data: the daemon holds it behind
//! its lock and keeps what it needs per session in `V`.
//!
//! - A session is named by its initiator, its ISID and its target (the
//!   I_T nexus; RFC 7143 §11.12.5 on the ISID's role). Names compare
//!   without regard to case (§4.2.7.1: iSCSI names are normalised to
//!   lower case). A discovery session has no target.
//! - A leading login (TSIH 0) with the name of a live session replaces it:
//!   session reinstatement (§6.3.5). The old session comes back to the
//!   caller, who closes it.
//! - The TSIH is non-zero and unique among live sessions (§11.12.6). They
//!   are handed out in turn, so a TSIH is not reused while newer ones
//!   remain unused.

use std::collections::HashMap;

/// The name of a session (its I_T nexus).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionName {
    pub initiator: String,
    pub isid: [u8; 6],
    /// `None` for a discovery session.
    pub target: Option<String>,
}

impl SessionName {
    fn same(&self, other: &SessionName) -> bool {
        let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        self.isid == other.isid
            && eq(&self.initiator, &other.initiator)
            && match (&self.target, &other.target) {
                (Some(a), Some(b)) => eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }

    pub fn is_discovery(&self) -> bool {
        self.target.is_none()
    }
}

/// A session let in by [`SessionTable::admit`].
#[derive(Debug, PartialEq, Eq)]
pub struct Admitted<V> {
    pub tsih: u16,
    /// The session it reinstated (RFC 7143 §6.3.5), for the caller to
    /// close.
    pub replaced: Option<V>,
}

/// Too many sessions: the login fails with OUT OF RESOURCES (RFC 7143
/// §11.13.5, status 0x0302).
#[derive(Debug, PartialEq, Eq)]
pub struct TableFull<V> {
    /// A session the login replaced before it was refused: it is gone
    /// from the table all the same (the initiator asked to replace it).
    pub replaced: Option<V>,
}

/// Live sessions by TSIH, at most `max` of them.
pub struct SessionTable<V> {
    by_tsih: HashMap<u16, (SessionName, V)>,
    next_tsih: u16,
    max: usize,
}

impl<V> SessionTable<V> {
    pub fn new(max: usize) -> Self {
        SessionTable {
            by_tsih: HashMap::new(),
            next_tsih: 1,
            max,
        }
    }

    /// A leading login's new session: replaces a live session of the same
    /// name, then takes the next free TSIH if the table has room.
    pub fn admit(&mut self, name: SessionName, value: V) -> Result<Admitted<V>, TableFull<V>> {
        let old = self
            .by_tsih
            .iter()
            .find(|(_, (n, _))| n.same(&name))
            .map(|(tsih, _)| *tsih);
        let replaced = old.and_then(|t| self.by_tsih.remove(&t)).map(|(_, v)| v);
        if self.by_tsih.len() >= self.max {
            return Err(TableFull { replaced });
        }
        let tsih = self.free_tsih();
        self.by_tsih.insert(tsih, (name, value));
        Ok(Admitted { tsih, replaced })
    }

    /// The next TSIH in turn that is non-zero and unused. The table never
    /// holds 65,535 sessions (`max` is below that), so one is found.
    fn free_tsih(&mut self) -> u16 {
        let mut tsih = self.next_tsih;
        for _ in 0..=u16::MAX {
            if tsih != 0 && !self.by_tsih.contains_key(&tsih) {
                break;
            }
            tsih = tsih.wrapping_add(1);
        }
        self.next_tsih = tsih.wrapping_add(1);
        tsih
    }

    /// Removes the session with this TSIH if `is_it` says it is still the
    /// one the caller means (a TSIH may have been given to a newer
    /// session after a reinstatement removed the caller's).
    pub fn remove_if(&mut self, tsih: u16, is_it: impl Fn(&V) -> bool) -> Option<V> {
        if !self.by_tsih.get(&tsih).is_some_and(|(_, v)| is_it(v)) {
            return None;
        }
        self.by_tsih.remove(&tsih).map(|(_, v)| v)
    }

    pub fn get(&self, tsih: u16) -> Option<(&SessionName, &V)> {
        self.by_tsih.get(&tsih).map(|(n, v)| (n, v))
    }

    /// Every live session, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u16, &SessionName, &V)> {
        self.by_tsih.iter().map(|(t, (n, v))| (*t, n, v))
    }

    /// The sessions of one target (names compare without regard to case).
    pub fn of_target<'a>(&'a self, target: &'a str) -> impl Iterator<Item = &'a V> + 'a {
        self.by_tsih.values().filter_map(move |(n, v)| {
            n.target
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case(target))
                .then_some(v)
        })
    }

    pub fn len(&self) -> usize {
        self.by_tsih.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_tsih.is_empty()
    }

    /// Live sessions: (normal, discovery).
    pub fn counts(&self) -> (usize, usize) {
        let discovery = self
            .by_tsih
            .values()
            .filter(|(n, _)| n.is_discovery())
            .count();
        (self.by_tsih.len().saturating_sub(discovery), discovery)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(initiator: &str, isid: u8, target: Option<&str>) -> SessionName {
        SessionName {
            initiator: initiator.into(),
            isid: [0x80, 0, 0, 0, 0, isid],
            target: target.map(Into::into),
        }
    }

    const T: Option<&str> = Some("iqn.2026-11.test:t");

    #[test]
    fn tsihs_are_non_zero_unique_and_handed_out_in_turn() {
        let mut t = SessionTable::new(8);
        let a = t.admit(name("i", 1, T), 'a').unwrap();
        let b = t.admit(name("i", 2, T), 'b').unwrap();
        assert_eq!((a.tsih, b.tsih), (1, 2));
        assert_eq!(t.remove_if(1, |_| true), Some('a'));
        // 1 is free again, but the next in turn comes first.
        assert_eq!(t.admit(name("i", 3, T), 'c').unwrap().tsih, 3);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn tsih_zero_is_skipped_when_the_counter_wraps() {
        let mut t = SessionTable::new(8);
        t.next_tsih = u16::MAX;
        let a = t.admit(name("i", 1, T), ()).unwrap();
        let b = t.admit(name("i", 2, T), ()).unwrap();
        assert_eq!((a.tsih, b.tsih), (u16::MAX, 1));
    }

    #[test]
    fn a_tsih_in_use_is_passed_over() {
        let mut t = SessionTable::new(8);
        t.admit(name("i", 1, T), ()).unwrap();
        t.next_tsih = 1;
        assert_eq!(t.admit(name("i", 2, T), ()).unwrap().tsih, 2);
    }

    #[test]
    fn the_same_name_reinstates_the_session() {
        let mut t = SessionTable::new(8);
        t.admit(name("iqn.x", 1, T), "old").unwrap();
        // Names compare without regard to case (RFC 7143 §4.2.7.1).
        let again = name("IQN.X", 1, Some("IQN.2026-11.TEST:T"));
        let a = t.admit(again, "new").unwrap();
        assert_eq!(a.replaced, Some("old"));
        assert_eq!(t.len(), 1);
        assert_eq!(t.get(a.tsih).map(|(_, v)| *v), Some("new"));
    }

    #[test]
    fn another_isid_target_or_initiator_is_another_session() {
        let mut t = SessionTable::new(8);
        t.admit(name("i", 1, T), ()).unwrap();
        for other in [
            name("i", 2, T),
            name("j", 1, T),
            name("i", 1, Some("iqn.2026-11.test:u")),
            name("i", 1, None),
        ] {
            assert_eq!(t.admit(other, ()).unwrap().replaced, None);
        }
        assert_eq!(t.counts(), (4, 1));
    }

    #[test]
    fn a_full_table_refuses_but_a_reinstatement_fits() {
        let mut t = SessionTable::new(2);
        t.admit(name("i", 1, T), 1).unwrap();
        t.admit(name("i", 2, T), 2).unwrap();
        assert_eq!(
            t.admit(name("i", 3, T), 3),
            Err(TableFull { replaced: None })
        );
        // Replacing a session frees its place first.
        let a = t.admit(name("i", 2, T), 4).unwrap();
        assert_eq!(a.replaced, Some(2));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn remove_if_leaves_a_newer_session_with_the_same_tsih() {
        let mut t = SessionTable::new(8);
        let a = t.admit(name("i", 1, T), 10).unwrap();
        assert_eq!(t.remove_if(a.tsih, |v| *v == 11), None);
        assert_eq!(t.remove_if(a.tsih, |v| *v == 10), Some(10));
        assert!(t.is_empty());
    }

    #[test]
    fn sessions_of_a_target_are_found_without_regard_to_case() {
        let mut t = SessionTable::new(8);
        t.admit(name("i", 1, T), 1).unwrap();
        t.admit(name("i", 2, Some("iqn.2026-11.test:u")), 2)
            .unwrap();
        t.admit(name("i", 3, None), 3).unwrap();
        let mut of: Vec<_> = t.of_target("IQN.2026-11.test:T").copied().collect();
        of.sort();
        assert_eq!(of, vec![1]);
    }
}
