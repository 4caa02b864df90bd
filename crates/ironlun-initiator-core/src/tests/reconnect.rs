//! A lost connection: its unfinished commands are taken back and sent
//! again after the next login (the same ISID reinstates the session,
//! RFC 7143 §6.3.5), or, when every attempt fails, fail or go back to
//! the driver for another path.

use std::time::Duration;

use ironlun_proto::initiator::{Reply, TaskError};

use super::world::{config, read, World};
use crate::{End, Event, LoginFailure, Phase, Request};

#[test]
fn a_lost_connection_takes_its_commands_back_and_sends_them_again() {
    let mut w = World::new();
    w.silent = true;
    w.request(Request::Scsi(read(0, 512)), 1);
    w.request(Request::Ping, 2);
    w.core
        .handle_connection_lost("connection reset".into(), w.now);
    w.run();
    assert!(w.events.contains(&Event::ConnectionFailed {
        why: "connection reset".into(),
        taken_back: 1
    }));
    // The ping is not a command to send again: it fails.
    assert!(
        matches!(w.done[..], [(2, Err(TaskError::ConnectionFailed(_)))]),
        "{:?}",
        w.done
    );
    assert_eq!((w.core.phase(), w.core.held()), (Phase::Waiting, 1));
    assert!(!w.core.accepts_requests());
    w.silent = false;
    w.advance(Duration::from_millis(99));
    assert_eq!(w.connections, 1, "connected again before the back-off");
    w.advance(Duration::from_millis(1));
    assert!(
        matches!(
            w.last_event(),
            Some(Event::LoggedIn {
                reinstated: true,
                reissued: 1,
                ..
            })
        ),
        "{:?}",
        w.events
    );
    assert!(
        matches!(w.done[..], [_, (1, Ok(Reply::Scsi(_)))]),
        "{:?}",
        w.done
    );
}

#[test]
fn reconnection_gives_up_and_fails_or_hands_back_the_commands() {
    for failover in [false, true] {
        let mut cfg = config();
        cfg.failover = failover;
        let mut w = World::with(cfg);
        w.hold = true;
        w.request(Request::Scsi(read(0, 512)), 1);
        w.refuse_connections = true;
        w.core
            .handle_connection_lost("connection reset".into(), w.now);
        w.run();
        // Two attempts, 100 ms then 200 ms apart, both refused.
        w.advance(Duration::from_millis(100));
        assert!(w
            .events
            .contains(&Event::LoginFailed(LoginFailure::Connection(
                "connection refused".into()
            ))));
        assert!(!w.core.is_ended());
        w.advance(Duration::from_millis(200));
        assert_eq!(
            w.last_event(),
            Some(&Event::Ended(End::GaveUp {
                why: "connection reset".into(),
                attempts: 2
            }))
        );
        if failover {
            assert!(w.done.is_empty(), "{:?}", w.done);
            assert!(matches!(w.orphans[..], [(_, 1)]), "{:?}", w.orphans);
        } else {
            assert!(w.orphans.is_empty());
            assert!(
                matches!(w.done[..], [(1, Err(TaskError::ConnectionFailed(_)))]),
                "{:?}",
                w.done
            );
        }
    }
}

#[test]
fn a_reconnection_login_past_its_deadline_counts_as_a_failed_attempt() {
    let mut w = World::new();
    w.core
        .handle_connection_lost("connection reset".into(), w.now);
    w.silent = true;
    w.advance(Duration::from_millis(100));
    assert_eq!(w.core.phase(), Phase::LoggingIn);
    w.advance(w.core.config().login_timeout);
    assert!(
        w.events.contains(&Event::LoginFailed(LoginFailure::Timeout(
            Duration::from_secs(10)
        ))),
        "{:?}",
        w.events
    );
    assert_eq!(w.core.phase(), Phase::Waiting);
    w.silent = false;
    w.advance(Duration::from_millis(200));
    assert!(matches!(w.last_event(), Some(Event::LoggedIn { .. })));
}
