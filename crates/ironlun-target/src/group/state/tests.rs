//! The group's decisions with an injected clock: no socket, no Ceph.

use super::*;

const AO: AccessState = AccessState::ActiveOptimized;
const SB: AccessState = AccessState::Standby;
const TR: AccessState = AccessState::Transitioning;
const UN: AccessState = AccessState::Unavailable;

fn timing() -> Timing {
    Timing {
        interval: Duration::from_millis(500),
        dead_after: Duration::from_secs(3),
    }
}

fn members() -> Vec<Member> {
    vec![
        Member {
            name: "gw1".into(),
            tpg: 1,
        },
        Member {
            name: "gw2".into(),
            tpg: 2,
        },
    ]
}

/// Gateway `me` of two, gw1 preferred, one LUN (0).
fn group(me: usize, t0: Instant) -> Group {
    Group::new(setup(me, true), &[0], t0)
}

fn setup(me: usize, failback: bool) -> Setup {
    Setup {
        members: members(),
        me,
        preferred: Some(0),
        others: SB,
        timing: timing(),
        failback,
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn acquires(actions: &[Action]) -> Vec<&Action> {
    actions
        .iter()
        .filter(|a| !matches!(a, Action::Alua { .. }))
        .collect()
}

/// gw1 owning LUN 0 as `addr`, heard at `at`.
fn owner_hb(addr: &str, seq: u64) -> Heartbeat {
    Heartbeat {
        group: "ha1".into(),
        from: "gw1".into(),
        seq,
        fenced: false,
        owns: vec![(0, addr.into())],
        release: vec![],
        leaving: false,
    }
}

#[test]
fn the_preferred_gateway_takes_an_unowned_lun_at_once_the_other_waits() {
    let t0 = Instant::now();
    let mut gw1 = group(0, t0);
    let a = gw1.tick(t0);
    assert_eq!(
        acquires(&a),
        [&Action::Acquire {
            lun: 0,
            break_owner: None
        }]
    );
    // Transitioning while it acquires.
    assert!(a.contains(&Action::Alua {
        lun: 0,
        states: vec![(1, TR), (2, UN)]
    }));
    let mut gw2 = group(1, t0);
    assert!(acquires(&gw2.tick(t0 + ms(2900))).is_empty());
    // Nobody claimed it for dead_after: gw2 tries too.
    assert_eq!(
        acquires(&gw2.tick(t0 + ms(3000))),
        [&Action::Acquire {
            lun: 0,
            break_owner: None
        }]
    );
}

#[test]
fn an_owner_is_active_optimized_and_the_others_standby_once() {
    let t0 = Instant::now();
    let mut gw1 = group(0, t0);
    gw1.tick(t0);
    gw1.outcome(
        Outcome::Acquired {
            lun: 0,
            address: "A".into(),
        },
        t0,
    );
    let a = gw1.tick(t0 + ms(10));
    assert_eq!(
        a,
        [Action::Alua {
            lun: 0,
            states: vec![(1, AO), (2, UN)]
        }]
    );
    let hb = gw1.heartbeat("ha1", 1, t0);
    assert_eq!(hb.owns, [(0, "A".to_owned())]);
    // gw2 hears it: gw1 optimized, itself standby; nothing to do.
    let mut gw2 = group(1, t0);
    gw2.heard(0, &hb, t0 + ms(20));
    let a = gw2.tick(t0 + ms(20));
    assert_eq!(
        a,
        [Action::Alua {
            lun: 0,
            states: vec![(1, AO), (2, SB)]
        }]
    );
    assert!(gw2.tick(t0 + ms(520)).is_empty(), "the same states again");
    assert_eq!(gw2.owner(0, t0 + ms(520)).as_deref(), Some("gw1"));
}

#[test]
fn a_silent_owner_is_presumed_dead_only_after_dead_after_and_its_lock_is_broken() {
    let t0 = Instant::now();
    let mut gw2 = group(1, t0);
    gw2.heard(0, &owner_hb("A", 1), t0);
    gw2.tick(t0);
    assert!(acquires(&gw2.tick(t0 + ms(2999))).is_empty());
    let a = gw2.tick(t0 + ms(3000));
    assert_eq!(
        acquires(&a),
        [&Action::Acquire {
            lun: 0,
            break_owner: Some("A".into())
        }]
    );
    assert!(a.contains(&Action::Alua {
        lun: 0,
        states: vec![(1, UN), (2, TR)]
    }));
    // Busy: nothing more until the outcome.
    assert!(acquires(&gw2.tick(t0 + ms(3500))).is_empty());
    gw2.outcome(
        Outcome::Acquired {
            lun: 0,
            address: "B".into(),
        },
        t0 + ms(3600),
    );
    assert_eq!(gw2.role(0), Some(Role::Owner));
    assert!(gw2.tick(t0 + ms(3600)).contains(&Action::Alua {
        lun: 0,
        states: vec![(1, UN), (2, AO)]
    }));
}

#[test]
fn a_lost_race_leaves_the_gateway_standby() {
    let t0 = Instant::now();
    let mut gw2 = group(1, t0);
    gw2.heard(0, &owner_hb("A", 1), t0);
    gw2.tick(t0 + ms(3000));
    gw2.outcome(
        Outcome::NotAcquired {
            lun: 0,
            holder: Some("C".into()),
        },
        t0 + ms(3100),
    );
    assert_eq!(gw2.role(0), Some(Role::Standby));
    // The dead owner's address is still all it knows: it tries again
    // (the lock refuses while the winner holds it).
    assert_eq!(acquires(&gw2.tick(t0 + ms(3600))).len(), 1);
}

#[test]
fn two_claims_are_settled_by_the_lock() {
    let t0 = Instant::now();
    let mut gw1 = group(0, t0);
    gw1.tick(t0);
    gw1.outcome(
        Outcome::Acquired {
            lun: 0,
            address: "A".into(),
        },
        t0,
    );
    // gw1 was paused; gw2 took over and says so.
    let hb = Heartbeat {
        from: "gw2".into(),
        owns: vec![(0, "B".into())],
        ..owner_hb("B", 9)
    };
    gw1.heard(1, &hb, t0 + ms(5000));
    assert_eq!(
        acquires(&gw1.tick(t0 + ms(5000))),
        [&Action::Verify { lun: 0 }]
    );
    gw1.outcome(Outcome::Fenced { lun: 0 }, t0 + ms(5010));
    assert_eq!(gw1.role(0), Some(Role::Fenced));
    let a = gw1.tick(t0 + ms(5020));
    assert_eq!(
        a,
        [Action::Alua {
            lun: 0,
            states: vec![(1, UN), (2, AO)]
        }]
    );
    assert!(gw1.heartbeat("ha1", 2, t0).fenced);
    assert!(gw1.heartbeat("ha1", 2, t0).owns.is_empty());
}

#[test]
fn a_fenced_gateway_takes_nothing_until_it_rejoins() {
    let t0 = Instant::now();
    let mut gw1 = group(0, t0);
    gw1.fenced(0);
    // Unowned, preferred, but fenced: no acquire, ever.
    assert!(acquires(&gw1.tick(t0 + ms(10_000))).is_empty());
    assert_eq!(gw1.member_views(t0)[0].health, "fenced");
    assert_eq!(gw1.rejoin(), [Action::Rejoin { lun: 0 }]);
    assert!(gw1.rejoin().is_empty(), "one rejoin at a time");
    gw1.outcome(Outcome::Failed { lun: 0 }, t0);
    assert_eq!(gw1.role(0), Some(Role::Fenced));
    gw1.rejoin();
    gw1.outcome(Outcome::Rejoined { lun: 0 }, t0 + ms(10_000));
    assert_eq!(gw1.role(0), Some(Role::Standby));
    assert_eq!(acquires(&gw1.tick(t0 + ms(10_001))).len(), 1);
}

#[test]
fn failback_the_preferred_asks_the_owner_drains_and_releases() {
    let t0 = Instant::now();
    let mut gw1 = group(0, t0);
    let mut gw2 = group(1, t0);
    // gw2 owns the LUN (it took over while gw1 was away).
    gw2.tick(t0 + ms(3000));
    gw2.outcome(
        Outcome::Acquired {
            lun: 0,
            address: "B".into(),
        },
        t0 + ms(3000),
    );
    gw1.heard(1, &gw2.heartbeat("ha1", 1, t0), t0 + ms(3100));
    assert!(acquires(&gw1.tick(t0 + ms(3100))).is_empty());
    let ask = gw1.heartbeat("ha1", 1, t0 + ms(3100));
    assert_eq!(ask.release, [("gw2".to_owned(), 0)]);
    gw2.heard(0, &ask, t0 + ms(3200));
    let a = gw2.tick(t0 + ms(3200));
    assert_eq!(acquires(&a), [&Action::Release { lun: 0 }]);
    assert!(a.contains(&Action::Alua {
        lun: 0,
        states: vec![(1, SB), (2, TR)]
    }));
    // Still held while it drains: announced, so nobody suspects it.
    assert_eq!(gw2.heartbeat("ha1", 2, t0).owns, [(0, "B".to_owned())]);
    // A failed release keeps the owner.
    gw2.outcome(Outcome::Failed { lun: 0 }, t0 + ms(3300));
    assert_eq!(gw2.role(0), Some(Role::Owner));
    assert_eq!(gw2.heartbeat("ha1", 2, t0).owns, [(0, "B".to_owned())]);
    gw2.tick(t0 + ms(3400));
    gw2.outcome(Outcome::Released { lun: 0 }, t0 + ms(3500));
    let hb = gw2.heartbeat("ha1", 3, t0 + ms(3500));
    assert!(hb.owns.is_empty());
    gw1.heard(1, &hb, t0 + ms(3600));
    assert_eq!(
        acquires(&gw1.tick(t0 + ms(3600))),
        [&Action::Acquire {
            lun: 0,
            break_owner: None
        }]
    );
}

#[test]
fn a_non_preferred_gateway_never_asks_for_failback_and_no_failback_means_none() {
    let t0 = Instant::now();
    let mut gw2 = group(1, t0);
    gw2.heard(0, &owner_hb("A", 1), t0);
    assert!(gw2.heartbeat("ha1", 1, t0).release.is_empty());
    let mut gw1 = Group::new(setup(0, false), &[0], t0);
    let hb = Heartbeat {
        from: "gw2".into(),
        ..owner_hb("B", 1)
    };
    gw1.heard(1, &hb, t0);
    assert!(gw1.heartbeat("ha1", 1, t0).release.is_empty());
}

#[test]
fn health_says_who_is_up_dead_or_never_heard() {
    let t0 = Instant::now();
    let mut gw2 = group(1, t0);
    let v = gw2.member_views(t0);
    assert_eq!(v[0].health, "never heard");
    assert_eq!(v[1].health, "up");
    assert!(v[1].local);
    gw2.heard(0, &owner_hb("A", 1), t0);
    assert_eq!(
        gw2.member_views(t0 + ms(500))[0].health,
        "up (heard 0.5 s ago)"
    );
    assert_eq!(
        gw2.member_views(t0 + ms(4000))[0].health,
        "dead (silent 4.0 s)"
    );
    assert_eq!(gw2.owner(0, t0 + ms(4000)), None);
}

#[test]
fn heartbeats_about_unknown_luns_or_from_oneself_change_nothing() {
    let t0 = Instant::now();
    let mut gw2 = group(1, t0);
    let hb = Heartbeat {
        owns: vec![(9, "A".into())],
        ..owner_hb("A", 1)
    };
    gw2.heard(0, &hb, t0);
    gw2.heard(1, &owner_hb("X", 1), t0);
    gw2.heard(7, &owner_hb("X", 1), t0);
    assert_eq!(gw2.owner(0, t0), None);
}

#[test]
fn an_owner_that_died_before_announcing_itself_is_broken_after_dead_after() {
    let t0 = Instant::now();
    let mut gw2 = group(1, t0);
    // gw1 took the lock and died before its first claim reached gw2.
    assert_eq!(acquires(&gw2.tick(t0 + ms(3000))).len(), 1);
    gw2.outcome(
        Outcome::NotAcquired {
            lun: 0,
            holder: Some("A".into()),
        },
        t0 + ms(3000),
    );
    // Seen unclaimed for less than dead_after: not broken, not retried.
    assert!(acquires(&gw2.tick(t0 + ms(5900))).is_empty());
    assert_eq!(
        acquires(&gw2.tick(t0 + ms(6000))),
        [&Action::Acquire {
            lun: 0,
            break_owner: Some("A".into())
        }]
    );
}

#[test]
fn a_holder_that_announces_itself_is_not_suspected() {
    let t0 = Instant::now();
    let mut gw2 = group(1, t0);
    gw2.tick(t0 + ms(3000));
    gw2.outcome(
        Outcome::NotAcquired {
            lun: 0,
            holder: Some("A".into()),
        },
        t0 + ms(3000),
    );
    gw2.heard(0, &owner_hb("A", 1), t0 + ms(3200));
    assert!(acquires(&gw2.tick(t0 + ms(6100))).is_empty());
    // Killed later: its announced address is broken after dead_after.
    assert_eq!(
        acquires(&gw2.tick(t0 + ms(6200))),
        [&Action::Acquire {
            lun: 0,
            break_owner: Some("A".into())
        }]
    );
}

/// An orderly stop (SIGTERM): the owner goes transitioning and keeps
/// claiming the LUN while it releases; then its heartbeats say `leaving`
/// and claim nothing, and it decides nothing more.
#[test]
fn a_stopping_owner_releases_then_says_it_left() {
    let t0 = Instant::now();
    let mut gw1 = group(0, t0);
    gw1.tick(t0);
    gw1.outcome(
        Outcome::Acquired {
            lun: 0,
            address: "a1".into(),
        },
        t0,
    );
    gw1.tick(t0);
    assert_eq!(gw1.leave(), vec![0]);
    let a = gw1.tick(t0 + ms(10));
    assert!(acquires(&a).is_empty(), "{a:?}");
    assert!(a.contains(&Action::Alua {
        lun: 0,
        states: vec![(1, TR), (2, UN)]
    }));
    let hb = gw1.heartbeat("ha1", 2, t0 + ms(10));
    assert_eq!(
        (hb.owns.clone(), hb.leaving),
        (vec![(0, "a1".into())], false)
    );
    gw1.left();
    let hb = gw1.heartbeat("ha1", 3, t0 + ms(20));
    assert!(hb.owns.is_empty() && hb.leaving, "{hb:?}");
    // Nothing is taken again while stopping, however long it takes.
    assert!(acquires(&gw1.tick(t0 + ms(10_000))).is_empty());
}

/// The survivor takes a LUN whose owner left in order at once: no wait
/// for the preferred gateway or for silence, and no lock to break.
#[test]
fn a_standby_takes_over_at_once_from_an_owner_that_left() {
    let t0 = Instant::now();
    let mut gw2 = group(1, t0);
    gw2.heard(0, &owner_hb("a1", 1), t0);
    assert!(acquires(&gw2.tick(t0 + ms(100))).is_empty());
    let mut bye = owner_hb("a1", 2);
    bye.owns.clear();
    bye.leaving = true;
    gw2.heard(0, &bye, t0 + ms(200));
    assert_eq!(
        acquires(&gw2.tick(t0 + ms(210))),
        [&Action::Acquire {
            lun: 0,
            break_owner: None
        }]
    );
    let views = gw2.member_views(t0 + ms(210));
    assert_eq!(views[0].health, "stopped (left in order)");
    // Without the leaving flag the same silence is sat out first.
    let mut gw2 = group(1, t0);
    gw2.heard(0, &owner_hb("a1", 1), t0);
    let mut quiet = owner_hb("a1", 2);
    quiet.owns.clear();
    gw2.heard(0, &quiet, t0 + ms(200));
    assert!(acquires(&gw2.tick(t0 + ms(210))).is_empty());
}

/// A peer whose heartbeat port refuses (its process died, its host
/// answers) is presumed dead at once: its lock is broken without waiting
/// for `dead_after`; heard again, it is alive again.
#[test]
fn an_owner_whose_port_refuses_is_taken_over_at_once() {
    let t0 = Instant::now();
    let mut gw2 = group(1, t0);
    gw2.heard(0, &owner_hb("a1", 1), t0);
    assert!(acquires(&gw2.tick(t0 + ms(100))).is_empty());
    assert!(gw2.unreachable(0, t0 + ms(600)));
    assert_eq!(
        acquires(&gw2.tick(t0 + ms(600))),
        [&Action::Acquire {
            lun: 0,
            break_owner: Some("a1".into())
        }]
    );
    assert!(gw2.member_views(t0 + ms(600))[0]
        .health
        .starts_with("dead (its heartbeat port refused"));
    // Back (a new process): alive, and its claim is taken as before.
    gw2.outcome(
        Outcome::NotAcquired {
            lun: 0,
            holder: None,
        },
        t0 + ms(700),
    );
    gw2.heard(0, &owner_hb("a2", 2), t0 + ms(800));
    assert!(!gw2.unreachable(1, t0 + ms(800)), "not a peer: itself");
    assert!(acquires(&gw2.tick(t0 + ms(900))).is_empty());
    assert_eq!(gw2.owner(0, t0 + ms(900)).as_deref(), Some("gw1"));
}
