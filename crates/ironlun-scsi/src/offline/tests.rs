//! An offline LU: what it answers, and coming back.

use super::*;
use crate::reservations::{Registration, Reservation};
use crate::test_util::{id, ram_map, read10, sense_of, write10, N};
use crate::{DataOutBuffer, LunMap};
use ironlun_scsi_codes::Status;

const MANUAL: (SenseKey, u8, u8) = (SenseKey::NOT_READY, 0x04, 0x03);

fn run(m: &LunMap, cdb: &[u8]) -> crate::Response {
    m.execute(Some(0), N, cdb, &DataOutBuffer::new())
}

#[test]
fn an_offline_lu_answers_only_the_exempt_commands() {
    let m = ram_map(100, 512);
    m.attach_nexus(N, &id("a"), false);
    let lu = m.get(0).unwrap().clone();
    lu.set_offline("pr state file x: line 2: not a generation".into());
    assert_eq!(
        lu.offline_reason().as_deref(),
        Some("pr state file x: line 2: not a generation")
    );
    // The power-on unit attention comes first, as for any command.
    assert_eq!(sense_of(&run(&m, &[0; 6])).0, SenseKey::UNIT_ATTENTION);
    let tur = [0u8; 6];
    let prin = [0x5e, 0, 0, 0, 0, 0, 0, 0x10, 0, 0];
    for cdb in [&tur[..], &read10(0, 1), &write10(0, 1, 0), &prin] {
        assert_eq!(sense_of(&run(&m, cdb)), MANUAL, "{cdb:02x?}");
    }
    let inquiry = [0x12, 0, 0, 0, 96, 0];
    let report_luns = [0xa0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0];
    for cdb in [&inquiry[..], &report_luns] {
        assert_eq!(run(&m, cdb).status, Status::GOOD, "{cdb:02x?}");
    }
    let sense = run(&m, &[0x03, 0, 0, 0, 18, 0]);
    assert_eq!(sense.status, Status::GOOD);
    let d = sense.bytes();
    assert_eq!((d[2] & 0x0f, d[12], d[13]), (2, 0x04, 0x03));
}

#[test]
fn back_online_with_the_state_read_again() {
    let m = ram_map(100, 512);
    m.attach_nexus(N, &id("a"), false);
    let lu = m.get(0).unwrap().clone();
    lu.set_offline("why".into());
    let other = id("b");
    let st = PrState {
        generation: 0,
        registrations: vec![Registration {
            nexus: other.clone(),
            key: 9,
            all_tg_pt: false,
        }],
        reservation: Some(Reservation {
            holder: other,
            pr_type: crate::reservations::pr_type::EXCLUSIVE_ACCESS,
        }),
        aptpl: true,
    };
    lu.claim_offline().unwrap().online(Some(st.clone()), || {});
    assert_eq!(lu.offline_reason(), None);
    assert_eq!(lu.pr_state(), st);
    // Told as after a power on, then the medium answers, under the
    // restored reservation: another initiator holds Exclusive Access.
    assert_eq!(sense_of(&run(&m, &[0; 6])).0, SenseKey::UNIT_ATTENTION);
    assert_eq!(run(&m, &[0; 6]).status, Status::GOOD);
    assert_eq!(run(&m, &read10(0, 1)).status, Status::RESERVATION_CONFLICT);
}

/// One caller brings a LU back at a time, and what it puts in place is
/// there before the LU serves: a second caller meanwhile gets nothing to
/// do, and commands are still refused while the first takes its state up.
#[test]
fn one_caller_brings_a_lu_back_and_it_serves_only_after() {
    let m = ram_map(100, 512);
    m.attach_nexus(N, &id("a"), false);
    let lu = m.get(0).unwrap().clone();
    assert!(lu.claim_offline().is_none(), "not offline");
    lu.set_offline("why".into());
    let first = lu.claim_offline().expect("the first caller");
    assert!(lu.claim_offline().is_none(), "a second caller meanwhile");
    let _ = run(&m, &[0; 6]); // the power-on unit attention
    first.online(None, || {
        assert!(lu.offline_reason().is_some());
        assert_eq!(sense_of(&run(&m, &read10(0, 1))), MANUAL, "served early");
    });
    assert_eq!(lu.offline_reason(), None);
    assert!(lu.claim_offline().is_none(), "online: nothing to claim");
    // A claim given up leaves the LU offline, for the next caller.
    lu.set_offline("again".into());
    drop(lu.claim_offline().unwrap());
    let again = lu.claim_offline().expect("free again");
    again.stay_offline("still".into());
    assert_eq!(lu.offline_reason().as_deref(), Some("still"));
}
