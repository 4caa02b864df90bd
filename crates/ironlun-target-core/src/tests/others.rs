//! Another session's task management ending this session's tasks: TASK
//! ABORTED with TAS=1, silence with TAS=0 (SAM-5 §5.6, SPC-5 §7.5.8), and
//! the requester's response held until they are gone and acknowledged
//! (RFC 7143 §4.2.3.3), within a bound.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ironlun_backend::RamBackend;
use ironlun_scsi::{LogicalUnit, LunMap};
use ironlun_scsi_codes::{opcode, SenseKey, Status};
use ironlun_wire::{
    DataOut, Lun, NopOut, Pdu, ScsiCommand, TmfFunction, TmfResponse, RESERVED_TAG,
};

use super::{lu_config, ram_map, set_tas, Session};
use crate::{AbortHold, Action, Dispatch, SessionSignal, OTHERS_WAIT_LIMIT};

/// A SCSI status the target sent: ITT, status, StatSN, ExpCmdSN, MaxCmdSN.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    itt: u32,
    status: Status,
    stat_sn: u32,
    exp_cmd_sn: u32,
    max_cmd_sn: u32,
}

/// What one session's connection sent, sorted by kind.
#[derive(Debug, Default)]
struct Sent {
    statuses: Vec<Answer>,
    /// NOP-Ins asking for an answer: (TTT, StatSN).
    pings: Vec<(u32, u32)>,
    r2ts: Vec<(u32, u32)>,
    tmf: Vec<(u32, TmfResponse)>,
    other: usize,
}

impl Session {
    fn sent(&mut self) -> Sent {
        let mut s = Sent::default();
        while let Some(p) = self.core.poll_transmit() {
            match p.pdu {
                Pdu::ScsiResponse(r) => s.statuses.push(Answer {
                    itt: r.itt,
                    status: r.status,
                    stat_sn: r.stat_sn,
                    exp_cmd_sn: r.exp_cmd_sn,
                    max_cmd_sn: r.max_cmd_sn,
                }),
                Pdu::DataIn(d) if d.status.is_some() => s.statuses.push(Answer {
                    itt: d.itt,
                    status: d.status.unwrap_or_default(),
                    stat_sn: d.stat_sn,
                    exp_cmd_sn: d.exp_cmd_sn,
                    max_cmd_sn: d.max_cmd_sn,
                }),
                Pdu::NopIn(n) if n.itt == RESERVED_TAG => s.pings.push((n.ttt, n.stat_sn)),
                Pdu::R2t(r) => s.r2ts.push((r.itt, r.ttt)),
                Pdu::TaskMgmtResponse(r) => s.tmf.push((r.itt, r.response)),
                _ => s.other += 1,
            }
        }
        s
    }

    /// A READ(10) of one block on `lun`.
    fn read_on(&mut self, itt: u32, lun: u16) {
        self.scsi(
            itt,
            lun,
            [opcode::READ_10, 0, 0, 0, 0, 8, 0, 0, 1, 0],
            512,
            false,
        );
    }

    /// A WRITE(10) of one block with no data: it waits for its R2T's
    /// Data-Out. Returns the R2T's TTT.
    fn write_waiting(&mut self, itt: u32) -> u32 {
        self.scsi(
            itt,
            0,
            [opcode::WRITE_10, 0, 0, 0, 0, 16, 0, 0, 1, 0],
            512,
            true,
        );
        let r2ts = self.sent().r2ts;
        assert_eq!(r2ts.len(), 1, "no R2T for the write");
        r2ts[0].1
    }

    fn scsi(&mut self, itt: u32, lun: u16, cdb10: [u8; 10], len: u32, write: bool) {
        let mut cdb = [0u8; 16];
        cdb[..10].copy_from_slice(&cdb10);
        self.cmd_sn += 1;
        self.send(Pdu::ScsiCommand(ScsiCommand {
            immediate: false,
            final_bit: true,
            read: !write,
            write,
            attr: 1,
            lun: Lun::from_index(lun),
            itt,
            expected_data_transfer_length: len,
            cmd_sn: self.cmd_sn - 1,
            exp_stat_sn: 0,
            cdb,
        }));
    }

    fn data_out(&mut self, itt: u32, ttt: u32) {
        let pdu = Pdu::DataOut(DataOut {
            final_bit: true,
            lun: Lun::from_index(0),
            itt,
            ttt,
            exp_stat_sn: 0,
            data_sn: 0,
            buffer_offset: 0,
        });
        self.send_with(pdu, Bytes::from_static(&[0x5a; 512]));
    }

    /// The answer to a NOP-In: its TTT, and our ExpStatSN.
    fn nop_out(&mut self, ttt: u32, exp_stat_sn: u32) {
        self.send(Pdu::NopOut(NopOut {
            immediate: true,
            lun: Lun::default(),
            itt: RESERVED_TAG,
            ttt,
            cmd_sn: self.cmd_sn,
            exp_stat_sn,
        }));
    }
}

/// The abort a task management request asked of the other sessions,
/// with the wait it carries.
fn abort_signal(actions: Vec<Action>) -> (Option<u16>, bool, AbortHold) {
    let found = actions.into_iter().find_map(|a| match a {
        Action::Signal {
            signal: SessionSignal::Abort { lun, cleared, hold },
            ..
        } => Some((lun, cleared, hold)),
        _ => None,
    });
    let Some((lun, cleared, Some(hold))) = found else {
        panic!("no abort with a wait for the other sessions");
    };
    (lun, cleared, hold)
}

/// The driver's delivery: the recipient gets a share, the signal's own
/// is dropped.
fn deliver(to: &mut Session, (lun, cleared, hold): (Option<u16>, bool, AbortHold)) -> usize {
    let n = to.core.abort_for_other(lun, cleared, Some(hold.clone()));
    drop(hold);
    n
}

/// Takes the one command the driver was handed.
fn held(s: &mut Session) -> crate::Command {
    let mut actions = s.actions();
    let Some(Action::Run(cmd)) = actions.pop() else {
        panic!("no command handed out");
    };
    assert!(actions.is_empty());
    cmd
}

#[test]
fn tas_1_answers_task_aborted_and_the_reset_waits_for_the_acknowledgement() {
    let map = ram_map();
    let mut a = Session::new(&map, 1, Dispatch::Inline, true);
    let mut b = Session::new(&map, 2, Dispatch::Driver, true);
    // B: a READ its slow backend holds, and a WRITE waiting for data.
    b.read_on(5, 0);
    let read = held(&mut b);
    let ttt = b.write_waiting(6);
    a.tmf(7, TmfFunction::LOGICAL_UNIT_RESET);
    let signal = abort_signal(a.actions());
    assert_eq!((signal.0, signal.1), (Some(0), false));
    assert!(a.sent().tmf.is_empty(), "answered before B's tasks ended");

    assert_eq!(deliver(&mut b, signal), 2);
    // The write waiting for its data ends at once.
    let first = b.sent();
    assert_eq!(first.statuses.len(), 1, "{first:?}");
    assert_eq!(
        (first.statuses[0].itt, first.statuses[0].status),
        (6, Status::TASK_ABORTED)
    );
    // Data-Out the initiator had already sent for it is discarded.
    b.data_out(6, ttt);
    let late = b.sent();
    assert!(late.statuses.is_empty() && late.other == 0, "{late:?}");
    assert!(a.sent().tmf.is_empty(), "answered while B's READ runs");

    // The READ finishes on the backend: TASK ABORTED, no data, then a
    // NOP-In asking B to acknowledge.
    b.core.completed(read.run());
    let second = b.sent();
    assert_eq!(second.other, 0, "data sent for an aborted read: {second:?}");
    let [st] = &second.statuses[..] else {
        panic!("{second:?}");
    };
    assert_eq!((st.itt, st.status), (5, Status::TASK_ABORTED));
    // StatSN goes on by one per status; the NOP-In carries the next one
    // without taking it; every window slot is free again.
    assert_eq!(st.stat_sn, first.statuses[0].stat_sn + 1);
    assert_eq!(st.max_cmd_sn, st.exp_cmd_sn + 7);
    assert_eq!(st.exp_cmd_sn, b.cmd_sn);
    let [(ping, ping_sn)] = second.pings[..] else {
        panic!("no NOP-In asking for acknowledgement: {second:?}");
    };
    assert_eq!(ping_sn, st.stat_sn + 1);
    assert!(a.sent().tmf.is_empty(), "answered before B acknowledged");

    // An answer that acknowledges only the first status: asked again.
    b.nop_out(ping, st.stat_sn);
    let again = b.sent();
    let [(ping2, _)] = again.pings[..] else {
        panic!("not asked again: {again:?}");
    };
    assert_ne!(ping2, ping);
    assert!(a.sent().tmf.is_empty());
    b.nop_out(ping2, st.stat_sn + 1);
    assert!(b.sent().pings.is_empty());
    assert_eq!(a.sent().tmf, vec![(7, TmfResponse::FUNCTION_COMPLETE)]);
    // B learns of the reset itself on its next command (SAM-5 §6.3.3).
    let itt = b.command(8, [0; 10], 0);
    let done = held(&mut b).run();
    b.core.completed(done);
    assert_eq!(
        b.answer(itt),
        Some((
            Status::CHECK_CONDITION,
            Some((SenseKey::UNIT_ATTENTION, 0x29))
        ))
    );
}

#[test]
fn tas_0_ends_them_silently_and_the_reset_waits_only_for_their_end() {
    let map = ram_map();
    set_tas(&map, false);
    let mut a = Session::new(&map, 1, Dispatch::Inline, true);
    let mut b = Session::new(&map, 2, Dispatch::Driver, true);
    b.read_on(5, 0);
    let read = held(&mut b);
    b.write_waiting(6);
    a.tmf(7, TmfFunction::LOGICAL_UNIT_RESET);
    let signal = abort_signal(a.actions());
    assert_eq!(deliver(&mut b, signal), 2);
    let s = b.sent();
    assert!(s.statuses.is_empty() && s.pings.is_empty(), "{s:?}");
    assert!(a.sent().tmf.is_empty(), "answered while B's READ runs");
    b.core.completed(read.run());
    let s = b.sent();
    assert!(s.statuses.is_empty() && s.pings.is_empty(), "{s:?}");
    assert_eq!(a.sent().tmf, vec![(7, TmfResponse::FUNCTION_COMPLETE)]);
}

#[test]
fn clear_task_set_with_tas_1_answers_instead_of_a_unit_attention() {
    let map = ram_map();
    let mut a = Session::new(&map, 1, Dispatch::Inline, true);
    let mut b = Session::new(&map, 2, Dispatch::Driver, true);
    b.read_on(5, 0);
    let read = held(&mut b);
    a.tmf(7, TmfFunction::CLEAR_TASK_SET);
    let signal = abort_signal(a.actions());
    assert_eq!((signal.0, signal.1), (Some(0), true));
    assert_eq!(deliver(&mut b, signal), 1);
    b.core.completed(read.run());
    let s = b.sent();
    assert_eq!(s.statuses.len(), 1);
    assert_eq!(s.statuses[0].status, Status::TASK_ABORTED);
    let (ping, _) = s.pings[0];
    b.nop_out(ping, s.statuses[0].stat_sn + 1);
    assert_eq!(a.sent().tmf, vec![(7, TmfResponse::FUNCTION_COMPLETE)]);
    // No COMMANDS CLEARED BY ANOTHER INITIATOR: the status said it.
    let itt = b.command(8, [0; 10], 0);
    let done = held(&mut b).run();
    b.core.completed(done);
    assert_eq!(b.answer(itt), Some((Status::GOOD, None)));
}

#[test]
fn target_warm_reset_answers_the_tasks_on_every_lun() {
    let lu =
        |_| Arc::new(LogicalUnit::new(lu_config(), Arc::new(RamBackend::new(1 << 20))).unwrap());
    let map = Arc::new(LunMap::new(vec![(0, lu(0)), (1, lu(1))]));
    let mut a = Session::new(&map, 1, Dispatch::Inline, true);
    let mut b = Session::new(&map, 2, Dispatch::Driver, true);
    b.read_on(5, 0);
    let r0 = held(&mut b);
    b.read_on(6, 1);
    let r1 = held(&mut b);
    a.tmf(7, TmfFunction::TARGET_WARM_RESET);
    let signal = abort_signal(a.actions());
    assert_eq!(signal.0, None);
    assert_eq!(deliver(&mut b, signal), 2);
    b.core.completed(r1.run());
    b.core.completed(r0.run());
    let s = b.sent();
    let got: Vec<(u32, Status)> = s.statuses.iter().map(|st| (st.itt, st.status)).collect();
    assert_eq!(
        got,
        vec![(6, Status::TASK_ABORTED), (5, Status::TASK_ABORTED)]
    );
    assert!(a.sent().tmf.is_empty());
    let last = s.statuses[1].stat_sn;
    b.nop_out(s.pings[0].0, last + 1);
    assert_eq!(a.sent().tmf, vec![(7, TmfResponse::FUNCTION_COMPLETE)]);
}

#[test]
fn the_requesters_own_aborted_tasks_get_no_response_and_are_waited_for() {
    let map = ram_map();
    let mut a = Session::new(&map, 1, Dispatch::Driver, true);
    a.read_on(3, 0);
    let own = held(&mut a);
    a.tmf(7, TmfFunction::LOGICAL_UNIT_RESET);
    // Nobody else: the signal's hold is dropped with the action.
    drop(abort_signal(a.actions()));
    assert!(a.sent().tmf.is_empty(), "answered while its own READ runs");
    a.core.completed(own.run());
    let s = a.sent();
    assert!(
        s.statuses.is_empty(),
        "the requester's task answered: {s:?}"
    );
    assert_eq!(s.tmf, vec![(7, TmfResponse::FUNCTION_COMPLETE)]);
}

#[test]
fn the_wait_is_bounded() {
    let map = ram_map();
    let mut a = Session::new(&map, 1, Dispatch::Inline, true);
    a.tmf(7, TmfFunction::LOGICAL_UNIT_RESET);
    // A recipient that never lets go.
    let stuck = abort_signal(a.actions()).2;
    let deadline = a.now + OTHERS_WAIT_LIMIT;
    assert_eq!(a.core.poll_timeout(), Some(deadline));
    a.core.handle_timeout(deadline - Duration::from_millis(1));
    assert!(a.sent().tmf.is_empty());
    a.core.handle_timeout(deadline);
    assert_eq!(a.sent().tmf, vec![(7, TmfResponse::FUNCTION_COMPLETE)]);
    assert_eq!(a.core.poll_timeout(), None);
    drop(stuck);
}

#[test]
fn a_recipient_going_away_releases_the_wait() {
    let map = ram_map();
    let mut a = Session::new(&map, 1, Dispatch::Inline, true);
    let mut b = Session::new(&map, 2, Dispatch::Driver, true);
    let mut c = Session::new(&map, 3, Dispatch::Driver, true);
    b.read_on(5, 0);
    let read = held(&mut b);
    c.read_on(5, 0);
    let _never = held(&mut c);
    a.tmf(7, TmfFunction::LOGICAL_UNIT_RESET);
    let (lun, cleared, hold) = abort_signal(a.actions());
    c.core.abort_for_other(lun, cleared, Some(hold.clone()));
    deliver(&mut b, (lun, cleared, hold));
    // B stops serving: its task's end is enough, no acknowledgement.
    b.core.connection_ending();
    b.core.completed(read.run());
    assert!(a.sent().tmf.is_empty(), "C still holds its share");
    // C's connection is dropped with its command still running.
    drop(c);
    assert_eq!(a.sent().tmf, vec![(7, TmfResponse::FUNCTION_COMPLETE)]);
}

#[test]
fn two_sessions_resetting_each_other_both_get_answers() {
    let map = ram_map();
    let mut a = Session::new(&map, 1, Dispatch::Driver, true);
    let mut b = Session::new(&map, 2, Dispatch::Driver, true);
    a.read_on(3, 0);
    let ra = held(&mut a);
    b.read_on(4, 0);
    let rb = held(&mut b);
    a.tmf(7, TmfFunction::LOGICAL_UNIT_RESET);
    b.tmf(8, TmfFunction::LOGICAL_UNIT_RESET);
    let from_a = abort_signal(a.actions());
    let from_b = abort_signal(b.actions());
    // Each task was already aborted by its own session's reset: silent.
    deliver(&mut b, from_a);
    deliver(&mut a, from_b);
    a.core.completed(ra.run());
    b.core.completed(rb.run());
    let (sa, sb) = (a.sent(), b.sent());
    assert!(sa.statuses.is_empty() && sb.statuses.is_empty());
    assert_eq!(sa.tmf, vec![(7, TmfResponse::FUNCTION_COMPLETE)]);
    assert_eq!(sb.tmf, vec![(8, TmfResponse::FUNCTION_COMPLETE)]);
}
