//! The ALUA chooser without sockets: reports parsed in both formats and
//! refused when short, each state's eligibility, sense that moves a
//! command, and choices across connection and access states.

use std::time::Duration;

use ironlun_proto::initiator::ScsiRequest;
use ironlun_scsi_codes::{Asc, SenseCode, SenseKey};

use super::*;
use crate::path::{LeastQueueDepth, PathState, PathView, RoundRobin};
use AccessState::*;

const READ10: [u8; 10] = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];
const INQUIRY: [u8; 6] = [0x12, 0, 0, 0, 96, 0];

fn req(cdb: &[u8]) -> ScsiRequest {
    let mut r = ScsiRequest::default();
    r.cdb[..cdb.len()].copy_from_slice(cdb);
    r
}

/// A group descriptor: state code, PREF, id, ports.
fn desc(state: u8, pref: bool, id: u16, ports: &[u16]) -> Vec<u8> {
    let mut d = vec![
        state | if pref { 0x80 } else { 0 },
        0x8f,
        (id >> 8) as u8,
        id as u8,
        0,
        0,
        0,
        ports.len() as u8,
    ];
    for p in ports {
        d.extend_from_slice(&[0, 0, (p >> 8) as u8, *p as u8]);
    }
    d
}

/// Parameter data: length-only, or extended with `secs` of transition.
fn rtpg_data(extended: Option<u8>, groups: &[Vec<u8>]) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(secs) = extended {
        body.extend_from_slice(&[0x10, secs, 0, 0]);
    }
    for g in groups {
        body.extend_from_slice(g);
    }
    let mut d = (body.len() as u32).to_be_bytes().to_vec();
    d.extend(body);
    d
}

fn two_groups(a: u8, b: u8) -> Report {
    parse_rtpg(&rtpg_data(
        None,
        &[desc(a, true, 1, &[1]), desc(b, false, 2, &[2])],
    ))
    .unwrap()
}

#[test]
fn both_report_formats_parse_to_the_same_groups() {
    let groups = [desc(0x0, true, 1, &[1]), desc(0x2, false, 2, &[2, 3])];
    let plain = parse_rtpg(&rtpg_data(None, &groups)).unwrap();
    let ext = parse_rtpg(&rtpg_data(Some(10), &groups)).unwrap();
    assert_eq!(plain.groups, ext.groups);
    assert_eq!(
        plain.groups,
        [
            PortGroup {
                id: 1,
                state: ActiveOptimized,
                preferred: true,
                ports: vec![1]
            },
            PortGroup {
                id: 2,
                state: Standby,
                preferred: false,
                ports: vec![2, 3]
            },
        ]
    );
    assert_eq!(plain.transition_time, None);
    assert_eq!(ext.transition_time, Some(Duration::from_secs(10)));
    let zero = parse_rtpg(&rtpg_data(Some(0), &groups)).unwrap();
    assert_eq!(zero.transition_time, None, "0: not specified");
    // What follows the RETURN DATA LENGTH is not read.
    let mut extra = rtpg_data(None, &groups);
    extra.extend_from_slice(&[0xff; 7]);
    assert_eq!(parse_rtpg(&extra).unwrap(), plain);
}

#[test]
fn short_or_bad_reports_are_errors_not_panics() {
    let groups = [desc(0x0, true, 1, &[1, 2])];
    let full = rtpg_data(Some(5), &groups);
    for cut in 0..full.len() {
        assert!(parse_rtpg(&full[..cut]).is_err(), "cut at {cut}");
    }
    // A descriptor whose port count runs past the data.
    let mut lying = rtpg_data(None, &groups);
    lying[4 + 7] = 9;
    assert!(matches!(parse_rtpg(&lying), Err(ReportError::Short { .. })));
    let reserved = rtpg_data(None, &[desc(0x7, false, 4, &[])]);
    assert_eq!(parse_rtpg(&reserved), Err(ReportError::ReservedState(4, 7)));
    let many: Vec<Vec<u8>> = (0..=MAX_GROUPS as u16)
        .map(|i| desc(0, false, i, &[]))
        .collect();
    assert_eq!(
        parse_rtpg(&rtpg_data(None, &many)),
        Err(ReportError::TooManyGroups)
    );
    assert_eq!(parse_rtpg(&rtpg_data(None, &[])).unwrap().groups, []);
}

#[test]
fn the_rtpg_cdb_asks_for_the_format() {
    let c = rtpg_cdb(true, RTPG_ALLOCATION);
    assert_eq!(c[0], 0xa3);
    assert_eq!(c[1], 0x2a);
    assert_eq!(
        u32::from_be_bytes(c[6..10].try_into().unwrap()),
        RTPG_ALLOCATION
    );
    assert_eq!(rtpg_cdb(false, 4)[1], 0x0a);
}

#[test]
fn inquiry_and_vpd_83_name_the_port_and_its_group() {
    let mut inq = vec![0u8; 36];
    inq[5] = 0x10;
    assert_eq!(tpgs(&inq), 1);
    inq[5] = 0x30;
    assert_eq!(tpgs(&inq), 3);
    assert_eq!(tpgs(&inq[..4]), 0);
    // NAA (LU), relative port 2 and group 7 (target port), and a group
    // designator associated with the LU, which is not ours.
    let mut page = vec![0, 0x83, 0, 0];
    page.extend_from_slice(&[1, 0x03, 0, 8, 0x60, 1, 2, 3, 4, 5, 6, 7]);
    page.extend_from_slice(&[1, 0x14, 0, 4, 0, 0, 0, 2]);
    page.extend_from_slice(&[1, 0x05, 0, 4, 0, 0, 0, 9]);
    page.extend_from_slice(&[1, 0x15, 0, 4, 0, 0, 0, 7]);
    let len = (page.len() - 4) as u16;
    page[2..4].copy_from_slice(&len.to_be_bytes());
    let id = parse_vpd83(&page);
    assert_eq!(
        id,
        PortIdentity {
            relative_port: Some(2),
            group: Some(7)
        }
    );
    for cut in 0..page.len() {
        let _ = parse_vpd83(&page[..cut]);
    }
    assert_eq!(parse_vpd83(&page[..28]).group, None);
}

#[test]
fn each_state_takes_what_spc5_lets_it() {
    let media = [
        &READ10[..],
        &[0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0],
        &[0x00; 6],
        &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ];
    let rtpg = rtpg_cdb(false, 64);
    for cdb in media {
        assert_eq!(rank(Some(ActiveOptimized), cdb), Some(0));
        assert_eq!(rank(None, cdb), Some(0), "symmetric access");
        assert_eq!(rank(Some(ActiveNonOptimized), cdb), Some(1));
        for s in [Standby, Unavailable, Transitioning, Offline] {
            assert_eq!(rank(Some(s), cdb), None, "{s} takes no {:02x}", cdb[0]);
        }
    }
    for cdb in [&INQUIRY[..], &rtpg[..], &[0xa0; 12], &[0x03; 6]] {
        assert!(served_in_every_state(cdb));
        for s in [Standby, Unavailable, Transitioning] {
            assert_eq!(rank(Some(s), cdb), Some(2));
        }
    }
    assert!(
        !served_in_every_state(&[0xa3, 0x05, 0, 0]),
        "other MAINTENANCE IN"
    );
    assert!(!served_in_every_state(&[]));
}

/// Fixed format sense data (SPC-5 §4.4.3).
fn sense(key: SenseKey, asc: Asc) -> Vec<u8> {
    let mut s = vec![
        0x70, 0, key.0, 0, 0, 0, 0, 10, 0, 0, 0, 0, asc.0, asc.1, 0, 0, 0, 0,
    ];
    assert_eq!(SenseCode::parse(&s), Some(SenseCode::new(key, asc)));
    s.truncate(18);
    s
}

#[test]
fn alua_sense_says_what_to_do() {
    use AluaSignal::*;
    let cases = [
        (
            SenseKey::UNIT_ATTENTION,
            Asc::ASYMMETRIC_ACCESS_STATE_CHANGED,
            StateChanged,
        ),
        (
            SenseKey::UNIT_ATTENTION,
            Asc::IMPLICIT_ASYMMETRIC_ACCESS_STATE_TRANSITION_FAILED,
            TransitionFailed,
        ),
        (
            SenseKey::NOT_READY,
            Asc::LU_NOT_ACCESSIBLE_ASYMMETRIC_ACCESS_STATE_TRANSITION,
            Transitioning,
        ),
        (
            SenseKey::NOT_READY,
            Asc::LU_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE,
            Standby,
        ),
        (
            SenseKey::NOT_READY,
            Asc::LU_NOT_ACCESSIBLE_TARGET_PORT_IN_UNAVAILABLE_STATE,
            Unavailable,
        ),
    ];
    for (key, asc, want) in cases {
        assert_eq!(AluaSignal::of(&sense(key, asc)), Some(want), "{asc:?}");
    }
    assert!(!StateChanged.reissue() && !TransitionFailed.reissue());
    assert!(Transitioning.reissue() && Standby.reissue() && Unavailable.reissue());
    assert_eq!(Standby.state(), Some(AccessState::Standby));
    // Not ALUA: the same ASC under another key, other NOT READY codes,
    // no sense.
    for (key, asc) in [
        (
            SenseKey::ILLEGAL_REQUEST,
            Asc::LU_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE,
        ),
        (SenseKey::NOT_READY, Asc::LU_NOT_READY_BECOMING_READY),
        (SenseKey::UNIT_ATTENTION, Asc::CAPACITY_DATA_HAS_CHANGED),
    ] {
        assert_eq!(AluaSignal::of(&sense(key, asc)), None);
    }
    assert_eq!(AluaSignal::of(&[]), None);
    assert_eq!(hold_limit(None), DEFAULT_HOLD);
    assert_eq!(
        hold_limit(Some(Duration::from_secs(3))),
        Duration::from_secs(3)
    );
}

fn views(v: &[PathState]) -> Vec<PathView> {
    v.iter()
        .map(|&state| PathView {
            state,
            in_flight: 0,
        })
        .collect()
}

/// Two paths, path `i` through port/group `i + 1`, their states read
/// from `report` through each.
fn known(report: &Report) -> AluaPaths {
    let mut a = AluaPaths::new(2);
    for i in 0..2 {
        let n = i as u16 + 1;
        a.set_port(
            i,
            PortIdentity {
                relative_port: Some(n),
                group: Some(n),
            },
        );
        a.apply_report(i, report);
    }
    a
}

fn decide_n(a: &AluaPaths, cdb: &[u8], v: &[PathView], n: usize) -> Vec<Decision> {
    let rr = RoundRobin::default();
    (0..n).map(|_| a.decide(&req(cdb), v, &rr)).collect()
}

#[test]
fn optimized_paths_take_media_access_and_others_only_when_none_is() {
    use PathState::*;
    let up = views(&[Connected, Connected]);
    let a = known(&two_groups(0x0, 0x1));
    assert_eq!(a.path(0).unwrap().state, Some(ActiveOptimized));
    assert!(a.path(0).unwrap().preferred);
    assert_eq!(decide_n(&a, &READ10, &up, 3), [Decision::Send(0); 3]);
    // The optimized path between connections: the non-optimized one,
    // connected, takes the command instead of it waiting.
    let lost = views(&[Reconnecting, Connected]);
    assert_eq!(decide_n(&a, &READ10, &lost, 2), [Decision::Send(1); 2]);
    let retired = views(&[Retired, Connected]);
    assert_eq!(decide_n(&a, &READ10, &retired, 1), [Decision::Send(1)]);
    // Both optimized: the inner policy spreads them.
    let both = known(&two_groups(0x0, 0x0));
    assert_eq!(
        decide_n(&both, &READ10, &up, 2),
        [Decision::Send(0), Decision::Send(1)]
    );
    let mut busy = views(&[Connected, Connected]);
    busy[0].in_flight = 5;
    assert_eq!(
        both.decide(&req(&READ10), &busy, &LeastQueueDepth),
        Decision::Send(1)
    );
}

#[test]
fn standby_never_gets_media_access_and_commands_wait_for_a_state_change() {
    use PathState::*;
    let up = views(&[Connected, Connected]);
    let a = known(&two_groups(0x2, 0x0));
    assert_eq!(decide_n(&a, &READ10, &up, 3), [Decision::Send(1); 3]);
    // The optimized path gone: nothing takes media access, so it waits
    // (the standby one may become active); INQUIRY goes to standby.
    let lost = views(&[Connected, Retired]);
    assert_eq!(decide_n(&a, &READ10, &lost, 1), [Decision::Hold]);
    assert_eq!(decide_n(&a, &INQUIRY, &lost, 1), [Decision::Send(0)]);
    for s in [0x3, 0xf, 0xe] {
        let b = known(&two_groups(s, 0x2));
        assert_eq!(
            decide_n(&b, &READ10, &up, 1),
            [Decision::Hold],
            "state {s:#x}"
        );
    }
    assert_eq!(
        decide_n(&a, &READ10, &views(&[Retired, Retired]), 1),
        [Decision::NoPath]
    );
}

#[test]
fn sense_and_reports_move_the_commands() {
    use PathState::*;
    let up = views(&[Connected, Connected]);
    let mut a = known(&two_groups(0x0, 0x1));
    // Path 0 answers TARGET PORT IN STANDBY STATE: the command goes to
    // path 1 before the report is read again.
    assert_eq!(
        a.apply_signal(0, AluaSignal::Standby),
        Some((Some(ActiveOptimized), Standby))
    );
    assert_eq!(a.apply_signal(0, AluaSignal::Standby), None, "no change");
    assert_eq!(decide_n(&a, &READ10, &up, 1), [Decision::Send(1)]);
    // A unit attention names no state.
    assert_eq!(a.apply_signal(1, AluaSignal::StateChanged), None);
    assert_eq!(a.path(1).unwrap().state, Some(ActiveNonOptimized));
    // Reports read through each path after a swap: path 1 optimized.
    let swapped = two_groups(0x2, 0x0);
    assert_eq!(a.apply_report(0, &swapped), None, "path 0 already standby");
    assert_eq!(
        a.apply_report(1, &swapped),
        Some((Some(ActiveNonOptimized), ActiveOptimized))
    );
    assert_eq!(decide_n(&a, &READ10, &up, 2), [Decision::Send(1); 2]);
    // Transitioning: held, then sent when the report says it is done.
    let mut t = known(&two_groups(0x0, 0x2));
    t.apply_signal(0, AluaSignal::Transitioning);
    assert_eq!(decide_n(&t, &READ10, &up, 1), [Decision::Hold]);
    t.apply_report(0, &two_groups(0x0, 0x2));
    assert_eq!(decide_n(&t, &READ10, &up, 1), [Decision::Send(0)]);
}

#[test]
fn a_path_is_found_by_its_port_when_vpd_names_no_group() {
    let mut a = AluaPaths::new(1);
    a.set_port(
        0,
        PortIdentity {
            relative_port: Some(3),
            group: None,
        },
    );
    let r = parse_rtpg(&rtpg_data(
        Some(4),
        &[desc(0x1, false, 1, &[1]), desc(0x0, false, 2, &[2, 3])],
    ))
    .unwrap();
    assert_eq!(a.apply_report(0, &r), Some((None, ActiveOptimized)));
    assert_eq!(a.hold_limit(), Duration::from_secs(4));
    // A port no group lists keeps what it had.
    let mut b = AluaPaths::new(1);
    assert_eq!(b.apply_report(0, &r), None);
    assert_eq!(b.path(0).unwrap().state, None);
    assert_eq!(b.apply_report(5, &r), None, "no such path");
}
