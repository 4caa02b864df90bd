//! The schedule's decisions with the time passed in and a store in
//! memory: no clock, thread or socket.

use std::time::Duration;

use super::rules::{self, own_stamp, parse_stamp, stamp, to_delete};
use super::slot::{self, Outcome, Slot, Store};
use crate::config::SnapshotSchedule;

fn every(secs: u64, keep: u32) -> SnapshotSchedule {
    SnapshotSchedule {
        every: Duration::from_secs(secs),
        keep,
        prefix: "auto".into(),
    }
}

/// 2026-11-28T04:50:00Z.
const T0: u64 = 1_795_841_400;

#[test]
fn stamps_are_utc_and_read_back() {
    assert_eq!(stamp(0), "19700101T000000Z");
    assert_eq!(stamp(T0), "20261128T045000Z");
    assert_eq!(stamp(951_825_599), "20000229T115959Z");
    for secs in [0, T0, 951_825_599, 4_102_444_800, T0 + 86_399] {
        assert_eq!(parse_stamp(&stamp(secs)), Some(secs));
    }
    for bad in [
        "20261128T045000",
        "20261328T045000Z",
        "20261128T245000Z",
        "2026112xT045000Z",
        "20261128 045000Z",
        "+0261128T045000Z",
    ] {
        assert_eq!(parse_stamp(bad), None, "{bad}");
    }
}

#[test]
fn only_names_of_the_schedules_form_are_its_own() {
    assert_eq!(
        own_stamp("auto", "auto-20261128T045000Z"),
        Some("20261128T045000Z")
    );
    for other in [
        "nightly",
        "auto",
        "auto-",
        "auto-20261128T045000Z-keep",
        "autox-20261128T045000Z",
        "hourly-20261128T045000Z",
        "auto-2026-11-28",
    ] {
        assert_eq!(own_stamp("auto", other), None, "{other}");
    }
}

#[test]
fn retention_deletes_the_oldest_of_its_own_beyond_keep_and_nothing_else() {
    let names: Vec<String> = [
        "auto-20261128T050000Z",
        "before-upgrade",
        "auto-20261128T030000Z",
        "auto-20261128T040000Z",
        "hourly-20261128T010000Z",
        "auto-20261127T230000Z",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(
        to_delete("auto", 2, &names),
        ["auto-20261127T230000Z", "auto-20261128T030000Z"]
    );
    assert!(to_delete("auto", 4, &names).is_empty());
    assert_eq!(to_delete("hourly", 1, &names), Vec::<String>::new());
    assert_eq!(to_delete("auto", 1, &names).len(), 3);
}

#[test]
fn the_first_run_waits_an_interval_after_the_newest_of_its_own() {
    let s = every(3600, 3);
    let now = (T0 + 600) * 1000;
    // None of its own: at once.
    assert_eq!(rules::first_due(&s, &["nightly".into()], now), now);
    // One ten minutes old: fifty minutes from now.
    let names = vec![rules::stamp_name("auto", T0)];
    assert_eq!(rules::first_due(&s, &names, now), (T0 + 3600) * 1000);
    // One from "the future" (the clock went back): an interval at most.
    let names = vec![rules::stamp_name("auto", T0 + 86_400)];
    assert_eq!(rules::first_due(&s, &names, now), now + 3_600_000);
}

#[test]
fn runs_keep_their_rhythm_skip_what_they_missed_and_never_share_a_second() {
    let s = every(60, 3);
    let due = T0 * 1000;
    // On time, or a little late: an interval after the one due.
    assert_eq!(rules::next_due(&s, due, due + 300, T0), due + 60_000);
    // Far behind (a suspended machine): an interval from now.
    let late = due + 10 * 60_000 + 5;
    assert_eq!(rules::next_due(&s, due, late, late / 1000), late + 60_000);
    // A one-second schedule run on time at the end of a second: a
    // second later.
    let s1 = every(1, 3);
    let due = T0 * 1000 + 999;
    assert_eq!(rules::next_due(&s1, due, due, T0), due + 1000);
    // Due at the end of a second but run early in the next one: an
    // interval after the one due is still in the second its name has,
    // so the next waits for a new second.
    let due = T0 * 1000 - 1;
    assert_eq!(
        rules::next_due(&s1, due, T0 * 1000 + 10, T0),
        (T0 + 1) * 1000
    );
}

/// A LUN's snapshots in memory; `fail` makes the next create fail.
#[derive(Default)]
struct Memory {
    names: Vec<String>,
    fail: Option<String>,
    creates: usize,
}

impl Store for Memory {
    fn names(&mut self) -> Result<Vec<String>, String> {
        Ok(self.names.clone())
    }

    fn create(&mut self, name: &str) -> Result<Duration, String> {
        self.creates += 1;
        if let Some(e) = self.fail.take() {
            return Err(e);
        }
        if self.names.iter().any(|n| n == name) {
            return Err(format!("{name} exists"));
        }
        self.names.push(name.to_owned());
        Ok(Duration::from_micros(1500))
    }

    fn delete(&mut self, name: &str) -> Result<(), String> {
        let before = self.names.len();
        self.names.retain(|n| n != name);
        if self.names.len() == before {
            return Err(format!("no {name}"));
        }
        Ok(())
    }
}

/// Ticks every 250 ms from `from` for `secs` seconds, running each
/// claimed run at once.
fn walk(slot: &mut Slot, store: &mut Memory, from: u64, secs: u64) -> u64 {
    let mut now = from;
    while now < from + secs * 1000 {
        if let Some(c) = slot.claim(now) {
            assert!(slot.claim(now).is_none(), "one run at a time");
            let o = slot::run(&c, now, store);
            slot.finish(&c, now, o);
        }
        now += 250;
    }
    now
}

#[test]
fn a_schedule_takes_keeps_and_leaves_hand_made_snapshots_alone() {
    let mut store = Memory {
        names: vec!["by-hand".into()],
        ..Memory::default()
    };
    let mut slot = Slot::new(every(1, 2));
    let start = T0 * 1000 + 100;
    let now = walk(&mut slot, &mut store, start, 10);
    // Ten seconds of a 1 s schedule: ten snapshots, the two newest kept.
    assert_eq!(store.creates, 10);
    assert_eq!(
        store.names,
        ["by-hand", "auto-20261128T045008Z", "auto-20261128T045009Z"]
    );
    assert_eq!((slot.taken, slot.failures, slot.kept), (10, 0, Some(2)));
    assert_eq!(slot.last_success, Some(T0 + 9));
    let last = slot.last.clone().unwrap();
    assert_eq!(last.snapshot.as_deref(), Some("auto-20261128T045009Z"));
    assert_eq!(last.deleted, ["auto-20261128T045007Z"]);
    assert_eq!(last.paused_ms, Some(1.5));
    assert_eq!(last.error, None);

    // A failure is recorded and counted; the next interval tries again.
    store.fail = Some("No space left on device".into());
    walk(&mut slot, &mut store, now, 2);
    assert_eq!(slot.failures, 1);
    assert_eq!(slot.taken, 11);
    assert!(store.names.contains(&"by-hand".to_owned()));
    assert_eq!(store.names.len(), 3, "{:?}", store.names);
}

#[test]
fn the_failure_is_what_admin_shows_until_a_run_succeeds() {
    let mut store = Memory {
        fail: Some("the cluster is down".into()),
        ..Memory::default()
    };
    let mut slot = Slot::new(every(60, 5));
    let c = slot.claim(T0 * 1000).unwrap();
    let o = slot::run(&c, T0 * 1000, &mut store);
    assert_eq!(
        o,
        Outcome::Failed {
            error: "the cluster is down".into(),
            stamped: T0
        }
    );
    slot.finish(&c, T0 * 1000, o);
    let v = slot.view();
    assert_eq!(v.failures, 1);
    assert_eq!(
        v.last.unwrap().error.as_deref(),
        Some("the cluster is down")
    );
    // Not retried before the next interval.
    assert!(slot.claim(T0 * 1000 + 59_000).is_none());
    assert!(slot.claim(T0 * 1000 + 60_000).is_some());
}

#[test]
fn a_restart_finds_its_newest_snapshot_and_a_changed_schedule_starts_again() {
    let mut store = Memory {
        names: vec![rules::stamp_name("auto", T0)],
        ..Memory::default()
    };
    let mut slot = Slot::new(every(3600, 3));
    let now = (T0 + 600) * 1000;
    let c = slot.claim(now).unwrap();
    let o = slot::run(&c, now, &mut store);
    assert_eq!(
        o,
        Outcome::Waits {
            next: (T0 + 3600) * 1000
        }
    );
    slot.finish(&c, now, o);
    assert_eq!(store.creates, 0);
    assert!(slot.claim((T0 + 3599) * 1000).is_none());
    // Every ten minutes now: the newest is ten minutes old, so at once.
    slot.set(&every(600, 3));
    let c = slot.claim(now).unwrap();
    let o = slot::run(&c, now, &mut store);
    slot.finish(&c, now, o);
    assert_eq!(store.creates, 1);
    assert_eq!(slot.next(), Some(now + 600_000));
}
