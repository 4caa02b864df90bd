//! The core against ironlun-proto's target state machines in memory:
//! every PDU goes through the real encoder and the core's own decoder,
//! and time moves only when a test moves it.

mod logout;
mod paths;
mod reconnect;
mod world;

use std::time::Duration;

use ironlun_proto::initiator::{Reply, TaskError};
use ironlun_scsi_codes::Status;
use ironlun_wire::{LogoutResult, Pdu};

use crate::{End, Event, LoginFailure, Phase, Request, LOGOUT_WAIT};
use world::{read, World};

#[test]
fn logs_in_and_runs_a_command() {
    let mut w = World::new();
    assert_eq!(w.core.phase(), Phase::FullFeature);
    assert!(
        matches!(
            w.events[..],
            [
                Event::Connect,
                Event::LoggedIn {
                    reinstated: false,
                    reissued: 0,
                    ..
                }
            ]
        ),
        "{:?}",
        w.events
    );
    assert!(w.core.accepts_requests());
    w.request(Request::Scsi(read(0, 4096)), 1);
    match &w.done[..] {
        [(1, Ok(Reply::Scsi(r)))] => assert_eq!(r.data.len(), 4096),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_first_login_failing_ends_the_session() {
    let mut w = World::unconnected();
    w.refuse_connections = true;
    w.run();
    assert_eq!(
        w.last_event(),
        Some(&Event::Ended(End::LoginFailed(LoginFailure::Connection(
            "connection refused".into()
        ))))
    );
    assert!(w.core.is_ended() && w.core.poll_timeout().is_none());

    // A target that never answers: the login's deadline ends it.
    let mut w = World::unconnected();
    w.silent = true;
    w.run();
    assert_eq!(w.core.phase(), Phase::LoggingIn);
    w.advance(w.core.config().login_timeout);
    assert!(
        matches!(
            w.last_event(),
            Some(Event::Ended(End::LoginFailed(LoginFailure::Timeout(_))))
        ),
        "{:?}",
        w.events
    );
}

#[test]
fn closing_logs_out_and_ends_the_session() {
    let mut w = World::new();
    w.core.handle_close(w.now);
    assert!(!w.core.accepts_requests());
    w.run();
    assert!(w.logouts() == 1, "{:?}", w.received);
    assert_eq!(w.last_event(), Some(&Event::Ended(End::Closed)));

    // No Logout Response: closed anyway after LOGOUT_WAIT.
    let mut w = World::new();
    w.silent = true;
    w.core.handle_close(w.now);
    w.run();
    assert_eq!(w.logouts(), 1);
    assert_eq!(w.core.phase(), Phase::FullFeature);
    w.advance(LOGOUT_WAIT);
    assert_eq!(w.last_event(), Some(&Event::Ended(End::Closed)));
}

#[test]
fn the_callers_logout_completes_and_ends_the_session() {
    let mut w = World::new();
    w.request(Request::Logout, 7);
    assert!(
        matches!(w.done[..], [(7, Ok(Reply::Logout(LogoutResult::CLOSED)))]),
        "{:?}",
        w.done
    );
    assert!(w.events.contains(&Event::LoggedOut {
        response: LogoutResult::CLOSED
    }));
    assert_eq!(w.last_event(), Some(&Event::Ended(End::LoggedOut)));
}

#[test]
fn every_request_comes_back_once_even_when_refused() {
    let mut w = World::new();
    w.core.handle_close(w.now);
    // Logging out: refused, and answered.
    w.request(Request::Ping, 1);
    assert!(
        matches!(w.done[..], [(1, Err(TaskError::Refused(_)))]),
        "{:?}",
        w.done
    );
    w.run();
    assert!(w.core.is_ended());
    // Ended: a SCSI command fails with why the session went.
    w.request(Request::Scsi(read(0, 512)), 2);
    assert!(
        matches!(w.done[..], [_, (2, Err(TaskError::ConnectionFailed(_)))]),
        "{:?}",
        w.done
    );
    assert!(w.orphans.is_empty());
}

#[test]
fn a_pdu_that_breaks_the_protocol_fails_the_connection_and_it_reconnects() {
    // An initiator opcode from the target: the connection cannot go on
    // (RFC 7143 §7.8); the session logs in again.
    let mut w = World::new();
    w.inject(Pdu::NopOut(Default::default()));
    assert!(
        w.events.iter().any(
            |e| matches!(e, Event::ConnectionFailed { why, .. } if why.contains("initiator opcode"))
        ),
        "{:?}",
        w.events
    );
    w.advance(Duration::from_millis(100));
    assert!(matches!(
        w.last_event(),
        Some(Event::LoggedIn {
            reinstated: true,
            ..
        })
    ));
}

#[test]
fn a_unit_attention_is_reported_and_the_command_sent_again() {
    let mut cfg = world::config();
    cfg.limits.unit_attention_retries = 1;
    let mut w = World::with(cfg);
    w.unit_attentions = 1;
    w.request(Request::Scsi(read(0, 512)), 1);
    assert!(
        matches!(&w.done[..], [(1, Ok(Reply::Scsi(r)))] if r.status == Status::GOOD),
        "{:?}",
        w.done
    );
    let reported = w
        .events
        .iter()
        .filter(|e| matches!(e, Event::UnitAttention { sense, .. } if sense.get(12) == Some(&0x29)))
        .count();
    assert_eq!(reported, 1, "{:?}", w.events);

    // Without retries left, the caller sees the CHECK CONDITION.
    let mut w = World::new();
    w.unit_attentions = 1;
    w.request(Request::Scsi(read(0, 512)), 1);
    assert!(
        matches!(&w.done[..], [(1, Ok(Reply::Scsi(r)))] if r.status == Status::CHECK_CONDITION),
        "{:?}",
        w.done
    );
    assert!(!w
        .events
        .iter()
        .any(|e| matches!(e, Event::UnitAttention { .. })));
}
