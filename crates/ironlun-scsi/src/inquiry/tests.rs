//! INQUIRY: standard data and the VPD pages.

use crate::test_util::{ram_map, run, sense_of};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

#[test]
fn standard_inquiry_layout() {
    let m = ram_map(100, 512);
    let r = run(&m, &[opcode::INQUIRY, 0, 0, 0, 255, 0]);
    assert_eq!(r.status, Status::GOOD);
    let d = &r.bytes();
    assert_eq!(d.len(), 96);
    assert_eq!(d[0], 0x00);
    assert_eq!(d[2], 0x06, "SPC-4");
    assert_eq!(d[3] & 0x0f, 2, "response data format 2");
    assert_eq!(d[4] as usize, d.len() - 5);
    assert_eq!(&d[8..16], b"IRONLUN ");
    assert!(d[8..36].iter().all(|&c| (0x20..=0x7e).contains(&c)));
    let descs: Vec<u16> = d[58..74]
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    assert!(descs.contains(&0x0460) && descs.contains(&0x04c0));
    // Allocation length truncates without error and without residual
    // overflow (transfer length = bytes returned).
    let r = run(&m, &[opcode::INQUIRY, 0, 0, 0, 5, 0]);
    assert_eq!(r.data.len(), 5);
    assert_eq!(r.transfer_length, 5);
    // 16-bit allocation length.
    let r = run(&m, &[opcode::INQUIRY, 0, 0, 0x01, 0xff, 0]);
    assert_eq!(r.data.len(), 96);
    // EVPD=0 with a page code is invalid.
    assert_eq!(
        sense_of(&run(&m, &[opcode::INQUIRY, 0, 0x80, 0, 255, 0])),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
}

#[test]
fn vpd_pages() {
    let m = ram_map(100, 512);
    let r = run(&m, &[opcode::INQUIRY, 1, 0x00, 0, 255, 0]);
    let pages = &r.bytes()[4..];
    assert_eq!(pages, &[0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2]);
    for &p in pages {
        let r = run(&m, &[opcode::INQUIRY, 1, p, 0, 255, 0]);
        assert_eq!(r.status, Status::GOOD, "page {p:#x}");
        assert_eq!(r.bytes()[1], p);
        assert_eq!(
            r.data.len(),
            4 + u16::from_be_bytes([r.bytes()[2], r.bytes()[3]]) as usize
        );
    }
    let bl = run(&m, &[opcode::INQUIRY, 1, 0xb0, 0, 255, 0]);
    assert_eq!(bl.bytes()[3], 0x3c);
    assert_eq!(
        u32::from_be_bytes(bl.bytes()[8..12].try_into().unwrap()),
        (1 << 20) / 512
    );
    let id = run(&m, &[opcode::INQUIRY, 1, 0x83, 0, 255, 0]);
    // First designator: NAA, binary, 8 bytes, NAA nibble 3.
    assert_eq!(&id.bytes()[4..8], &[0x01, 0x03, 0, 8]);
    assert_eq!(id.bytes()[8] >> 4, 3);
    let sn = run(&m, &[opcode::INQUIRY, 1, 0x80, 0, 255, 0]);
    assert_eq!(&sn.bytes()[4..], b"ser123");
    assert_eq!(
        sense_of(&run(&m, &[opcode::INQUIRY, 1, 0x99, 0, 255, 0])),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
}

/// MEDIUM ROTATION RATE (VPD B1h bytes 4–5, SBC-4 §6.6.2): the backend's
/// (RAM does not rotate), unless the LU's configuration says otherwise.
#[test]
fn medium_rotation_rate_from_the_backend_or_the_configuration() {
    use crate::test_util::{cfg, lu_with};
    use ironlun_backend::{RamBackend, Rotation};
    use std::sync::Arc;
    let rate = |rotation: Option<Rotation>| {
        let c = crate::LuConfig {
            rotation,
            ..cfg(512)
        };
        let m = lu_with(Arc::new(RamBackend::new(1 << 20)), c);
        let page = run(&m, &[opcode::INQUIRY, 1, 0xb1, 0, 255, 0]).bytes();
        u16::from_be_bytes([page[4], page[5]])
    };
    assert_eq!(rate(None), 1, "RAM is non-rotating");
    assert_eq!(rate(Some(Rotation::Rpm(7200))), 7200);
    assert_eq!(rate(Some(Rotation::NotReported)), 0);
    // Out-of-range rates are kept inside 0401h–FFFEh.
    assert_eq!(rate(Some(Rotation::Rpm(10))), 0x0401);
}

/// THRESHOLD EXPONENT (VPD B2h byte 4): zero on a thin LU without a soft
/// threshold (thresholds not supported), the threshold set's size as a
/// power of two with one (a 64 KiB RAM granule of 512-byte blocks: 7).
#[test]
fn threshold_exponent_only_with_a_soft_threshold() {
    use crate::test_util::{cfg, lu_with, threshold_lu};
    use crate::SoftThreshold;
    use ironlun_backend::RamBackend;
    use std::sync::Arc;
    let lbp = |m: &crate::LunMap| run(m, &[opcode::INQUIRY, 1, 0xb2, 0, 255, 0]).bytes();
    let thin = crate::LuConfig {
        thin: true,
        ..cfg(512)
    };
    let plain = lbp(&lu_with(Arc::new(RamBackend::new(1 << 24)), thin));
    assert_eq!(&plain[..], &[0, 0xb2, 0, 4, 0, 0xe4, 0x02, 0]);
    let t = threshold_lu(1 << 24, 512, SoftThreshold::Bytes(1 << 20), 1 << 22);
    let page = lbp(&t.map);
    assert_eq!(&page[..], &[0, 0xb2, 0, 4, 7, 0xe4, 0x02, 0]);
    // The capacity counts below 2^32 sets.
    let blocks = (1u64 << 24) / 512;
    assert!(blocks >> page[4] < 1 << 32);
}
