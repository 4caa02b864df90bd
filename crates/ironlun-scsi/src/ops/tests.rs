//! The opcode table: its consistency, lookup and CDB checks, and REPORT
//! SUPPORTED OPERATION CODES.

use std::sync::Arc;

use ironlun_backend::RamBackend;

use super::*;
use crate::test_util::{cfg, ram_map, run, sense_of};
use crate::LuConfig;
use ironlun_scsi_codes::{SenseKey, Status};

fn lu(thin: bool) -> LogicalUnit {
    let c = LuConfig {
        thin,
        sanitize: thin,
        rotation: None,
        ..cfg(512)
    };
    LogicalUnit::new(c, Arc::new(RamBackend::new(1 << 20))).unwrap()
}

#[test]
fn table_is_consistent() {
    for op in OPS {
        assert_eq!(op.usage[0], op.opcode, "{}", op.name);
        if let Some(len) = Cdb::group_len(op.opcode) {
            assert_eq!(op.usage.len(), len, "{} usage length", op.name);
        }
        assert_eq!(
            op.service_action.is_some(),
            has_service_action(op.opcode),
            "{}",
            op.name
        );
    }
    // No duplicate rows.
    for (i, a) in OPS.iter().enumerate() {
        for b in OPS.iter().skip(i + 1) {
            assert!(
                !(a.opcode == b.opcode && a.service_action == b.service_action),
                "{}",
                a.name
            );
        }
    }
}

#[test]
fn lookup_and_reserved_bits() {
    let lu = lu(false);
    assert_eq!(lookup(&lu, &Cdb(&[0x28; 10])).unwrap().name, "READ(10)");
    assert_eq!(
        lookup(&lu, &Cdb(&[0xff; 16])).unwrap_err(),
        Sense::invalid_opcode()
    );
    let rc16 = [0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0];
    assert_eq!(lookup(&lu, &Cdb(&rc16)).unwrap().name, "READ CAPACITY(16)");
    let bad_sa = [0x9e, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0];
    assert_eq!(
        lookup(&lu, &Cdb(&bad_sa)).unwrap_err(),
        Sense::invalid_field(1, Some(4))
    );

    let read10 = lookup(&lu, &Cdb(&[0x28])).unwrap();
    // RDPROTECT (byte 1 bits 7..5) is not supported.
    let cdb = [0x28, 0x20, 0, 0, 0, 0, 0, 0, 1, 0];
    assert_eq!(
        check_usage(read10, &Cdb(&cdb)),
        Err(Sense::invalid_field(1, Some(5)))
    );
    // DPO and FUA are, and so is a group number.
    let cdb = [0x28, 0x18, 0, 0, 0, 0, 3, 0, 1, 0];
    assert_eq!(check_usage(read10, &Cdb(&cdb)), Ok(()));
    // NACA in the control byte is refused; vendor bits are not.
    let cdb = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0x04];
    assert_eq!(
        check_usage(read10, &Cdb(&cdb)),
        Err(Sense::invalid_field(9, Some(2)))
    );
    let cdb = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0xc0];
    assert_eq!(check_usage(read10, &Cdb(&cdb)), Ok(()));
}

#[test]
fn unmap_exists_only_on_thin_lus_and_get_lba_status_on_all() {
    let unmap = [0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0];
    let get_lba_status = [0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 24, 0, 0];
    let full = lu(false);
    assert_eq!(
        lookup(&full, &Cdb(&unmap)).unwrap_err(),
        Sense::invalid_opcode()
    );
    // A fully provisioned LU reports every LBA mapped (SBC-4 §5.8).
    assert_eq!(
        lookup(&full, &Cdb(&get_lba_status)).unwrap().name,
        "GET LBA STATUS"
    );
    let thin = lu(true);
    assert_eq!(lookup(&thin, &Cdb(&unmap)).unwrap().name, "UNMAP");
    assert_eq!(
        lookup(&thin, &Cdb(&get_lba_status)).unwrap().name,
        "GET LBA STATUS"
    );
}

#[test]
fn unknown_opcode_and_report_supported_opcodes() {
    let m = ram_map(100, 512);
    assert_eq!(
        sense_of(&run(&m, &[0xc0, 0, 0, 0, 0, 0])),
        (SenseKey::ILLEGAL_REQUEST, 0x20, 0)
    );
    // One command, no service action: READ(10).
    let r = run(&m, &[0xa3, 0x0c, 0x01, 0x28, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(r.bytes()[1] & 0x07, 0x03, "supported");
    assert_eq!(u16::from_be_bytes([r.bytes()[2], r.bytes()[3]]), 10);
    assert_eq!(r.bytes()[4], 0x28);
    assert_eq!(r.bytes()[5] & 0x18, 0x18, "DPO/FUA in CDB usage data");
    // With timeouts descriptor.
    let r = run(&m, &[0xa3, 0x0c, 0x81, 0x28, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(r.data.len(), 4 + 10 + 12);
    // READ CAPACITY(16) needs the service action form.
    assert_eq!(
        sense_of(&run(
            &m,
            &[0xa3, 0x0c, 0x01, 0x9e, 0, 0x10, 0, 0, 1, 0, 0, 0]
        )),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    let r = run(&m, &[0xa3, 0x0c, 0x02, 0x9e, 0, 0x10, 0, 0, 1, 0, 0, 0]);
    assert_eq!(r.bytes()[1] & 0x07, 0x03);
    // Not supported: SUPPORT = 001b.
    let r = run(&m, &[0xa3, 0x0c, 0x01, 0xc0, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(r.bytes()[1] & 0x07, 0x01);
    // All commands: one 8-byte descriptor per table row.
    let r = run(&m, &[0xa3, 0x0c, 0x00, 0, 0, 0, 0, 0, 0x10, 0, 0, 0]);
    let len = u32::from_be_bytes(r.bytes()[..4].try_into().unwrap()) as usize;
    let lu = m.get(0).unwrap();
    assert_eq!(len, 8 * OPS.iter().filter(|o| (o.available)(lu)).count());
}

#[test]
fn log_sense_is_offered_and_reported() {
    let m = ram_map(100, 512);
    // LOG SENSE (4Dh): SP, PC and page code, subpage code, parameter
    // pointer and allocation length; PPC is not supported.
    let r = run(&m, &[0xa3, 0x0c, 0x01, 0x4d, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(r.bytes()[1] & 0x07, 0x03, "supported");
    assert_eq!(
        &r.bytes()[4..14],
        &[0x4d, 0x01, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xff, 0]
    );
    let all = run(&m, &[0xa3, 0x0c, 0x00, 0, 0, 0, 0, 0, 0x10, 0, 0, 0]).bytes();
    assert!(all[4..]
        .chunks(8)
        .any(|d| d[0] == 0x4d && d[6..8] == [0, 10]));
    // Allowed through reservations, like INQUIRY (SPC-4 §5.13.1).
    let row = lookup(m.get(0).unwrap(), &Cdb(&[0x4d])).unwrap();
    assert_eq!(row.access, Access::Exempt);
    assert!(!row.ua_exempt, "a pending unit attention comes first");
    assert_eq!(
        check_usage(row, &Cdb(&[0x4d, 0x02, 0, 0, 0, 0, 0, 0, 0, 0])),
        Err(Sense::invalid_field(1, Some(1))),
        "PPC"
    );
}
