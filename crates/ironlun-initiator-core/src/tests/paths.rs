//! Several paths to one target: a core per session, each logging in
//! with its own ISID, and commands moving from a lost path to the one
//! the chooser picks, each answered once.

use std::time::Duration;

use ironlun_proto::initiator::Reply;
use ironlun_wire::Pdu;

use super::world::{config, read, World};
use crate::{ChoosePath, Event, LeastQueueDepth, PathState, PathView, Request, RoundRobin};

/// A session whose ISID ends in `n`.
fn path(n: u8) -> World {
    let mut cfg = config();
    cfg.login.isid[5] = n;
    World::with(cfg)
}

/// The last byte of the ISID of every Login Request the target saw.
fn isids(w: &World) -> Vec<u8> {
    w.received
        .iter()
        .filter_map(|p| match p {
            Pdu::LoginRequest(l) => Some(l.isid[5]),
            _ => None,
        })
        .collect()
}

fn commands(w: &World) -> usize {
    w.received
        .iter()
        .filter(|p| matches!(p, Pdu::ScsiCommand(_)))
        .count()
}

#[test]
fn two_sessions_to_one_target_run_side_by_side_with_their_own_isids() {
    let mut paths = [path(1), path(2)];
    let chooser = RoundRobin::default();
    for token in 1..=4 {
        let views = paths.each_ref().map(|w| w.core.path_view());
        let i = chooser.choose(&read(0, 512), &views).unwrap();
        paths[i].request(Request::Scsi(read(0, 512)), token);
    }
    for (w, n) in paths.iter().zip([1, 2]) {
        assert!(isids(w).iter().all(|&i| i == n), "{:?}", isids(w));
        assert_eq!(w.done.len(), 2, "{:?}", w.done);
        assert_eq!(
            w.core.path_view(),
            PathView {
                state: PathState::Connected,
                in_flight: 0
            }
        );
    }
}

#[test]
fn a_lost_paths_commands_are_handed_back_and_run_on_another() {
    let [mut a, mut b] = [path(1), path(2)];
    a.hold = true;
    a.request(Request::Scsi(read(8, 4096)), 1);
    a.request(Request::Scsi(read(16, 512)), 2);
    assert_eq!(a.core.path_view().in_flight, 2);
    a.core
        .handle_connection_lost("connection reset".into(), a.now);
    a.run();
    assert_eq!(
        a.core.path_view(),
        PathView {
            state: PathState::Reconnecting,
            in_flight: 2
        }
    );
    let views = [a.core.path_view(), b.core.path_view()];
    assert_eq!(LeastQueueDepth.choose(&read(0, 512), &views), Some(1));

    assert_eq!(a.core.hand_back_held(), 2);
    a.run();
    assert_eq!(a.core.held(), 0);
    let tokens: Vec<u32> = a.orphans.iter().map(|(_, t)| *t).collect();
    assert_eq!(tokens, [1, 2]);
    for (req, token) in std::mem::take(&mut a.orphans) {
        b.request(Request::Scsi(req), token);
    }
    match &b.done[..] {
        [(1, Ok(Reply::Scsi(r1))), (2, Ok(Reply::Scsi(r2)))] => {
            assert_eq!((r1.data.len(), r2.data.len()), (4096, 512));
        }
        other => panic!("{other:?}"),
    }

    // The lost path logs in again with nothing to send again: each
    // command went out once more, on the other path only.
    let sent_before = commands(&a);
    a.hold = false;
    a.advance(Duration::from_millis(100));
    assert!(
        matches!(
            a.last_event(),
            Some(Event::LoggedIn {
                reinstated: true,
                reissued: 0,
                ..
            })
        ),
        "{:?}",
        a.events
    );
    assert!(a.done.is_empty() && a.orphans.is_empty(), "{:?}", a.done);
    assert_eq!(commands(&a), sent_before);
    assert_eq!(a.core.path_view().state, PathState::Connected);
}
