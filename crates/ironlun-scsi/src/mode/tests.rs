//! MODE SENSE and MODE SELECT.

use crate::test_util::{id, ram_map, read10, run, run_out, sense_of, write10, N};
use crate::{DataOutBuffer, LunMap, NexusId, Response};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

#[test]
fn mode_sense_pages() {
    let m = ram_map(100, 512);
    let r = run(&m, &[opcode::MODE_SENSE_6, 0, 0x3f, 0, 255, 0]);
    assert_eq!(r.status, Status::GOOD);
    let d = &r.bytes();
    assert_eq!(d[0] as usize, d.len() - 1);
    assert_eq!(d[2] & 0x10, 0x10, "DPOFUA");
    assert_eq!(d[3], 8, "one short block descriptor");
    assert_eq!(&d[4 + 5..4 + 8], &[0, 2, 0], "block length 512");
    let pages: Vec<u8> = {
        let mut v = Vec::new();
        let mut i = 12;
        while i < d.len() {
            v.push(d[i] & 0x3f);
            i += 2 + d[i + 1] as usize;
        }
        v
    };
    assert_eq!(pages, vec![0x08, 0x0a, 0x1c]);
    // Allocation length 4: four bytes, and no residual overflow (transfer
    // length equals what was returned).
    let r = run(&m, &[opcode::MODE_SENSE_6, 0, 0x3f, 0, 4, 0]);
    assert_eq!((r.data.len(), r.transfer_length), (4, 4));
    // MODE SENSE(10) with LLBAA: a 16-byte descriptor.
    let r = run(
        &m,
        &[opcode::MODE_SENSE_10, 0x10, 0x0a, 0, 0, 0, 0, 0, 255, 0],
    );
    assert_eq!(r.bytes()[4] & 1, 1);
    assert_eq!(u16::from_be_bytes([r.bytes()[6], r.bytes()[7]]), 16);
    assert_eq!(r.bytes()[8 + 16], 0x0a);
    // Saved values are not supported; unknown pages are invalid.
    assert_eq!(
        sense_of(&run(&m, &[opcode::MODE_SENSE_6, 0, 0xc8, 0, 255, 0])),
        (SenseKey::ILLEGAL_REQUEST, 0x39, 0)
    );
    assert_eq!(
        sense_of(&run(&m, &[opcode::MODE_SENSE_6, 0, 0x01, 0, 255, 0])),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
}

fn mode_sense_page(m: &LunMap, page: u8) -> Vec<u8> {
    let r = run(m, &[opcode::MODE_SENSE_6, 0x08, page, 0, 255, 0]);
    assert_eq!(r.status, Status::GOOD);
    r.bytes()[4..].to_vec()
}

fn mode_select6(m: &LunMap, page: &[u8]) -> Response {
    let mut data = vec![0u8, 0, 0, 0];
    data.extend_from_slice(page);
    run_out(
        m,
        &[opcode::MODE_SELECT_6, 0x10, 0, 0, data.len() as u8, 0],
        &data,
    )
}

#[test]
fn mode_select_changes_wce_d_sense_and_swp() {
    let m = ram_map(100, 512);
    m.attach_nexus(N, &id("a"), false);
    m.attach_nexus(NexusId(9), &id("b"), false);
    run(&m, &[0, 0, 0, 0, 0, 0]);
    m.execute(
        Some(0),
        NexusId(9),
        &[0, 0, 0, 0, 0, 0],
        &DataOutBuffer::new(),
    );
    // Changeable values show exactly WCE, D_SENSE and SWP.
    let r = run(&m, &[opcode::MODE_SENSE_6, 0x08, 0x40 | 0x3f, 0, 255, 0]);
    assert_eq!(&r.bytes()[4..8], &[0x08, 0x12, 0x04, 0]);
    let mut caching = mode_sense_page(&m, 0x08);
    assert_eq!(caching[2] & 0x04, 0x04, "WCE on by default");
    caching[2] &= !0x04;
    assert_eq!(mode_select6(&m, &caching).status, Status::GOOD);
    assert_eq!(mode_sense_page(&m, 0x08)[2] & 0x04, 0);
    // The other nexus hears about it.
    let r = m.execute(
        Some(0),
        NexusId(9),
        &[0, 0, 0, 0, 0, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(sense_of(&r), (SenseKey::UNIT_ATTENTION, 0x2a, 0x01));

    let mut control = mode_sense_page(&m, 0x0a);
    control[4] |= 0x08;
    assert_eq!(mode_select6(&m, &control).status, Status::GOOD);
    assert_eq!(
        sense_of(&run_out(&m, &write10(0, 1, 0), &[0; 512])),
        (SenseKey::DATA_PROTECT, 0x27, 0)
    );
    assert_eq!(run(&m, &read10(0, 1)).status, Status::GOOD);
    control[4] &= !0x08;
    control[2] |= 0x04;
    assert_eq!(mode_select6(&m, &control).status, Status::GOOD);
    assert_eq!(
        run(&m, &read10(500, 1)).sense[0],
        0x72,
        "D_SENSE now gives descriptor sense"
    );

    // A bit that is not changeable, a bad page length, saving, PF=0.
    let mut bad = mode_sense_page(&m, 0x0a);
    bad[3] ^= 0x10;
    assert_eq!(sense_of(&mode_select6(&m, &bad)).1, 0x26);
    let mut bad = mode_sense_page(&m, 0x0a);
    bad[1] = 9;
    assert_eq!(sense_of(&mode_select6(&m, &bad[..11])).1, 0x26);
    assert_eq!(
        sense_of(&run_out(
            &m,
            &[opcode::MODE_SELECT_6, 0x11, 0, 0, 16, 0],
            &[0; 16]
        ))
        .1,
        0x24
    );
    assert_eq!(
        sense_of(&run_out(
            &m,
            &[opcode::MODE_SELECT_6, 0x00, 0, 0, 16, 0],
            &[0; 16]
        ))
        .1,
        0x24
    );
    // A block descriptor that restates the block length is fine; another
    // length is not.
    let mut data = vec![0u8, 0, 0, 8, 0, 0, 0, 0, 0, 0, 2, 0];
    assert_eq!(
        run_out(&m, &[opcode::MODE_SELECT_6, 0x10, 0, 0, 12, 0], &data).status,
        Status::GOOD
    );
    data[10] = 4;
    assert_eq!(
        sense_of(&run_out(
            &m,
            &[opcode::MODE_SELECT_6, 0x10, 0, 0, 12, 0],
            &data
        ))
        .1,
        0x26
    );
}

#[test]
fn tas_is_offered_changeable_on_by_default_and_kept_per_lu() {
    let m = ram_map(100, 512);
    m.attach_nexus(N, &id("a"), false);
    run(&m, &[0, 0, 0, 0, 0, 0]);
    let lu = m.get(0).unwrap();
    // Byte 5 bit 6 of the control page (SPC-5 §7.5.8): current, default
    // and changeable values all have it.
    assert_eq!(mode_sense_page(&m, 0x0a)[5] & 0x40, 0x40, "current");
    let pc = |pc: u8| run(&m, &[opcode::MODE_SENSE_6, 0x08, pc | 0x0a, 0, 255, 0]);
    assert_eq!(pc(0x80).bytes()[4 + 5] & 0x40, 0x40, "default");
    assert_eq!(pc(0x40).bytes()[4 + 5], 0x40, "changeable: TAS only");
    assert!(lu.tas());
    let mut control = mode_sense_page(&m, 0x0a);
    control[5] &= !0x40;
    assert_eq!(mode_select6(&m, &control).status, Status::GOOD);
    assert!(!lu.tas());
    assert_eq!(
        mode_sense_page(&m, 0x0a)[5] & 0x40,
        0,
        "current after select"
    );
    assert_eq!(pc(0x80).bytes()[4 + 5] & 0x40, 0x40, "default unchanged");
    // Another bit of byte 5 (ATO, 0x80) is still not changeable.
    let mut bad = mode_sense_page(&m, 0x0a);
    bad[5] |= 0x80;
    assert_eq!(sense_of(&mode_select6(&m, &bad)).1, 0x26);
    control[5] |= 0x40;
    assert_eq!(mode_select6(&m, &control).status, Status::GOOD);
    assert!(lu.tas());
}

/// The pages of a MODE SENSE(6) response after the header and block
/// descriptors: (page code, subpage code, bytes).
fn pages_of(d: &[u8]) -> Vec<(u8, u8, Vec<u8>)> {
    let mut out = Vec::new();
    let mut i = 4 + d[3] as usize;
    while i < d.len() {
        let spf = d[i] & 0x40 != 0;
        let (sub, len) = if spf {
            (
                d[i + 1],
                4 + u16::from_be_bytes([d[i + 2], d[i + 3]]) as usize,
            )
        } else {
            (0, 2 + d[i + 1] as usize)
        };
        out.push((d[i] & 0x3f, sub, d[i..i + len].to_vec()));
        i += len;
    }
    out
}

fn sense6(m: &LunMap, page: u8, subpage: u8) -> Response {
    run(m, &[opcode::MODE_SENSE_6, 0x08, page, subpage, 255, 0])
}

fn codes(r: &Response) -> Vec<(u8, u8)> {
    pages_of(&r.bytes()).iter().map(|p| (p.0, p.1)).collect()
}

/// A 16 MiB LU (64 KiB threshold sets) with a 1 MiB soft threshold.
fn threshold_map() -> LunMap {
    use crate::test_util::threshold_lu;
    threshold_lu(16 << 20, 512, crate::SoftThreshold::Bytes(1 << 20), 4 << 20).map
}

#[test]
fn subpages_are_selected_as_spc_says() {
    let plain = ram_map(100, 512);
    let t = threshold_map();
    let page_0s = vec![(0x08, 0), (0x0a, 0), (0x1c, 0)];
    // 3Fh/00h: every page_0 page; 3Fh/FFh: every page and subpage.
    assert_eq!(codes(&sense6(&t, 0x3f, 0)), page_0s);
    assert_eq!(codes(&sense6(&plain, 0x3f, 0xff)), page_0s);
    let mut all = page_0s.clone();
    all.push((0x1c, 0x02));
    assert_eq!(codes(&sense6(&t, 0x3f, 0xff)), all);
    // A page with FFh: it and its subpages; a subpage alone.
    assert_eq!(codes(&sense6(&t, 0x1c, 0xff)), vec![(0x1c, 0), (0x1c, 2)]);
    assert_eq!(codes(&sense6(&plain, 0x1c, 0xff)), vec![(0x1c, 0)]);
    assert_eq!(codes(&sense6(&t, 0x1c, 0x02)), vec![(0x1c, 2)]);
    assert_eq!(codes(&sense6(&t, 0x08, 0xff)), vec![(0x08, 0)]);
    // What the LU does not have: the subpage code is pointed at for a
    // page it has, the page code otherwise; 3Fh with another subpage is
    // reserved.
    let field = |r: &Response| {
        assert_eq!(sense_of(r), (SenseKey::ILLEGAL_REQUEST, 0x24, 0));
        u16::from_be_bytes([r.sense[16], r.sense[17]])
    };
    assert_eq!(field(&sense6(&plain, 0x1c, 0x02)), 3);
    assert_eq!(field(&sense6(&t, 0x08, 0x02)), 3);
    assert_eq!(field(&sense6(&t, 0x3f, 0x02)), 3);
    assert_eq!(field(&sense6(&t, 0x01, 0xff)), 2);
    // MODE SENSE(10) selects the same way.
    let r = run(
        &t,
        &[opcode::MODE_SENSE_10, 0x08, 0x3f, 0xff, 0, 0, 0, 1, 0, 0],
    );
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(
        u16::from_be_bytes([r.bytes()[0], r.bytes()[1]]) as usize + 2,
        r.data.len()
    );
    assert_eq!(&r.bytes()[r.data.len() - 24..][..2], &[0x5c, 0x02]);
}

#[test]
fn logical_block_provisioning_mode_page() {
    let t = threshold_map();
    let lbp = |pc: u8| pages_of(&sense6(&t, pc | 0x1c, 0x02).bytes())[0].2.clone();
    let mut expected = vec![0x5c, 0x02, 0x00, 0x14];
    expected.extend_from_slice(&[0; 12]); // SITUA = 0
                                          // ENABLED, soft, armed decreasing; available LBA mapping resources;
                                          // THRESHOLD COUNT: 1 MiB is 16 sets of 64 KiB.
    expected.extend_from_slice(&[0x80, 0x01, 0, 0, 0, 0, 0, 16]);
    assert_eq!(lbp(0x00), expected, "current");
    assert_eq!(lbp(0x80), expected, "default");
    let mut mask = vec![0x5c, 0x02, 0x00, 0x14];
    mask.resize(24, 0);
    assert_eq!(lbp(0x40), mask, "changeable: nothing");
}

fn mode_select6_page(m: &LunMap, page: &[u8]) -> Response {
    mode_select6(m, page)
}

#[test]
fn mode_select_takes_the_subpage_back_unchanged_only() {
    let t = threshold_map();
    t.attach_nexus(N, &id("a"), false);
    t.attach_nexus(NexusId(9), &id("b"), false);
    run(&t, &[0, 0, 0, 0, 0, 0]);
    let other = |m: &LunMap| m.execute(Some(0), NexusId(9), &[0; 6], &DataOutBuffer::new());
    other(&t);
    let page = pages_of(&sense6(&t, 0x1c, 0x02).bytes())[0].2.clone();
    assert_eq!(mode_select6_page(&t, &page).status, Status::GOOD);
    assert_eq!(other(&t).status, Status::GOOD, "nothing changed: no UA");
    // With the other pages, as sdparm writes them back.
    let all = sense6(&t, 0x3f, 0xff).bytes();
    let mut pages = Vec::new();
    for (_, _, p) in pages_of(&all) {
        pages.extend_from_slice(&p);
    }
    assert_eq!(mode_select6_page(&t, &pages).status, Status::GOOD);
    // ENABLED and THRESHOLD COUNT are not changeable.
    for (byte, flip) in [(16usize, 0x80u8), (23, 0x01), (4, 0x01)] {
        let mut bad = page.clone();
        bad[byte] ^= flip;
        let r = mode_select6_page(&t, &bad);
        assert_eq!(sense_of(&r), (SenseKey::ILLEGAL_REQUEST, 0x26, 0));
        assert_eq!(
            u16::from_be_bytes([r.sense[16], r.sense[17]]),
            4 + byte as u16
        );
    }
    // A wrong PAGE LENGTH (pointed at), SPF without a subpage, the
    // subpage on an LU without a threshold.
    let mut bad = page.clone();
    bad[3] = 0x10;
    let r = mode_select6_page(&t, &bad[..20]);
    assert_eq!(u16::from_be_bytes([r.sense[16], r.sense[17]]), 4 + 2);
    let mut bad = page.clone();
    bad[1] = 0;
    assert_eq!(sense_of(&mode_select6_page(&t, &bad)).1, 0x26);
    let plain = ram_map(100, 512);
    assert_eq!(sense_of(&mode_select6_page(&plain, &page)).1, 0x26);
}
