//! ALUA: INQUIRY's TPGS and VPD 83h designators, REPORT and SET TARGET
//! PORT GROUPS byte by byte, what each state serves and the sense of what
//! it refuses, and the unit attentions of every change.

use std::sync::{Arc, Mutex};

use ironlun_backend::RamBackend;
use ironlun_scsi_codes::{opcode, SenseKey, Status};

use super::*;
use crate::test_util::{cfg, id, lu_with, read10, run, run_out, sense_of, write10, N};
use crate::{DataOutBuffer, LogicalUnit, LunMap, NexusId, Response};

const OTHER: NexusId = NexusId(2);
const TUR: [u8; 6] = [0; 6];

const STANDBY: (SenseKey, u8, u8) = (SenseKey::NOT_READY, 0x04, 0x0b);
const UNAVAILABLE: (SenseKey, u8, u8) = (SenseKey::NOT_READY, 0x04, 0x0c);
const TRANSITION: (SenseKey, u8, u8) = (SenseKey::NOT_READY, 0x04, 0x0a);
const STATE_CHANGED: (SenseKey, u8, u8) = (SenseKey::UNIT_ATTENTION, 0x2a, 0x06);
const INVALID_PARAM: (SenseKey, u8, u8) = (SenseKey::ILLEGAL_REQUEST, 0x26, 0x00);

fn group(id: u16, ports: &[u16], state: AccessState) -> PortGroup {
    PortGroup {
        id,
        ports: ports.to_vec(),
        state,
        preferred: false,
    }
}

/// Two gateways: this one (group 1, relative port 1) and another (group
/// 2, port 2), with `local` the state of this one's group.
fn layout(mode: AluaMode, local: AccessState) -> AluaConfig {
    AluaConfig {
        mode,
        local_group: 1,
        transition_time: 0,
        groups: vec![group(1, &[1], local), group(2, &[2], AccessState::Standby)],
    }
}

fn alua_map(alua: AluaConfig) -> LunMap {
    let c = crate::LuConfig { alua, ..cfg(512) };
    lu_with(Arc::new(RamBackend::new(1 << 20)), c)
}

/// An ALUA LU with nexuses N and OTHER attached, their power-on unit
/// attentions taken.
fn attached(alua: AluaConfig) -> (LunMap, Arc<LogicalUnit>) {
    let m = alua_map(alua);
    m.attach_nexus(N, &id("a"), false);
    m.attach_nexus(OTHER, &id("b"), false);
    let lu = m.get(0).unwrap().clone();
    while lu.take_ua(N).is_some() {}
    while lu.take_ua(OTHER).is_some() {}
    (m, lu)
}

fn on(m: &LunMap, nexus: NexusId, cdb: &[u8]) -> Response {
    m.execute(Some(0), nexus, cdb, &DataOutBuffer::new())
}

fn rtpg(extended: bool, alloc: u32) -> [u8; 12] {
    let a = alloc.to_be_bytes();
    let format = if extended { 0x20 } else { 0 };
    [
        opcode::MAINTENANCE_IN,
        format | 0x0a,
        0,
        0,
        0,
        0,
        a[0],
        a[1],
        a[2],
        a[3],
        0,
        0,
    ]
}

fn stpg(len: u32) -> [u8; 12] {
    let l = len.to_be_bytes();
    [
        opcode::MAINTENANCE_OUT,
        0x0a,
        0,
        0,
        0,
        0,
        l[0],
        l[1],
        l[2],
        l[3],
        0,
        0,
    ]
}

/// A SET TARGET PORT GROUPS parameter list: header and descriptors.
fn stpg_list(descs: &[(u8, u16)]) -> Vec<u8> {
    let mut v = vec![0u8; 4];
    for (state, g) in descs {
        v.extend_from_slice(&[*state, 0]);
        v.extend_from_slice(&g.to_be_bytes());
    }
    v
}

fn set(m: &LunMap, nexus: NexusId, list: &[u8]) -> Response {
    m.execute(
        Some(0),
        nexus,
        &stpg(list.len() as u32),
        &DataOutBuffer::copy_from_slice(list),
    )
}

#[test]
fn tpgs_in_standard_inquiry_follows_the_mode() {
    for (mode, tpgs) in [
        (AluaMode::Off, 0),
        (AluaMode::Implicit, 1),
        (AluaMode::Explicit, 2),
        (AluaMode::Both, 3),
    ] {
        let m = alua_map(layout(mode, AccessState::ActiveOptimized));
        let d = run(&m, &[opcode::INQUIRY, 0, 0, 0, 96, 0]).bytes();
        assert_eq!((d[5] >> 4) & 0x03, tpgs, "{mode}");
        assert_eq!(d[5] & 0x08, 0x08, "3PC stays");
    }
}

/// Designators of VPD page 83h as (byte 0, byte 1, body).
fn designators(m: &LunMap) -> Vec<(u8, u8, Vec<u8>)> {
    let page = run(m, &[opcode::INQUIRY, 1, 0x83, 0, 255, 0]).bytes();
    assert_eq!(
        page.len(),
        4 + usize::from(u16::from_be_bytes([page[2], page[3]]))
    );
    let mut out = Vec::new();
    let mut d = &page[4..];
    while d.len() >= 4 {
        let len = usize::from(d[3]);
        out.push((d[0], d[1], d[4..4 + len].to_vec()));
        d = &d[4 + len..];
    }
    assert!(d.is_empty());
    out
}

#[test]
fn vpd_83_names_the_local_group_and_port() {
    let m = alua_map(layout(AluaMode::Implicit, AccessState::ActiveOptimized));
    let ds = designators(&m);
    // Relative target port (type 4) and target port group (type 5), each
    // iSCSI with PIV and target port association, as Linux's
    // scsi_vpd_tpg_id reads them (bytes 6..8 of the designator).
    assert!(ds.contains(&(0x51, 0x94, vec![0, 0, 0, 1])), "{ds:02x?}");
    assert!(ds.contains(&(0x51, 0x95, vec![0, 0, 0, 1])), "{ds:02x?}");
    // The target port's name carries the portal group tag.
    let name = ds.iter().find(|d| d.1 == 0x98).unwrap();
    assert!(name.2.starts_with(b"iqn.2026-11.test:t,t,0x0001\0"));
    // Without ALUA the page is as before: no group designator.
    let off = designators(&alua_map(AluaConfig::default()));
    assert!(off.iter().all(|d| d.1 & 0x0f != 5), "{off:02x?}");
    assert_eq!(off.len(), ds.len() - 1);
}

#[test]
fn report_target_port_groups_length_only_and_extended() {
    let mut alua = layout(AluaMode::Implicit, AccessState::ActiveOptimized);
    alua.transition_time = 30;
    alua.groups[0].preferred = true;
    alua.groups
        .push(group(7, &[3, 4], AccessState::Unavailable));
    let m = alua_map(alua);
    let descriptors: Vec<u8> = [
        // PREF | active/optimized, supported T U S AN AO, group 1, status
        // none, one port: 1.
        &[0x80, 0x8f, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1][..],
        &[0x02, 0x8f, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2],
        &[0x03, 0x8f, 0, 7, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4],
    ]
    .concat();
    let r = run(&m, &rtpg(false, 1024));
    assert_eq!(r.status, Status::GOOD);
    let d = r.bytes();
    assert_eq!(&d[..4], &(descriptors.len() as u32).to_be_bytes());
    assert_eq!(&d[4..], &descriptors[..]);
    // Extended: FORMAT TYPE 001b, the implicit transition time, and a
    // RETURN DATA LENGTH that counts the header's last four bytes.
    let d = run(&m, &rtpg(true, 1024)).bytes();
    assert_eq!(&d[..4], &(descriptors.len() as u32 + 4).to_be_bytes());
    assert_eq!(&d[4..8], &[0x10, 30, 0, 0]);
    assert_eq!(&d[8..], &descriptors[..]);
    // The allocation length cuts, the length field does not change.
    let r = run(&m, &rtpg(false, 6));
    assert_eq!(r.transfer_length, 6);
    assert_eq!(&r.bytes()[..4], &(descriptors.len() as u32).to_be_bytes());
    // Reserved parameter data formats.
    let mut c = rtpg(false, 64);
    c[1] = 0x40 | 0x0a;
    assert_eq!(sense_of(&run(&m, &c)), (SenseKey::ILLEGAL_REQUEST, 0x24, 0));
}

#[test]
fn without_alua_the_commands_are_not_offered() {
    let m = alua_map(AluaConfig::default());
    assert_eq!(
        sense_of(&run(&m, &rtpg(false, 64))),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    // No MAINTENANCE OUT service action at all: the opcode is unknown.
    assert_eq!(
        sense_of(&run_out(&m, &stpg(8), &stpg_list(&[(0, 1)]))),
        (SenseKey::ILLEGAL_REQUEST, 0x20, 0)
    );
    // Implicit only: SET is not offered, REPORT is.
    let m = alua_map(layout(AluaMode::Implicit, AccessState::ActiveOptimized));
    assert_eq!(run(&m, &rtpg(false, 64)).status, Status::GOOD);
    assert_eq!(
        sense_of(&run_out(&m, &stpg(8), &stpg_list(&[(0, 1)]))),
        (SenseKey::ILLEGAL_REQUEST, 0x20, 0)
    );
}

#[test]
fn report_supported_operation_codes_lists_them_with_alua() {
    let listed = |m: &LunMap| {
        let d = run(
            m,
            &[
                opcode::MAINTENANCE_IN,
                0x0c,
                0,
                0,
                0,
                0,
                0,
                0,
                0x10,
                0,
                0,
                0,
            ],
        )
        .bytes();
        d[4..]
            .chunks(8)
            .map(|c| (c[0], u16::from_be_bytes([c[2], c[3]])))
            .collect::<Vec<_>>()
    };
    let both = listed(&alua_map(layout(
        AluaMode::Both,
        AccessState::ActiveOptimized,
    )));
    assert!(both.contains(&(opcode::MAINTENANCE_IN, 0x0a)));
    assert!(both.contains(&(opcode::MAINTENANCE_OUT, 0x0a)));
    let off = listed(&alua_map(AluaConfig::default()));
    assert!(!off.contains(&(opcode::MAINTENANCE_IN, 0x0a)));
    assert!(!off.contains(&(opcode::MAINTENANCE_OUT, 0x0a)));
}

/// A command: name, CDB, data out, and whether standby, unavailable and
/// transitioning serve it.
type Row<'a> = (&'a str, &'a [u8], &'a [u8], [bool; 3]);

/// Every command family against every state: GOOD (or the command's own
/// answer) where SPC-5 §5.16.2.4–6 says the state serves it, NOT READY /
/// LOGICAL UNIT NOT ACCESSIBLE with the state's qualifier where not.
#[test]
fn each_state_serves_its_table_and_refuses_the_rest_with_its_sense() {
    let inquiry = [opcode::INQUIRY, 0, 0, 0, 96, 0];
    let report_luns = [opcode::REPORT_LUNS, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    let request_sense = [opcode::REQUEST_SENSE, 0, 0, 0, 18, 0];
    let report_tpg = rtpg(false, 64);
    let rsoc = [
        opcode::MAINTENANCE_IN,
        0x0c,
        0,
        0,
        0,
        0,
        0,
        0,
        0x10,
        0,
        0,
        0,
    ];
    let mode_sense = [opcode::MODE_SENSE_6, 0, 0x3f, 0, 255, 0];
    let log_sense = [opcode::LOG_SENSE, 0, 0x40, 0, 0, 0, 0, 0, 255, 0];
    let prin = [opcode::PERSISTENT_RESERVE_IN, 0, 0, 0, 0, 0, 0, 0, 64, 0];
    let readcap10 = [opcode::READ_CAPACITY_10, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut readcap16 = [0u8; 16];
    readcap16[0] = opcode::SERVICE_ACTION_IN_16;
    readcap16[1] = 0x10;
    readcap16[13] = 32;
    let sync = [opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let read = read10(0, 1);
    let write = write10(0, 1, 0);
    let rows: [Row; 14] = [
        ("INQUIRY", &inquiry, &[], [true, true, true]),
        ("REPORT LUNS", &report_luns, &[], [true, true, true]),
        ("REQUEST SENSE", &request_sense, &[], [true, true, true]),
        ("REPORT TPG", &report_tpg, &[], [true, true, true]),
        ("RSOC", &rsoc, &[], [true, true, true]),
        ("MODE SENSE", &mode_sense, &[], [true, false, false]),
        ("LOG SENSE", &log_sense, &[], [true, false, false]),
        ("PR IN", &prin, &[], [true, false, false]),
        ("READ CAPACITY(10)", &readcap10, &[], [true, false, false]),
        ("READ CAPACITY(16)", &readcap16, &[], [true, false, false]),
        ("TEST UNIT READY", &TUR, &[], [false, false, false]),
        ("READ(10)", &read, &[], [false, false, false]),
        ("WRITE(10)", &write, &[0u8; 512], [false, false, false]),
        ("SYNCHRONIZE CACHE", &sync, &[], [false, false, false]),
    ];
    let states = [
        (AccessState::Standby, STANDBY),
        (AccessState::Unavailable, UNAVAILABLE),
        (AccessState::Transitioning, TRANSITION),
    ];
    for (i, (state, sense)) in states.into_iter().enumerate() {
        let (m, _) = attached(layout(AluaMode::Both, state));
        for (name, cdb, out, served) in rows {
            let r = m.execute(Some(0), N, cdb, &DataOutBuffer::copy_from_slice(out));
            if served[i] {
                assert_eq!(r.status, Status::GOOD, "{name} in {state}");
            } else {
                assert_eq!(sense_of(&r), sense, "{name} in {state}");
            }
        }
    }
    // The active states serve everything.
    for state in [
        AccessState::ActiveOptimized,
        AccessState::ActiveNonOptimized,
    ] {
        let (m, _) = attached(layout(AluaMode::Both, state));
        for (name, cdb, out, _) in rows {
            let r = m.execute(Some(0), N, cdb, &DataOutBuffer::copy_from_slice(out));
            assert_eq!(r.status, Status::GOOD, "{name} in {state}");
        }
    }
}

/// SET TARGET PORT GROUPS and PERSISTENT RESERVE OUT through a standby
/// port; only SET through an unavailable one; neither while transitioning.
#[test]
fn set_and_reservations_through_a_port_that_is_not_active() {
    let register = {
        let mut p = vec![0u8; 24];
        p[8..16].copy_from_slice(&0x1234u64.to_be_bytes());
        p
    };
    let prout = [opcode::PERSISTENT_RESERVE_OUT, 0, 0, 0, 0, 0, 0, 0, 24, 0];
    let (m, _) = attached(layout(AluaMode::Both, AccessState::Standby));
    let r = m.execute(
        Some(0),
        N,
        &prout,
        &DataOutBuffer::copy_from_slice(&register),
    );
    assert_eq!(r.status, Status::GOOD);
    let (m, _) = attached(layout(AluaMode::Both, AccessState::Unavailable));
    let r = m.execute(
        Some(0),
        N,
        &prout,
        &DataOutBuffer::copy_from_slice(&register),
    );
    assert_eq!(sense_of(&r), UNAVAILABLE);
    assert_eq!(set(&m, N, &stpg_list(&[(0, 1)])).status, Status::GOOD);
    let (m, lu) = attached(layout(AluaMode::Both, AccessState::Transitioning));
    assert_eq!(sense_of(&set(&m, N, &stpg_list(&[(0, 1)]))), TRANSITION);
    assert_eq!(lu.alua_local_state(), AccessState::Transitioning);
}

#[test]
fn request_sense_reports_the_state_that_refuses_commands() {
    for (state, (_, asc, ascq)) in [
        (AccessState::Standby, STANDBY),
        (AccessState::Unavailable, UNAVAILABLE),
        (AccessState::Transitioning, TRANSITION),
    ] {
        let (m, _) = attached(layout(AluaMode::Implicit, state));
        let d = run(&m, &[opcode::REQUEST_SENSE, 0, 0, 0, 18, 0]).bytes();
        assert_eq!((d[2] & 0x0f, d[12], d[13]), (2, asc, ascq), "{state}");
    }
    let (m, _) = attached(layout(AluaMode::Implicit, AccessState::ActiveNonOptimized));
    let d = run(&m, &[opcode::REQUEST_SENSE, 0, 0, 0, 18, 0]).bytes();
    assert_eq!((d[2] & 0x0f, d[12], d[13]), (0, 0, 0));
}

#[test]
fn an_implicit_change_is_a_unit_attention_on_every_nexus_once() {
    let (m, lu) = attached(layout(AluaMode::Implicit, AccessState::ActiveOptimized));
    assert_eq!(lu.set_alua_state(1, AccessState::Standby), Ok(true));
    // Twice more: one unit attention all the same, and none for a state
    // set again.
    assert_eq!(lu.set_alua_state(2, AccessState::ActiveOptimized), Ok(true));
    assert_eq!(
        lu.set_alua_state(2, AccessState::ActiveOptimized),
        Ok(false)
    );
    for n in [N, OTHER] {
        // The unit attention comes before the state's refusal.
        assert_eq!(sense_of(&on(&m, n, &TUR)), STATE_CHANGED);
        assert_eq!(sense_of(&on(&m, n, &TUR)), STANDBY);
    }
    // REPORT TPG shows the states, each altered by implicit behaviour
    // (status code 02h).
    let d = run(&m, &rtpg(false, 64)).bytes();
    assert_eq!((d[4], d[9]), (0x02, 2));
    assert_eq!((d[16], d[21]), (0x00, 2));
    assert_eq!(
        lu.set_alua_state(9, AccessState::Standby),
        Err("no target port group 9".into())
    );
    // Back to active: served again.
    lu.set_alua_state(1, AccessState::ActiveNonOptimized)
        .unwrap();
    assert_eq!(sense_of(&on(&m, N, &TUR)), STATE_CHANGED);
    assert_eq!(on(&m, N, &TUR).status, Status::GOOD);
    assert_eq!(on(&m, N, &read10(0, 1)).status, Status::GOOD);
}

#[test]
fn a_failed_implicit_transition_has_its_own_unit_attention() {
    let (m, lu) = attached(layout(AluaMode::Implicit, AccessState::Transitioning));
    lu.alua_transition_failed(1, AccessState::Standby).unwrap();
    assert_eq!(
        sense_of(&on(&m, OTHER, &TUR)),
        (SenseKey::UNIT_ATTENTION, 0x2a, 0x07)
    );
    assert_eq!(sense_of(&on(&m, OTHER, &TUR)), STANDBY);
}

#[test]
fn set_target_port_groups_changes_states_and_tells_the_others() {
    let (m, lu) = attached(layout(AluaMode::Explicit, AccessState::Standby));
    let events = Arc::new(Mutex::new(Vec::new()));
    // The notify hook is set before the LU is shared; here, on a fresh one.
    let c = crate::LuConfig {
        alua: layout(AluaMode::Explicit, AccessState::Standby),
        ..cfg(512)
    };
    let mut fresh = LogicalUnit::new(c, Arc::new(RamBackend::new(1 << 20))).unwrap();
    let seen = events.clone();
    fresh.set_alua_notify(Box::new(move |e| seen.lock().unwrap().push(e.clone())));
    let hooked = LunMap::new(vec![(0, Arc::new(fresh))]);
    hooked.attach_nexus(N, &id("a"), false);
    while hooked.get(0).unwrap().take_ua(N).is_some() {}
    // Group 1 (local) active/optimized, group 2 unavailable.
    let list = stpg_list(&[(0x0, 1), (0x3, 2)]);
    let r = set(&m, N, &list);
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(r.transfer_length, list.len() as u32);
    assert_eq!(lu.alua_local_state(), AccessState::ActiveOptimized);
    // The sender is not told; the other nexus is.
    assert_eq!(on(&m, N, &TUR).status, Status::GOOD);
    assert_eq!(sense_of(&on(&m, OTHER, &TUR)), STATE_CHANGED);
    assert_eq!(on(&m, OTHER, &TUR).status, Status::GOOD);
    // Status code 01h: altered by SET TARGET PORT GROUPS.
    let d = run(&m, &rtpg(false, 64)).bytes();
    assert_eq!((d[4], d[9]), (0x00, 1));
    assert_eq!((d[16], d[21]), (0x03, 1));
    // The same again changes nothing and tells no one.
    assert_eq!(set(&m, N, &list).status, Status::GOOD);
    assert_eq!(on(&m, OTHER, &TUR).status, Status::GOOD);
    // The hook hears of a change with the sender's port name.
    assert_eq!(set(&hooked, N, &list).status, Status::GOOD);
    let e = events.lock().unwrap();
    assert_eq!(
        *e,
        vec![AluaEvent::SetByInitiator {
            initiator: "iqn.2026-11.test:a,i,0x800000000001".into(),
            changes: vec![
                (1, AccessState::Standby, AccessState::ActiveOptimized),
                (2, AccessState::Standby, AccessState::Unavailable),
            ],
        }]
    );
}

#[test]
fn set_target_port_groups_refuses_what_it_cannot_set_and_changes_nothing() {
    let (m, lu) = attached(layout(AluaMode::Both, AccessState::ActiveOptimized));
    let param_at = |r: &Response| {
        assert_eq!(sense_of(r), INVALID_PARAM);
        // Fixed format: SKSV, C/D = 0, the byte in 16..18.
        assert_eq!(r.sense[15] & 0xc0, 0x80);
        u16::from_be_bytes([r.sense[16], r.sense[17]])
    };
    // Transitioning, LBA dependent, offline and an unknown code; an
    // unknown group; a group named twice; reserved bits. Each time after
    // a valid first descriptor, which must not apply.
    for (bad, at) in [
        ((0x0f, 2), 8),
        ((0x04, 2), 8),
        ((0x0e, 2), 8),
        ((0x07, 2), 8),
        ((0x01, 9), 10),
        ((0x02, 1), 10),
        ((0x12, 2), 8),
    ] {
        let r = set(&m, N, &stpg_list(&[(0x02, 1), bad]));
        assert_eq!(param_at(&r), at, "{bad:02x?}");
        assert_eq!(lu.alua_local_state(), AccessState::ActiveOptimized);
    }
    let mut reserved = stpg_list(&[(0x02, 1)]);
    reserved[5] = 0x40;
    assert_eq!(param_at(&set(&m, N, &reserved)), 5);
    // Lengths: not a header and whole descriptors, or less data than the
    // CDB says.
    let length = (SenseKey::ILLEGAL_REQUEST, 0x1a, 0);
    for list in [&[0u8; 2][..], &[0u8; 6], &[0u8; 9]] {
        assert_eq!(sense_of(&set(&m, N, list)), length, "{}", list.len());
    }
    let r = m.execute(
        Some(0),
        N,
        &stpg(8),
        &DataOutBuffer::copy_from_slice(&[0u8; 4]),
    );
    assert_eq!(sense_of(&r), length);
    // A zero length sets nothing, successfully.
    assert_eq!(on(&m, N, &stpg(0)).status, Status::GOOD);
    assert_eq!(
        on(&m, OTHER, &TUR).status,
        Status::GOOD,
        "no unit attention"
    );
}

#[test]
fn a_live_layout_change_is_told_only_when_something_shows() {
    let (m, lu) = attached(layout(AluaMode::Implicit, AccessState::ActiveOptimized));
    let mut groups = lu.alua_config().groups;
    assert!(!lu.set_alua_groups(&groups, 10).unwrap());
    assert_eq!(on(&m, N, &TUR).status, Status::GOOD);
    // The transition time shows in the extended header alone.
    assert_eq!(run(&m, &rtpg(true, 64)).bytes()[5], 10);
    // A third gateway joins.
    groups.push(group(3, &[3], AccessState::ActiveNonOptimized));
    assert!(lu.set_alua_groups(&groups, 10).unwrap());
    assert_eq!(sense_of(&on(&m, N, &TUR)), STATE_CHANGED);
    assert_eq!(run(&m, &rtpg(false, 64)).bytes()[3], 36);
    // A layout without the local group, or with this port elsewhere, is
    // refused and changes nothing.
    let bad = vec![group(2, &[2], AccessState::ActiveOptimized)];
    assert!(lu.set_alua_groups(&bad, 0).is_err());
    let bad = vec![
        group(1, &[5], AccessState::ActiveOptimized),
        group(2, &[1], AccessState::Standby),
    ];
    assert!(lu.set_alua_groups(&bad, 0).is_err());
    assert_eq!(lu.alua_config().groups, groups);
}

#[test]
fn layouts_are_checked() {
    let ok = layout(AluaMode::Implicit, AccessState::ActiveOptimized);
    assert_eq!(ok.validate(1), Ok(()));
    let check = |f: &dyn Fn(&mut AluaConfig), port: u16| {
        let mut c = ok.clone();
        f(&mut c);
        c.validate(port).unwrap_err()
    };
    assert!(check(&|_| {}, 2).contains("does not hold this port"));
    assert!(check(&|c| c.local_group = 5, 1).contains("not listed"));
    assert!(check(&|c| c.groups[1].id = 1, 1).contains("listed twice"));
    assert!(check(&|c| c.groups[1].ports = vec![1], 1).contains("two target port groups"));
    assert!(check(&|c| c.groups[1].ports = vec![0], 1).contains("reserved"));
    assert!(check(&|c| c.groups[1].ports.clear(), 1).contains("has 0 ports"));
    assert!(check(&|c| c.groups.clear(), 1).contains("0 target port groups"));
    let many: Vec<PortGroup> = (1..=17)
        .map(|i| group(i, &[i], AccessState::Standby))
        .collect();
    assert!(check(&|c| c.groups = many.clone(), 1).contains("17 target"));
    // Off takes anything: it shows none of it.
    assert_eq!(AluaConfig::default().validate(0), Ok(()));
    // A LU refuses a bad layout.
    let c = crate::LuConfig {
        alua: check_bad(),
        ..cfg(512)
    };
    assert!(LogicalUnit::new(c, Arc::new(RamBackend::new(1 << 20))).is_err());
}

fn check_bad() -> AluaConfig {
    AluaConfig {
        local_group: 9,
        ..layout(AluaMode::Both, AccessState::Standby)
    }
}

#[test]
fn names_parse_and_print() {
    for s in AccessState::ALL {
        assert_eq!(s.name().parse::<AccessState>(), Ok(s));
        assert_eq!(AccessState::from_code(s.code()), Some(s));
    }
    assert!("optimized".parse::<AccessState>().is_err());
    for m in ["off", "implicit", "explicit", "both"] {
        assert_eq!(m.parse::<AluaMode>().unwrap().name(), m);
    }
    assert!("on".parse::<AluaMode>().is_err());
}
