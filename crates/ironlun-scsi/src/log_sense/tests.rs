//! LOG SENSE: the supported pages pages, the Logical Block Provisioning
//! page, and the CDB checks.

use crate::test_util::{ram_map, run, run_out, sense_of, threshold_lu, write10, ThresholdLu};
use crate::{LunMap, Response, SoftThreshold, ThresholdEvent};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

fn log_sense(m: &LunMap, page: u8, subpage: u8, pointer: u16, alloc: u16) -> Response {
    let p = pointer.to_be_bytes();
    let a = alloc.to_be_bytes();
    run(
        m,
        &[
            opcode::LOG_SENSE,
            0,
            page,
            subpage,
            0,
            p[0],
            p[1],
            a[0],
            a[1],
            0,
        ],
    )
}

/// A 16 MiB LU (64 KiB threshold sets) with a 1 MiB soft threshold and
/// 4 MiB free.
fn lbp_lu() -> ThresholdLu {
    threshold_lu(16 * MIB, 512, SoftThreshold::Bytes(MIB), 4 * MIB)
}

/// The INVALID FIELD IN CDB field pointer's byte.
fn invalid_field(r: &Response) -> u16 {
    assert_eq!(sense_of(r), (SenseKey::ILLEGAL_REQUEST, 0x24, 0));
    u16::from_be_bytes([r.sense[16], r.sense[17]])
}

#[test]
fn supported_pages() {
    let plain = ram_map(100, 512);
    let t = lbp_lu();
    // 00h: page codes; header DS = 1, page 00h, subpage 0, length.
    let r = log_sense(&plain, 0x00, 0, 0, 512);
    assert_eq!(&r.bytes()[..], &[0x80, 0, 0, 1, 0x00]);
    let r = log_sense(&t.map, 0x00, 0, 0, 512);
    assert_eq!(&r.bytes()[..], &[0x80, 0, 0, 2, 0x00, 0x0c]);
    // 00h/FFh: page and subpage pairs, SPF set.
    let r = log_sense(&t.map, 0x00, 0xff, 0, 512);
    assert_eq!(
        &r.bytes()[..],
        &[0xc0, 0xff, 0, 6, 0x00, 0x00, 0x00, 0xff, 0x0c, 0x00]
    );
    let r = log_sense(&plain, 0x00, 0xff, 0, 512);
    assert_eq!(&r.bytes()[..], &[0xc0, 0xff, 0, 4, 0x00, 0x00, 0x00, 0xff]);
}

#[test]
fn logical_block_provisioning_page_counts_in_threshold_sets() {
    let t = lbp_lu();
    t.backend.set_used_bytes(Some(3 * 64 * KIB + 1));
    let r = log_sense(&t.map, 0x0c, 0, 0, 512);
    assert_eq!(r.status, Status::GOOD);
    let expected = [
        0x8c, 0x00, 0x00, 24, // DS, page 0Ch, 24 bytes of parameters
        0x00, 0x01, 0x23, 0x08, // available: TSD, binary format list, 8
        0, 0, 0, 64, 0x02, 0, 0, 0, // 4 MiB in 64 KiB sets; shared scope
        0x00, 0x02, 0x23, 0x08, // used
        0, 0, 0, 3, 0x01, 0, 0, 0, // 3 sets (rounded down); dedicated
    ];
    assert_eq!(&r.bytes()[..], &expected);
    // Every PC gives the same: list parameters have no threshold or
    // default values.
    for pc in [0x00, 0x40, 0x80, 0xc0] {
        let r = log_sense(&t.map, pc | 0x0c, 0, 0, 512);
        assert_eq!(&r.bytes()[..], &expected, "PC {pc:#x}");
    }
    // The count follows the space.
    t.backend.set_free_bytes(Some(2 * MIB + 5));
    let r = log_sense(&t.map, 0x0c, 0, 0, 512);
    assert_eq!(&r.bytes()[8..12], &[0, 0, 0, 32]);
    // From parameter 0002h on; the pointer past it is refused.
    let r = log_sense(&t.map, 0x0c, 0, 2, 512);
    assert_eq!(&r.bytes()[..4], &[0x8c, 0, 0, 12]);
    assert_eq!(&r.bytes()[4..6], &[0, 2]);
    assert_eq!(invalid_field(&log_sense(&t.map, 0x0c, 0, 3, 512)), 5);
    // The allocation length cuts the page, with no error.
    let r = log_sense(&t.map, 0x0c, 0, 0, 6);
    assert_eq!((r.data.len(), r.transfer_length), (6, 6));
    let r = log_sense(&t.map, 0x0c, 0, 0, 0);
    assert_eq!((r.status, r.data.len()), (Status::GOOD, 0));
    // Without the test's count, the store's own: RAM's allocated chunks
    // (one, after a 512-byte write).
    t.backend.set_used_bytes(None);
    assert_eq!(
        run_out(&t.map, &write10(0, 1, 0), &[1; 512]).status,
        Status::GOOD
    );
    let r = log_sense(&t.map, 0x0c, 0, 2, 512);
    assert_eq!(&r.bytes()[8..12], &[0, 0, 0, 1]);
}

#[test]
fn reading_the_page_reports_a_crossing_it_shows() {
    let t = lbp_lu();
    t.backend.set_free_bytes(Some(512 * KIB));
    let r = log_sense(&t.map, 0x0c, 0, 0, 512);
    assert_eq!(&r.bytes()[8..12], &[0, 0, 0, 8]);
    assert_eq!(
        t.events.lock().unwrap().clone(),
        vec![ThresholdEvent::Reached {
            free_bytes: 512 * KIB,
            threshold_bytes: MIB
        }]
    );
    // Nor does a write after it report it again.
    assert_eq!(
        run_out(&t.map, &write10(0, 128, 0), &[1; 64 << 10]).status,
        Status::GOOD
    );
    assert_eq!(t.events.lock().unwrap().len(), 1);
}

#[test]
fn cdb_fields_are_checked() {
    let plain = ram_map(100, 512);
    let t = lbp_lu();
    // SP: nothing is saved.
    let r = run(
        &t.map,
        &[opcode::LOG_SENSE, 0x01, 0x0c, 0, 0, 0, 0, 2, 0, 0],
    );
    assert_eq!(invalid_field(&r), 1);
    assert_eq!(r.sense[15], 0x80 | 0x40 | 0x08, "SKSV, C/D, BPV, bit 0");
    // PPC is not in the usage data.
    let r = run(
        &t.map,
        &[opcode::LOG_SENSE, 0x02, 0x0c, 0, 0, 0, 0, 2, 0, 0],
    );
    assert_eq!(invalid_field(&r), 1);
    // A page the LU does not have: the page code; a subpage of a page it
    // has: the subpage code.
    assert_eq!(invalid_field(&log_sense(&plain, 0x0c, 0, 0, 512)), 2);
    assert_eq!(invalid_field(&log_sense(&t.map, 0x0d, 0, 0, 512)), 2);
    assert_eq!(invalid_field(&log_sense(&t.map, 0x0c, 0x01, 0, 512)), 3);
    assert_eq!(invalid_field(&log_sense(&t.map, 0x00, 0x01, 0, 512)), 3);
    // The supported pages lists have no parameter codes past 0000h.
    assert_eq!(invalid_field(&log_sense(&t.map, 0x00, 0, 1, 512)), 5);
    // A reserved byte.
    let r = run(
        &t.map,
        &[opcode::LOG_SENSE, 0, 0x0c, 0, 0x01, 0, 0, 2, 0, 0],
    );
    assert_eq!(invalid_field(&r), 4);
}
