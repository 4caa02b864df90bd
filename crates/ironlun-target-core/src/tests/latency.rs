//! Latency: from a SCSI Command PDU's arrival to the driver handing its
//! status to the socket, into the LU's histogram under the kind its
//! counters counted the command as.

use std::time::Duration;

use ironlun_scsi::IoKind;

use super::*;

fn reads_timed(map: &Arc<LunMap>) -> (u64, u64) {
    let h = map.get(0).unwrap().latency(IoKind::Read);
    (h.count(), h.sum_ns)
}

#[test]
fn an_inline_command_is_timed_when_its_status_is_sent() {
    let map = ram_map();
    let mut s = Session::new(&map, 1, Dispatch::Inline, true);
    s.core.measure_latency();
    let t0 = s.now;
    s.read(1);
    s.core.statuses_sent(|| t0 + Duration::from_micros(300));
    assert_eq!(reads_timed(&map), (1, 300_000));
    // Nothing more to time: the clock is not even asked.
    s.core.statuses_sent(|| panic!("nothing was answered"));
    assert_eq!(s.answer(1), Some((Status::GOOD, None)));
}

#[test]
fn a_command_handed_out_is_timed_from_its_arrival() {
    let map = ram_map();
    let mut s = Session::new(&map, 1, Dispatch::Driver, true);
    s.core.measure_latency();
    let t0 = s.now;
    s.read(1);
    let Some(Action::Run(cmd)) = s.actions().pop() else {
        panic!("the READ was not handed out");
    };
    s.core.statuses_sent(|| panic!("not answered yet"));
    s.core.completed(cmd.run());
    s.core.statuses_sent(|| t0 + Duration::from_millis(7));
    assert_eq!(reads_timed(&map), (1, 7_000_000));
    let other = map.get(0).unwrap().latency(IoKind::Other);
    assert_eq!(other.count(), 0, "the unit attention's TUR came before");
}

#[test]
fn without_measure_latency_nothing_is_kept() {
    let map = ram_map();
    let mut s = Session::new(&map, 1, Dispatch::Inline, true);
    s.read(1);
    s.core.statuses_sent(|| panic!("latency is not measured"));
    assert_eq!(reads_timed(&map), (0, 0));
}

#[test]
fn an_aborted_command_has_no_latency() {
    let map = ram_map();
    let mut s = Session::new(&map, 1, Dispatch::Driver, true);
    s.core.measure_latency();
    s.read(1);
    let Some(Action::Run(cmd)) = s.actions().pop() else {
        panic!("the READ was not handed out");
    };
    s.tmf(9, TmfFunction::ABORT_TASK_SET);
    s.core.completed(cmd.run());
    s.core
        .statuses_sent(|| panic!("no status went out for the read"));
    assert_eq!(reads_timed(&map), (0, 0));
}

#[test]
fn a_status_for_a_lun_remapped_meanwhile_is_not_timed_on_the_new_lu() {
    let map = ram_map();
    let mut s = Session::new(&map, 1, Dispatch::Driver, true);
    s.core.measure_latency();
    // Answered, not yet sent: the LU at LUN 0 stays in the new map.
    s.read(1);
    let Some(Action::Run(cmd)) = s.actions().pop() else {
        panic!("the READ was not handed out");
    };
    s.core.completed(cmd.run());
    let same = Arc::new(LunMap::new(vec![(0, map.get(0).unwrap().clone())]));
    s.core.set_map(same.clone());
    s.core.statuses_sent(|| s.now);
    assert_eq!(reads_timed(&map).0, 1);
    // Answered, then LUN 0 becomes another LU before the status leaves.
    s.read(2);
    let Some(Action::Run(cmd)) = s.actions().pop() else {
        panic!("the READ was not handed out");
    };
    s.core.completed(cmd.run());
    let other = ram_map();
    s.core.set_map(other.clone());
    s.core.statuses_sent(|| panic!("nothing left to time"));
    assert_eq!(reads_timed(&map).0, 1, "the old LU");
    assert_eq!(reads_timed(&other).0, 0, "the new LU");
}
