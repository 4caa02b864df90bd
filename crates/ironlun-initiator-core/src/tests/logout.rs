//! A logout the target asks for (RFC 7143 §11.9.1, AsyncEvent 1): the
//! initiator sends a Logout within Parameter3 seconds and closes after
//! the Logout Response, then logs in again.

use std::time::Duration;

use ironlun_proto::initiator::Reply;
use ironlun_wire::{AsyncEvent, AsyncMessage, LogoutReason, LogoutResult, Pdu};

use super::world::{read, World};
use crate::{Event, Phase, Request, LOGOUT_WAIT};

/// The PDUs the target received after the `n`th.
fn since(w: &World, n: usize) -> Vec<&Pdu> {
    w.received.iter().skip(n).collect()
}

/// A session with a read (token 1) held by the device, whose target
/// then asks for a logout within `secs` seconds.
fn asked_to_log_out_with_a_read_held(secs: u64) -> World {
    let mut w = World::new();
    w.hold = true;
    w.request(Request::Scsi(read(0, 512)), 1);
    let now = w.now;
    w.target().request_logout(now, Duration::from_secs(secs));
    w.run();
    w
}

#[test]
fn a_logout_the_target_asks_for_is_sent_and_the_session_logs_in_again() {
    let mut w = World::new();
    let before = w.received.len();
    let now = w.now;
    w.target().request_logout(now, Duration::from_secs(10));
    w.run();
    assert!(
        w.events.iter().any(|e| matches!(
            e,
            Event::Async {
                event: AsyncEvent::LOGOUT_REQUEST,
                parameters: [_, _, 10],
                ..
            }
        )),
        "{:?}",
        w.events
    );
    // A Logout Request, reason 0 (close the session), was the answer:
    // not a dropped connection.
    match since(&w, before)[..] {
        [Pdu::LogoutRequest(l)] => assert_eq!(l.reason, LogoutReason::CLOSE_SESSION),
        ref other => panic!("the target received {other:?}"),
    }
    assert!(w.events.contains(&Event::LoggedOut {
        response: LogoutResult::CLOSED
    }));
    assert!(
        !w.events
            .iter()
            .any(|e| matches!(e, Event::ConnectionFailed { .. })),
        "{:?}",
        w.events
    );
    assert_eq!(w.core.phase(), Phase::Waiting);
    // The session logs in again after the back-off.
    w.advance(Duration::from_millis(100));
    assert!(
        matches!(
            w.last_event(),
            Some(Event::LoggedIn {
                reinstated: true,
                ..
            })
        ),
        "{:?}",
        w.events
    );
    assert_eq!(w.connections, 2);
    w.request(Request::Scsi(read(0, 512)), 1);
    assert!(
        matches!(w.done[..], [(1, Ok(Reply::Scsi(_)))]),
        "{:?}",
        w.done
    );
}

#[test]
fn a_requested_logout_waits_for_the_commands_in_flight() {
    let mut w = asked_to_log_out_with_a_read_held(10);
    let before = w.received.len();
    // No Logout yet, and no new request taken meanwhile.
    assert_eq!(w.logouts(), 0);
    assert!(!w.core.accepts_requests());
    w.release();
    assert!(
        matches!(w.done[..], [(1, Ok(Reply::Scsi(_)))]),
        "{:?}",
        w.done
    );
    assert!(
        matches!(since(&w, before)[..], [Pdu::LogoutRequest(_)]),
        "{:?}",
        since(&w, before)
    );
}

#[test]
fn a_requested_logout_goes_out_within_parameter3_even_with_commands_held() {
    let mut w = asked_to_log_out_with_a_read_held(10);
    w.advance(Duration::from_millis(4999));
    assert_eq!(w.logouts(), 0);
    w.advance(Duration::from_millis(1));
    assert_eq!(w.logouts(), 1, "no Logout 5 s into a 10 s allowance");
    // The target answers once its task has ended (RFC 7143 §11.14).
    w.release();
    assert!(
        matches!(w.done[..], [(1, Ok(Reply::Scsi(_)))]),
        "{:?}",
        w.done
    );
    assert!(w.events.contains(&Event::LoggedOut {
        response: LogoutResult::CLOSED
    }));
    assert_eq!(w.core.phase(), Phase::Waiting);
}

#[test]
fn an_unanswered_logout_ends_the_connection_and_its_commands_run_again() {
    let mut w = asked_to_log_out_with_a_read_held(0);
    assert_eq!(
        w.logouts(),
        1,
        "Parameter3 = 0: the Logout goes out at once"
    );
    w.advance(LOGOUT_WAIT);
    assert!(
        w.events.contains(&Event::ConnectionFailed {
            why: "no Logout Response within 5 s".into(),
            taken_back: 1
        }),
        "{:?}",
        w.events
    );
    assert!(w.done.is_empty(), "{:?}", w.done);
    w.hold = false;
    w.advance(Duration::from_millis(100));
    assert!(
        matches!(w.last_event(), Some(Event::LoggedIn { reissued: 1, .. })),
        "{:?}",
        w.events
    );
    assert!(
        matches!(w.done[..], [(1, Ok(Reply::Scsi(_)))]),
        "{:?}",
        w.done
    );
}

#[test]
fn a_connection_drop_ends_the_connection_without_a_logout() {
    let mut w = World::new();
    let msg = AsyncMessage {
        async_event: AsyncEvent::CONNECTION_DROP,
        parameter2: 2,
        parameter3: 20,
        ..AsyncMessage::default()
    };
    w.inject(Pdu::AsyncMessage(msg));
    assert_eq!(w.logouts(), 0);
    assert!(
        w.events
            .iter()
            .any(|e| matches!(e, Event::ConnectionFailed { .. })),
        "{:?}",
        w.events
    );
    assert_eq!(w.core.phase(), Phase::Waiting);
}

#[test]
fn the_callers_logout_while_the_targets_waits_is_sent_and_ends_the_session() {
    let mut w = asked_to_log_out_with_a_read_held(10);
    assert_eq!(w.logouts(), 0, "the read is still in flight");
    w.request(Request::Logout, 2);
    assert_eq!(w.logouts(), 1, "the caller's Logout goes out at once");
    w.release();
    assert!(
        matches!(
            w.done[..],
            [
                (1, Ok(Reply::Scsi(_))),
                (2, Ok(Reply::Logout(LogoutResult::CLOSED)))
            ]
        ),
        "{:?}",
        w.done
    );
    assert_eq!(w.last_event(), Some(&Event::Ended(crate::End::LoggedOut)));
    assert_eq!(w.connections, 1, "no new login after the caller's logout");
}
