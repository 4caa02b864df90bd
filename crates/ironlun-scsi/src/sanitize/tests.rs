//! SANITIZE: where it is offered, OVERWRITE, BLOCK ERASE, and the LU while
//! it runs or after it failed.

use std::sync::Arc;

use ironlun_backend::testing::{Faults, FaultyBackend};
use ironlun_backend::{Backend, RamBackend};

use crate::test_util::{cdb16, cfg, lu_with, ram_map, read10, run, run_out, sense_of, write10};
use crate::{LunMap, Response};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

fn sanitize_map(backend: Arc<dyn Backend>, thin: bool) -> LunMap {
    let mut c = cfg(512);
    c.thin = thin;
    c.sanitize = true;
    lu_with(backend, c)
}

/// SANITIZE with a parameter list of `len` bytes (`data` may be longer).
fn sanitize(m: &LunMap, sa: u8, len: u16, data: &[u8]) -> Response {
    let l = len.to_be_bytes();
    run_out(
        m,
        &[opcode::SANITIZE, sa, 0, 0, 0, 0, 0, l[0], l[1], 0],
        data,
    )
}

fn overwrite_params(count: u8, pattern: &[u8]) -> Vec<u8> {
    let mut p = vec![count, 0];
    p.extend_from_slice(&(pattern.len() as u16).to_be_bytes());
    p.extend_from_slice(pattern);
    p
}

#[test]
fn sanitize_only_where_configured() {
    let m = ram_map(64, 512);
    assert_eq!(
        sense_of(&sanitize(&m, 0x01, 8, &overwrite_params(1, &[1; 4]))),
        (SenseKey::ILLEGAL_REQUEST, 0x20, 0)
    );
    // Without thin provisioning there is no BLOCK ERASE.
    let m = sanitize_map(Arc::new(RamBackend::new(64 * 512)), false);
    assert_eq!(
        sense_of(&sanitize(&m, 0x02, 0, &[])),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    let r = run(&m, &[opcode::INQUIRY, 1, 0xb1, 0, 64, 0]);
    assert_eq!(r.bytes()[7] & 0xc0, 0, "WABEREQ 0 without BLOCK ERASE");
}

#[test]
fn sanitize_overwrite_and_its_parameter_checks() {
    let m = sanitize_map(Arc::new(RamBackend::new(64 * 512)), false);
    assert_eq!(
        run_out(&m, &write10(0, 1, 0), &[b'a'; 512]).status,
        Status::GOOD
    );
    let p = overwrite_params(1, &[0xaa; 512]);
    assert_eq!(sanitize(&m, 0x01, p.len() as u16, &p).status, Status::GOOD);
    for lba in [0, 63] {
        assert!(run(&m, &read10(lba, 1)).bytes().iter().all(|&b| b == 0xaa));
    }
    // A 3-byte pattern repeats through each block; INVERT with two passes
    // ends on the pattern itself.
    let mut p = overwrite_params(2, &[1, 2, 3]);
    p[0] |= 0x80;
    assert_eq!(sanitize(&m, 0x01, p.len() as u16, &p).status, Status::GOOD);
    let r = run(&m, &read10(5, 1));
    assert_eq!(&r.bytes()[..6], &[1, 2, 3, 1, 2, 3]);
    assert_eq!(r.bytes()[511], [1, 2, 3][511 % 3]);
    // Parameter list length 0..=4 and block size + 5: INVALID FIELD IN CDB.
    let big = overwrite_params(1, &[0; 512]);
    for len in [0u16, 4, 517] {
        assert_eq!(
            sense_of(&sanitize(&m, 0x01, len, &big)),
            (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
        );
    }
    // OVERWRITE COUNT 0, pattern length 0 or over a block: the list.
    for p in [overwrite_params(0, &[1; 8]), {
        let mut p = overwrite_params(1, &[1; 8]);
        p[2..4].copy_from_slice(&[0, 0]);
        p
    }] {
        assert_eq!(
            sense_of(&sanitize(&m, 0x01, p.len() as u16, &p)),
            (SenseKey::ILLEGAL_REQUEST, 0x26, 0)
        );
    }
    // Reserved bit 6 of byte 1; unknown and unsupported service actions.
    assert_eq!(
        sense_of(&sanitize(&m, 0x41, 8, &overwrite_params(1, &[1; 4]))),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    for sa in [0x00, 0x03, 0x04, 0x1e] {
        assert_eq!(
            sense_of(&sanitize(&m, sa, 0, &[])),
            (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
        );
    }
    assert_eq!(
        sense_of(&sanitize(&m, 0x1f, 8, &[0; 8])),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    assert_eq!(sanitize(&m, 0x1f, 0, &[]).status, Status::GOOD);
}

#[test]
fn sanitize_block_erase_deallocates_everything() {
    let m = sanitize_map(Arc::new(RamBackend::new(64 * 512)), true);
    assert_eq!(
        run_out(&m, &write10(0, 4, 0), &[b'a'; 2048]).status,
        Status::GOOD
    );
    assert_eq!(
        sense_of(&sanitize(&m, 0x02, 8, &[0; 8])),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    assert_eq!(sanitize(&m, 0x02, 0, &[]).status, Status::GOOD);
    assert!(run(&m, &read10(0, 4)).bytes().iter().all(|&b| b == 0));
    // GET LBA STATUS: one descriptor, all 64 blocks deallocated.
    let r = run(&m, &cdb16(0x9e, 0x12, 0, 64));
    assert_eq!(&r.bytes()[..4], &[0, 0, 0, 20]);
    assert_eq!(&r.bytes()[16..20], &64u32.to_be_bytes());
    assert_eq!(r.bytes()[20] & 0x0f, 1, "deallocated");
    let r = run(&m, &[opcode::INQUIRY, 1, 0xb1, 0, 64, 0]);
    assert_eq!(r.bytes()[7] & 0xc0, 0x40, "WABEREQ 01b");
}

#[test]
fn sanitize_in_progress_and_failure_mode() {
    let b = Arc::new(FaultyBackend::new(RamBackend::new(64 * 512)));
    let m = sanitize_map(b.clone(), false);
    let lu = m.get(0).unwrap().clone();
    // While an operation runs: NOT READY, SANITIZE IN PROGRESS, except for
    // INQUIRY and REQUEST SENSE (which reports it).
    lu.sanitize
        .running
        .store(true, std::sync::atomic::Ordering::Release);
    assert_eq!(
        sense_of(&run(&m, &[0; 6])),
        (SenseKey::NOT_READY, 0x04, 0x1b)
    );
    assert_eq!(
        sense_of(&run(&m, &read10(0, 1))),
        (SenseKey::NOT_READY, 0x04, 0x1b)
    );
    assert_eq!(
        run(&m, &[opcode::INQUIRY, 0, 0, 0, 36, 0]).status,
        Status::GOOD
    );
    let rs = run(&m, &[opcode::REQUEST_SENSE, 0, 0, 0, 18, 0]);
    assert_eq!(
        (
            SenseKey(rs.bytes()[2]),
            rs.bytes()[12],
            rs.bytes()[13],
            rs.bytes()[15] & 0x80
        ),
        (SenseKey::NOT_READY, 0x04, 0x1b, 0x80)
    );
    let p = overwrite_params(1, &[1; 4]);
    assert_eq!(
        sense_of(&sanitize(&m, 0x01, 8, &p)),
        (SenseKey::NOT_READY, 0x04, 0x1b)
    );
    lu.sanitize
        .running
        .store(false, std::sync::atomic::Ordering::Release);
    // A failed overwrite leaves the LU in failure mode until EXIT FAILURE
    // MODE.
    b.set_faults(Faults {
        write: Some(0..512),
        ..Faults::default()
    });
    assert_eq!(
        sense_of(&sanitize(&m, 0x01, 8, &p)),
        (SenseKey::MEDIUM_ERROR, 0x31, 0x03)
    );
    b.set_faults(Faults::default());
    assert_eq!(
        sense_of(&run(&m, &read10(0, 1))),
        (SenseKey::MEDIUM_ERROR, 0x31, 0x03)
    );
    assert_eq!(
        run(&m, &[opcode::INQUIRY, 0, 0, 0, 36, 0]).status,
        Status::GOOD
    );
    assert_eq!(sanitize(&m, 0x1f, 0, &[]).status, Status::GOOD);
    assert_eq!(run(&m, &read10(0, 1)).status, Status::GOOD);
}
