//! REPORT LUNS (and commands to LUNs without a logical unit) and REPORT
//! SUPPORTED TASK MANAGEMENT FUNCTIONS.

use std::sync::Arc;

use ironlun_backend::RamBackend;

use crate::test_util::{cfg, ram_map, run, sense_of, N};
use crate::{DataOutBuffer, LogicalUnit, LunMap};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

#[test]
fn report_luns_and_missing_luns() {
    let a = Arc::new(LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 10))).unwrap());
    let b = Arc::new(LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 10))).unwrap());
    let m = LunMap::new(vec![(0, a), (300, b)]);
    let rl = [0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    let r = m.execute(Some(5), N, &rl, &DataOutBuffer::new());
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(&r.bytes()[..4], &[0, 0, 0, 16]);
    assert_eq!(&r.bytes()[8..16], &[0; 8]);
    assert_eq!(&r.bytes()[16..18], &[0x41, 0x2c]);
    // Allocation length below 16 is invalid (SPC-4 §6.33).
    let short = [0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0];
    assert_eq!(
        sense_of(&m.execute(Some(0), N, &short, &DataOutBuffer::new())),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    // A LUN without a logical unit.
    let r = m.execute(
        Some(5),
        N,
        &[opcode::INQUIRY, 0, 0, 0, 96, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(r.bytes()[0], 0x7f);
    let r = m.execute(
        Some(5),
        N,
        &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(sense_of(&r), (SenseKey::ILLEGAL_REQUEST, 0x25, 0));
    let r = m.execute(
        None,
        N,
        &[opcode::REQUEST_SENSE, 0, 0, 0, 18, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(
        (SenseKey(r.bytes()[2]), r.bytes()[12]),
        (SenseKey::ILLEGAL_REQUEST, 0x25)
    );
}

#[test]
fn report_supported_task_management_functions() {
    let m = ram_map(100, 512);
    // ATS ATSS CTSS LURS QTS TRS; QTSS ITNRS.
    let r = run(
        &m,
        &[opcode::MAINTENANCE_IN, 0x0d, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0],
    );
    assert_eq!(&r.bytes()[..], &[0xde, 0x03, 0, 0]);
    let r = run(&m, &[0xa3, 0x0d, 0x80, 0, 0, 0, 0, 0, 0, 16, 0, 0]);
    assert_eq!((r.data.len(), r.bytes()[3]), (16, 0x0c), "extended format");
}
