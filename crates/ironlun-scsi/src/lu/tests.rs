//! A logical unit: unit attentions, its sense format, its configuration
//! and where its commands run.

use std::sync::Arc;

use ironlun_backend::RamBackend;

use super::*;
use crate::test_util::{cfg, id, ram_map, read10, run, sense_of, N};
use crate::{DataOutBuffer, NexusId};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

#[test]
fn unit_attention_after_attach_then_cleared() {
    let m = ram_map(100, 512);
    m.attach_nexus(N, &id("a"), false);
    // INQUIRY and REPORT LUNS pass through a pending UA.
    assert_eq!(
        run(&m, &[opcode::INQUIRY, 0, 0, 0, 36, 0]).status,
        Status::GOOD
    );
    assert_eq!(
        run(&m, &[opcode::REPORT_LUNS, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]).status,
        Status::GOOD
    );
    let r = run(&m, &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0]);
    assert_eq!(sense_of(&r), (SenseKey::UNIT_ATTENTION, 0x29, 0x00));
    assert_eq!(
        run(&m, &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0]).status,
        Status::GOOD
    );
    // Another nexus has its own UA.
    let other = NexusId(2);
    m.attach_nexus(other, &id("b"), false);
    assert_eq!(
        run(&m, &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0]).status,
        Status::GOOD
    );
    let r = m.execute(Some(0), other, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(r.status, Status::CHECK_CONDITION);
}

#[test]
fn capacity_change_and_reset_unit_attentions() {
    let m = ram_map(100, 512);
    m.attach_nexus(N, &id("a"), false);
    run(&m, &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0]);
    let lu = m.get(0).unwrap().clone();
    lu.set_num_blocks(50);
    assert_eq!(
        sense_of(&run(&m, &read10(0, 1))),
        (SenseKey::UNIT_ATTENTION, 0x2a, 0x09)
    );
    let r = run(&m, &[opcode::READ_CAPACITY_10, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&r.bytes()[..4], &[0, 0, 0, 49]);
    lu.reset();
    // REQUEST SENSE reports and clears it.
    let r = run(&m, &[opcode::REQUEST_SENSE, 0, 0, 0, 18, 0]);
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(
        (SenseKey(r.bytes()[2]), r.bytes()[12], r.bytes()[13]),
        (SenseKey::UNIT_ATTENTION, 0x29, 0x03)
    );
    let r = run(&m, &[opcode::REQUEST_SENSE, 0, 0, 0, 18, 0]);
    assert_eq!(SenseKey(r.bytes()[2]), SenseKey::NO_SENSE);
}

#[test]
fn descriptor_sense_when_d_sense_is_set() {
    let m = ram_map(100, 512);
    m.get(0)
        .unwrap()
        .mode
        .d_sense
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let r = run(&m, &read10(200, 1));
    assert_eq!(r.sense[0], 0x72);
    assert_eq!(sense_of(&r), (SenseKey::ILLEGAL_REQUEST, 0x21, 0));
}

#[test]
fn rejects_bad_configuration() {
    assert!(LogicalUnit::new(cfg(1024), Arc::new(RamBackend::new(1 << 20))).is_err());
    assert!(LogicalUnit::new(cfg(4096), Arc::new(RamBackend::new(100))).is_err());
}

#[test]
fn large_copies_and_blocking_backends_run_off_the_network_thread() {
    let ram = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(1 << 20))).unwrap();
    let read = read10(0, 8);
    assert!(!ram.may_block(&read, 4096));
    assert!(!ram.may_block(&read, OFFLOAD_TRANSFER - 512));
    assert!(ram.may_block(&read, OFFLOAD_TRANSFER));
    // A null LUN copies nothing, whatever the size.
    let null = LogicalUnit::new(
        cfg(512),
        Arc::new(ironlun_backend::NullBackend::new(1 << 20)),
    )
    .unwrap();
    assert!(!null.may_block(&read, 16 << 20));
    // Work not bounded by the transfer (UNMAP) always goes off.
    assert!(null.may_block(&[opcode::UNMAP, 0, 0, 0, 0, 0, 0, 0, 24, 0], 24));
}

/// PERSISTENT RESERVE OUT on a RAM LU stays inline without a store for
/// APTPL, and goes off the network thread with one: it may write and
/// fsync a state file (and its directory) under the reservation lock.
#[test]
fn a_reservation_change_that_may_be_saved_runs_off_the_network_thread() {
    struct Slow;
    impl crate::reservations::PrStore for Slow {
        fn save(&self, _: &str) -> std::io::Result<()> {
            Ok(())
        }
        fn clear(&self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let prout = [opcode::PERSISTENT_RESERVE_OUT, 0, 0, 0, 0, 0, 0, 0, 24, 0];
    let prin = [opcode::PERSISTENT_RESERVE_IN, 0, 0, 0, 0, 0, 0, 0x10, 0, 0];
    let mut ram = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(1 << 20))).unwrap();
    assert!(!ram.may_block(&prout, 24), "nothing to save: inline");
    ram.set_pr_store(Arc::new(Slow), None);
    assert!(ram.may_block(&prout, 24));
    assert!(
        !ram.may_block(&prin, 0),
        "PERSISTENT RESERVE IN saves nothing"
    );
    assert!(!ram.may_block(&read10(0, 8), 4096));
}
