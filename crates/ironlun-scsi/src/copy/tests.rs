//! EXTENDED COPY and RECEIVE COPY RESULTS.

use std::sync::Arc;

use ironlun_backend::RamBackend;

use crate::test_util::{cdb16, cfg, ram_map, read10, run, run_out, sense_of, write10, N};
use crate::{DataOutBuffer, LogicalUnit, LunMap, Response};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

/// Two RAM LUs (0 and 1) of `blocks` 512-byte blocks with NAA ids 1 and 2.
fn two_lu_map(blocks: u64) -> LunMap {
    let lus = (0u16..2)
        .map(|n| {
            let mut c = cfg(512);
            c.naa_id = u64::from(n) + 1;
            let be = Arc::new(RamBackend::new(blocks * 512));
            (n, Arc::new(LogicalUnit::new(c, be).unwrap()))
        })
        .collect();
    LunMap::new(lus)
}

/// An EXTENDED COPY(LID1) parameter list: identification CSCD descriptors
/// naming NAA ids, block-to-block segments (src, dst, blocks, src LBA, dst
/// LBA).
fn xcopy_params(
    list_id: u8,
    usage: u8,
    naa_ids: &[u64],
    segs: &[(u16, u16, u16, u64, u64)],
) -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[0] = list_id;
    p[1] = usage << 3;
    p[2..4].copy_from_slice(&((naa_ids.len() * 32) as u16).to_be_bytes());
    p[8..12].copy_from_slice(&((segs.len() * 28) as u32).to_be_bytes());
    for &id in naa_ids {
        let mut d = [0u8; 32];
        d[0] = 0xe4;
        d[4] = 0x01;
        d[5] = 0x03;
        d[7] = 8;
        d[8..16].copy_from_slice(&((0x3u64 << 60) | id).to_be_bytes());
        d[29..32].copy_from_slice(&[0, 2, 0]);
        p.extend_from_slice(&d);
    }
    for &(s, t, n, sl, dl) in segs {
        let mut d = [0u8; 28];
        d[0] = 0x02;
        d[3] = 0x18;
        d[4..6].copy_from_slice(&s.to_be_bytes());
        d[6..8].copy_from_slice(&t.to_be_bytes());
        d[10..12].copy_from_slice(&n.to_be_bytes());
        d[12..20].copy_from_slice(&sl.to_be_bytes());
        d[20..28].copy_from_slice(&dl.to_be_bytes());
        p.extend_from_slice(&d);
    }
    p
}

fn xcopy(m: &LunMap, params: &[u8]) -> Response {
    let mut c = [0u8; 16];
    c[0] = 0x83;
    c[10..14].copy_from_slice(&(params.len() as u32).to_be_bytes());
    m.execute(Some(0), N, &c, &DataOutBuffer::copy_from_slice(params))
}

/// Block `i` filled with a byte derived from `i`.
fn pattern(first: u32, blocks: u32) -> Vec<u8> {
    (first..first + blocks)
        .flat_map(|i| std::iter::repeat_n((i % 251) as u8, 512))
        .collect()
}

#[test]
fn extended_copy_between_lus_and_copy_status() {
    let m = two_lu_map(4096);
    assert_eq!(
        run_out(&m, &write10(0, 8, 0), &pattern(0, 8)).status,
        Status::GOOD
    );
    let p = xcopy_params(7, 0b00, &[1, 2], &[(0, 1, 8, 0, 100)]);
    assert_eq!(xcopy(&m, &p).status, Status::GOOD);
    let r = m.execute(Some(1), N, &read10(100, 8), &DataOutBuffer::new());
    assert_eq!(
        &r.bytes()[..],
        &pattern(0, 8)[..],
        "LU 1 holds LU 0's blocks"
    );
    // RECEIVE COPY STATUS(LID1) for list 7: completed, one segment, 4 KiB;
    // reported once.
    let status_cdb = [0x84, 0x00, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0];
    let r = run(&m, &status_cdb);
    assert_eq!(
        &r.bytes()[..],
        &[0, 0, 0, 8, 0x00, 0, 1, 0x00, 0, 0, 0x10, 0]
    );
    assert_eq!(
        sense_of(&run(&m, &status_cdb)),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    // LIST ID USAGE 10b holds nothing.
    let p = xcopy_params(8, 0b10, &[1, 2], &[(0, 1, 8, 0, 100)]);
    assert_eq!(xcopy(&m, &p).status, Status::GOOD);
    let mut c = status_cdb;
    c[2] = 8;
    assert_eq!(sense_of(&run(&m, &c)), (SenseKey::ILLEGAL_REQUEST, 0x24, 0));
    // A failed copy held with usage 00b reports "completed with errors".
    let p = xcopy_params(9, 0b00, &[1, 2], &[(0, 1, 8, 0, 100), (0, 1, 8, 0, 4095)]);
    assert_eq!(sense_of(&xcopy(&m, &p)), (SenseKey::COPY_ABORTED, 0, 0));
    c[2] = 9;
    let r = run(&m, &c);
    assert_eq!(
        (r.bytes()[4], r.bytes()[6]),
        (0x01, 1),
        "one segment done, then the error"
    );
}

#[test]
fn extended_copy_overlapping_within_one_lu_moves_like_memmove() {
    let m = two_lu_map(8192);
    // 4096 blocks (2 MiB, two copy chunks) moved 1000 blocks up.
    for i in 0..4u32 {
        let w = cdb16(0x8a, 0, u64::from(i * 1024), 1024);
        assert_eq!(
            run_out(&m, &w, &pattern(i * 1024, 1024)).status,
            Status::GOOD
        );
    }
    let p = xcopy_params(0, 0b11, &[1], &[(0, 0, 4096, 0, 1000)]);
    assert_eq!(xcopy(&m, &p).status, Status::GOOD);
    for i in 0..4u32 {
        let r = run(&m, &cdb16(0x88, 0, u64::from(1000 + i * 1024), 1024));
        assert!(
            r.bytes()[..] == pattern(i * 1024, 1024)[..],
            "source read before overwritten"
        );
    }
}

#[test]
fn extended_copy_refusals() {
    let m = two_lu_map(4096);
    // Unknown LU designator: the copy target is unreachable.
    let p = xcopy_params(0, 0b11, &[1, 99], &[(0, 1, 8, 0, 0)]);
    assert_eq!(
        sense_of(&xcopy(&m, &p)),
        (SenseKey::COPY_ABORTED, 0x08, 0x04)
    );
    // A list identifier with usage 11b, reserved usage 01b.
    let p = xcopy_params(3, 0b11, &[1], &[(0, 0, 8, 0, 8)]);
    assert_eq!(
        sense_of(&xcopy(&m, &p)),
        (SenseKey::ILLEGAL_REQUEST, 0x26, 0)
    );
    let p = xcopy_params(3, 0b01, &[1], &[(0, 0, 8, 0, 8)]);
    assert_eq!(
        sense_of(&xcopy(&m, &p)),
        (SenseKey::ILLEGAL_REQUEST, 0x26, 0)
    );
    // Too many CSCD descriptors, too many segments.
    let p = xcopy_params(0, 0b11, &[1; 9], &[(0, 0, 8, 0, 8)]);
    assert_eq!(
        sense_of(&xcopy(&m, &p)),
        (SenseKey::ILLEGAL_REQUEST, 0x26, 0x06)
    );
    let p = xcopy_params(0, 0b11, &[1], &[(0, 0, 1, 0, 8); 65]);
    assert_eq!(
        sense_of(&xcopy(&m, &p)),
        (SenseKey::ILLEGAL_REQUEST, 0x26, 0x08)
    );
    // Truncated parameter list.
    let p = xcopy_params(0, 0b11, &[1], &[(0, 0, 1, 0, 8)]);
    assert_eq!(
        sense_of(&xcopy(&m, &p[..p.len() - 1])),
        (SenseKey::ILLEGAL_REQUEST, 0x1a, 0)
    );
    // INLINE DATA LENGTH FFFFFFFFh: the lists' end is past the parameter
    // list (whatever the width of usize), not a sum that wraps.
    let mut p = xcopy_params(0, 0b11, &[1], &[(0, 0, 1, 0, 8)]);
    p[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(
        sense_of(&xcopy(&m, &p)),
        (SenseKey::ILLEGAL_REQUEST, 0x1a, 0)
    );
    // A segment whose source or destination range wraps u64: the copy is
    // aborted before a block moves.
    for (sl, dl) in [(u64::MAX, 0), (0, u64::MAX - 1)] {
        let p = xcopy_params(0, 0b11, &[1, 2], &[(0, 1, 4, sl, dl)]);
        assert_eq!(sense_of(&xcopy(&m, &p)), (SenseKey::COPY_ABORTED, 0, 0));
    }
    // A read-only destination.
    let mut c = cfg(512);
    c.read_only = true;
    c.naa_id = 5;
    let ro = Arc::new(LogicalUnit::new(c, Arc::new(RamBackend::new(4096 * 512))).unwrap());
    let rw = Arc::new(LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(4096 * 512))).unwrap());
    let m = LunMap::new(vec![(0, rw), (1, ro)]);
    let p = xcopy_params(0, 0b11, &[0xabcdef, 5], &[(0, 1, 1, 0, 0)]);
    assert_eq!(sense_of(&xcopy(&m, &p)), (SenseKey::DATA_PROTECT, 0x27, 0));
}

#[test]
fn receive_copy_operating_parameters() {
    let m = ram_map(100, 512);
    let r = run(&m, &[0x84, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(r.data.len(), 46);
    assert_eq!(
        &r.bytes()[8..12],
        &[0, 8, 0, 64],
        "8 CSCD and 64 segment descriptors"
    );
    assert_eq!(&r.bytes()[43..], &[2, 0x02, 0xe4]);
    let inq = run(&m, &[opcode::INQUIRY, 0, 0, 0, 96, 0]);
    assert_eq!(inq.bytes()[5] & 0x08, 0x08, "3PC");
}
