//! Thin provisioning: UNMAP, GET LBA STATUS, WRITE SAME with UNMAP, and
//! what a thin LU reports.

use std::sync::Arc;

use ironlun_backend::RamBackend;

use crate::test_util::{cdb16, cfg, lu_with, read10, run, run_out, sense_of, write10};
use crate::{LunMap, Response};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

fn thin_map(blocks: u64) -> LunMap {
    let mut c = cfg(512);
    c.thin = true;
    lu_with(Arc::new(RamBackend::new(blocks * 512)), c)
}

/// GET LBA STATUS from `lba`: (first LBA, blocks, provisioning status) of
/// each descriptor.
fn lba_status(m: &LunMap, lba: u64) -> Vec<(u64, u32, u8)> {
    let mut c = [0u8; 16];
    c[0] = 0x9e;
    c[1] = 0x12;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[13] = 255;
    let r = run(m, &c);
    assert_eq!(r.status, Status::GOOD);
    let n = (u32::from_be_bytes(r.bytes()[..4].try_into().unwrap()) as usize - 4) / 16;
    (0..n)
        .map(|i| {
            let d = &r.bytes()[8 + 16 * i..];
            (
                u64::from_be_bytes(d[..8].try_into().unwrap()),
                u32::from_be_bytes(d[8..12].try_into().unwrap()),
                d[12],
            )
        })
        .collect::<Vec<_>>()
}

/// UNMAP of `ranges` (LBA, blocks).
fn unmap(m: &LunMap, ranges: &[(u64, u32)]) -> Response {
    let mut p = vec![0u8; 8];
    for (lba, n) in ranges {
        p.extend_from_slice(&lba.to_be_bytes());
        p.extend_from_slice(&n.to_be_bytes());
        p.extend_from_slice(&[0; 4]);
    }
    let bd = (p.len() - 8) as u16;
    let data_len = p.len() as u16 - 2;
    p[0..2].copy_from_slice(&data_len.to_be_bytes());
    p[2..4].copy_from_slice(&bd.to_be_bytes());
    let l = (p.len() as u16).to_be_bytes();
    run_out(m, &[opcode::UNMAP, 0, 0, 0, 0, 0, 0, l[0], l[1], 0], &p)
}

#[test]
fn thin_lu_unmaps_and_reports_lba_status() {
    let blocks = 1024u64; // 512 KiB: 8 RAM chunks of 128 blocks
    let m = thin_map(blocks);
    reports_thin_provisioning(&m);
    lba_status_follows_writes(&m);
    unmap_deallocates_after_checking_every_descriptor(&m);
    write_same_with_unmap_deallocates(&m);
}

/// READ CAPACITY(16) and the VPD pages tell of thin provisioning.
fn reports_thin_provisioning(m: &LunMap) {
    let r = run(m, &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]);
    assert_eq!(r.bytes()[14] & 0xc0, 0xc0, "LBPME and LBPRZ");
    assert_eq!(r.bytes()[13] & 0x0f, 0, "physical block = logical block");
    let lbp = run(m, &[opcode::INQUIRY, 1, 0xb2, 0, 255, 0]);
    assert_eq!((lbp.bytes()[5], lbp.bytes()[6]), (0xe4, 0x02));
    let bl = run(m, &[opcode::INQUIRY, 1, 0xb0, 0, 255, 0]);
    assert_eq!(
        u32::from_be_bytes(bl.bytes()[24..28].try_into().unwrap()),
        256,
        "max unmap descriptors"
    );
    assert_eq!(
        u32::from_be_bytes(bl.bytes()[28..32].try_into().unwrap()),
        128,
        "optimal unmap granularity"
    );
}

/// Nothing is mapped until written; blocks 0..256 are written here.
fn lba_status_follows_writes(m: &LunMap) {
    assert_eq!(
        lba_status(m, 0),
        vec![(0, 1024, 1)],
        "nothing written yet: all deallocated"
    );
    run_out(m, &write10(0, 256, 0), &vec![b'a'; 256 * 512]);
    assert_eq!(lba_status(m, 0), vec![(0, 256, 0), (256, 768, 1)]);
    assert_eq!(
        lba_status(m, 100),
        vec![(100, 156, 0), (256, 768, 1)],
        "descriptors start at the LBA asked for"
    );
}

/// UNMAP of blocks 0..256 as written by [`lba_status_follows_writes`].
fn unmap_deallocates_after_checking_every_descriptor(m: &LunMap) {
    // Unmap blocks 0..128 (a whole chunk) and 200..210 (part of one).
    assert_eq!(unmap(m, &[(0, 128), (200, 10)]).status, Status::GOOD);
    assert_eq!(
        lba_status(m, 0),
        vec![(0, 128, 1), (128, 128, 0), (256, 768, 1)]
    );
    let back = run(m, &read10(190, 30)).bytes();
    assert!(back[..10 * 512].iter().all(|&c| c == b'a'));
    assert!(
        back[10 * 512..20 * 512].iter().all(|&c| c == 0),
        "LBPRZ: unmapped reads zero"
    );
    assert!(back[20 * 512..].iter().all(|&c| c == b'a'));
    // Checked before anything happens: one bad descriptor, nothing unmapped.
    assert_eq!(
        sense_of(&unmap(m, &[(128, 10), (1020, 10)])),
        (SenseKey::ILLEGAL_REQUEST, 0x21, 0)
    );
    assert_eq!(run(m, &read10(128, 1)).bytes()[0], b'a');
    // A descriptor whose end wraps u64 is out of range too.
    for d in [(u64::MAX - 1, 4), (u64::MAX, 0), (1 << 63, u32::MAX)] {
        assert_eq!(
            sense_of(&unmap(m, &[(128, 10), d])),
            (SenseKey::ILLEGAL_REQUEST, 0x21, 0),
            "{d:?}"
        );
    }
    assert_eq!(run(m, &read10(128, 1)).bytes()[0], b'a');
    assert_eq!(
        unmap(m, &[(1024, 0)]).status,
        Status::GOOD,
        "zero blocks at the end"
    );
    assert_eq!(
        run(m, &[opcode::UNMAP, 0, 0, 0, 0, 0, 0, 0, 0, 0]).status,
        Status::GOOD,
        "empty list"
    );
    assert_eq!(
        sense_of(&run_out(
            m,
            &[opcode::UNMAP, 0, 0, 0, 0, 0, 0, 0, 4, 0],
            &[0; 4]
        ))
        .1,
        0x1a
    );
}

/// WRITE SAME(16) with UNMAP deallocates blocks 512.., and GET LBA STATUS
/// past the end is out of range.
fn write_same_with_unmap_deallocates(m: &LunMap) {
    // WRITE SAME(16) with UNMAP and zeros deallocates; with NDOB no data.
    run_out(m, &write10(512, 128, 0), &vec![b'z'; 128 * 512]);
    assert_eq!(lba_status(m, 512)[0], (512, 128, 0));
    assert_eq!(
        run_out(m, &cdb16(0x93, 0x08, 512, 128), &[0; 512]).status,
        Status::GOOD
    );
    assert_eq!(lba_status(m, 512)[0], (512, 512, 1));
    run_out(m, &write10(512, 128, 0), &vec![b'z'; 128 * 512]);
    assert_eq!(run(m, &cdb16(0x93, 0x09, 512, 128)).status, Status::GOOD);
    assert_eq!(lba_status(m, 512)[0], (512, 512, 1));
    // UNMAP deallocates whatever the data block holds.
    run_out(m, &write10(600, 1, 0), &[5; 512]);
    assert_eq!(
        run_out(m, &cdb16(0x93, 0x08, 600, 1), &[1; 512]).status,
        Status::GOOD
    );
    assert_eq!(run(m, &read10(600, 1)).bytes()[0], 0);
    // Beyond the end.
    assert_eq!(
        sense_of(&run(m, &{
            let mut c = [0u8; 16];
            c[0] = 0x9e;
            c[1] = 0x12;
            c[2..10].copy_from_slice(&1024u64.to_be_bytes());
            c[13] = 24;
            c
        })),
        (SenseKey::ILLEGAL_REQUEST, 0x21, 0)
    );
}

/// An LU larger than the backend window (2^20 blocks) with one block
/// written near each end is described whole, in order, by one command
/// (libiscsi's Sanitize.BlockErase checks a 1 GiB LU this way), and asking
/// from the middle starts there.
#[test]
fn lba_status_covers_an_lu_larger_than_one_window() {
    let blocks = 3 << 20; // 1.5 GiB of 512-byte blocks, thin
    let m = thin_map(blocks);
    let chunk = 128u64; // blocks per RAM chunk
    assert_eq!(lba_status(&m, 0), vec![(0, blocks as u32, 1)]);
    for lba in [0, blocks - 1] {
        let r = run_out(&m, &write10(lba as u32, 1, 0), &[7; 512]);
        assert_eq!(r.status, Status::GOOD);
    }
    assert_eq!(
        lba_status(&m, 0),
        vec![
            (0, chunk as u32, 0),
            (chunk, (blocks - 2 * chunk) as u32, 1),
            (blocks - chunk, chunk as u32, 0),
        ]
    );
    assert_eq!(
        lba_status(&m, 2 << 20),
        vec![
            (2 << 20, ((1 << 20) - chunk) as u32, 1),
            (blocks - chunk, chunk as u32, 0)
        ]
    );
}

/// A fully provisioned LU answers GET LBA STATUS with every LBA mapped,
/// from the requested LBA to the end, whatever the backend allocated.
#[test]
fn lba_status_of_a_fully_provisioned_lu_is_all_mapped() {
    let blocks = 4096u64;
    let m = lu_with(Arc::new(RamBackend::new(blocks * 512)), cfg(512));
    assert_eq!(lba_status(&m, 0), vec![(0, blocks as u32, 0)]);
    assert_eq!(lba_status(&m, 100), vec![(100, (blocks - 100) as u32, 0)]);
}
