//! Device behaviour tests: commands in, status/sense/data out.

use std::sync::Arc;

use ironlun_backend::testing::{Faults, FaultyBackend};
use ironlun_backend::{Backend, RamBackend};

use super::*;
use crate::reservations::{self, pr_type};
use crate::sense::{asc, key};

const N: NexusId = NexusId(1);

fn id(name: &str) -> ItNexus {
    ItNexus::new(
        &format!("iqn.2026-11.test:{name}"),
        [0x80, 0, 0, 0, 0, 1],
        1,
    )
}

fn cfg(bs: u32) -> LuConfig {
    LuConfig {
        block_size: bs,
        physical_block_size: bs,
        read_only: false,
        product: "ram".into(),
        revision: "0.1".into(),
        serial: "ser123".into(),
        naa_id: 0xabcdef,
        target_name: "iqn.2026-11.test:t".into(),
        relative_port: 1,
        max_transfer_bytes: 1 << 20,
        thin: false,
        sanitize: false,
    }
}

fn thin_map(blocks: u64) -> LunMap {
    let mut c = cfg(512);
    c.thin = true;
    lu_with(Arc::new(RamBackend::new(blocks * 512)), c)
}

fn lu_with(backend: Arc<dyn Backend>, c: LuConfig) -> LunMap {
    let lu = Arc::new(LogicalUnit::new(c, backend).unwrap());
    LunMap::new(vec![(0, lu)])
}

fn ram_map(blocks: u64, bs: u32) -> LunMap {
    lu_with(Arc::new(RamBackend::new(blocks * u64::from(bs))), cfg(bs))
}

impl Response {
    /// The response's data in memory (read from the file for a file range).
    fn bytes(&self) -> Bytes {
        self.data.to_bytes().unwrap()
    }
}

fn run(m: &LunMap, cdb: &[u8]) -> Response {
    m.execute(Some(0), N, cdb, &DataOutBuffer::new())
}

fn run_out(m: &LunMap, cdb: &[u8], data: &[u8]) -> Response {
    m.execute(Some(0), N, cdb, &DataOutBuffer::copy_from_slice(data))
}

/// (sense key, ASC, ASCQ) of a fixed- or descriptor-format response.
fn sense_of(r: &Response) -> (u8, u8, u8) {
    assert_eq!(
        r.status,
        status::CHECK_CONDITION,
        "expected CHECK CONDITION"
    );
    let s = &r.sense;
    match s[0] & 0x7f {
        0x70 => (s[2] & 0x0f, s[12], s[13]),
        0x72 => (s[1] & 0x0f, s[2], s[3]),
        other => panic!("sense format {other:#x}"),
    }
}

fn read10(lba: u32, blocks: u16) -> [u8; 10] {
    let l = lba.to_be_bytes();
    let n = blocks.to_be_bytes();
    [0x28, 0, l[0], l[1], l[2], l[3], 0, n[0], n[1], 0]
}

fn write10(lba: u32, blocks: u16, flags: u8) -> [u8; 10] {
    let mut c = read10(lba, blocks);
    c[0] = 0x2a;
    c[1] = flags;
    c
}

#[test]
fn standard_inquiry_layout() {
    let m = ram_map(100, 512);
    let r = run(&m, &[0x12, 0, 0, 0, 255, 0]);
    assert_eq!(r.status, status::GOOD);
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
    let r = run(&m, &[0x12, 0, 0, 0, 5, 0]);
    assert_eq!(r.data.len(), 5);
    assert_eq!(r.transfer_length, 5);
    // 16-bit allocation length.
    let r = run(&m, &[0x12, 0, 0, 0x01, 0xff, 0]);
    assert_eq!(r.data.len(), 96);
    // EVPD=0 with a page code is invalid.
    assert_eq!(
        sense_of(&run(&m, &[0x12, 0, 0x80, 0, 255, 0])),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
}

#[test]
fn vpd_pages() {
    let m = ram_map(100, 512);
    let r = run(&m, &[0x12, 1, 0x00, 0, 255, 0]);
    let pages = &r.bytes()[4..];
    assert_eq!(pages, &[0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2]);
    for &p in pages {
        let r = run(&m, &[0x12, 1, p, 0, 255, 0]);
        assert_eq!(r.status, status::GOOD, "page {p:#x}");
        assert_eq!(r.bytes()[1], p);
        assert_eq!(
            r.data.len(),
            4 + u16::from_be_bytes([r.bytes()[2], r.bytes()[3]]) as usize
        );
    }
    let bl = run(&m, &[0x12, 1, 0xb0, 0, 255, 0]);
    assert_eq!(bl.bytes()[3], 0x3c);
    assert_eq!(
        u32::from_be_bytes(bl.bytes()[8..12].try_into().unwrap()),
        (1 << 20) / 512
    );
    let id = run(&m, &[0x12, 1, 0x83, 0, 255, 0]);
    // First designator: NAA, binary, 8 bytes, NAA nibble 3.
    assert_eq!(&id.bytes()[4..8], &[0x01, 0x03, 0, 8]);
    assert_eq!(id.bytes()[8] >> 4, 3);
    let sn = run(&m, &[0x12, 1, 0x80, 0, 255, 0]);
    assert_eq!(&sn.bytes()[4..], b"ser123");
    assert_eq!(
        sense_of(&run(&m, &[0x12, 1, 0x99, 0, 255, 0])),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
}

#[test]
fn read_capacity_10_and_16() {
    let m = ram_map(2048, 4096);
    let r = run(&m, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&r.bytes()[..], &[0, 0, 0x07, 0xff, 0, 0, 0x10, 0]);
    let r = run(&m, &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]);
    assert_eq!(r.data.len(), 32);
    assert_eq!(u64::from_be_bytes(r.bytes()[..8].try_into().unwrap()), 2047);
    assert_eq!(
        u32::from_be_bytes(r.bytes()[8..12].try_into().unwrap()),
        4096
    );
    let r = run(&m, &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0]);
    assert_eq!(r.data.len(), 12);
}

#[test]
fn write_then_read_round_trips_all_sizes() {
    let m = ram_map(1000, 512);
    let data: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();
    let r = run_out(&m, &write10(10, 2, 0), &data);
    assert_eq!(r.status, status::GOOD);
    assert_eq!(r.transfer_length, 1024);
    assert_eq!(&run(&m, &read10(10, 2)).bytes()[..], &data[..]);
    // READ(6), (12) and (16) see the same data.
    assert_eq!(&run(&m, &[0x08, 0, 0, 10, 2, 0]).bytes()[..], &data[..]);
    assert_eq!(
        &run(&m, &[0xa8, 0, 0, 0, 0, 10, 0, 0, 0, 2, 0, 0])
            .data
            .to_bytes()
            .unwrap()[..],
        &data[..]
    );
    let r16 = [0x88, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 2, 0, 0];
    assert_eq!(&run(&m, &r16).bytes()[..], &data[..]);
    // WRITE(16) with FUA, then WRITE AND VERIFY(10) with BYTCHK=1.
    let w16 = [0x8a, 0x08, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0];
    assert_eq!(run_out(&m, &w16, &data[..512]).status, status::GOOD);
    let wv = [0x2e, 0x02, 0, 0, 0, 21, 0, 0, 1, 0];
    assert_eq!(run_out(&m, &wv, &data[..512]).status, status::GOOD);
    assert_eq!(
        &run(&m, &read10(20, 2)).bytes()[..],
        &[&data[..512], &data[..512]].concat()[..]
    );
    // READ(6) transfer length 0 means 256 blocks.
    assert_eq!(run(&m, &[0x08, 0, 0, 0, 0, 0]).data.len(), 256 * 512);
}

#[test]
fn lba_out_of_range_and_zero_length() {
    let m = ram_map(100, 512);
    let oob = (key::ILLEGAL_REQUEST, 0x21, 0x00);
    assert_eq!(sense_of(&run(&m, &read10(99, 2))), oob);
    assert_eq!(sense_of(&run(&m, &read10(100, 1))), oob);
    assert_eq!(sense_of(&run(&m, &read10(u32::MAX, 1))), oob);
    // Zero blocks: fine inside the medium, out of range past it.
    assert_eq!(run(&m, &read10(0, 0)).status, status::GOOD);
    assert_eq!(run(&m, &read10(99, 0)).status, status::GOOD);
    assert_eq!(sense_of(&run(&m, &read10(101, 0))), oob);
    let r16 = [
        0x88, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 0,
    ];
    assert_eq!(sense_of(&run(&m, &r16)), oob);
    // Beyond MAXIMUM TRANSFER LENGTH (1 MiB = 2048 blocks here).
    let big = ram_map(10_000, 512);
    assert_eq!(
        sense_of(&run(&big, &read10(0, 2049))),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
}

#[test]
fn protect_fields_and_reserved_bits_are_invalid_field_in_cdb() {
    let m = ram_map(100, 512);
    for rdprotect in 1..8u8 {
        let mut c = read10(0, 1);
        c[1] = rdprotect << 5;
        assert_eq!(sense_of(&run(&m, &c)), (key::ILLEGAL_REQUEST, 0x24, 0));
    }
    // DPO/FUA are accepted (DPOFUA is set in MODE SENSE).
    let mut c = read10(0, 1);
    c[1] = 0x18;
    assert_eq!(run(&m, &c).status, status::GOOD);
}

#[test]
fn write_with_too_little_data_writes_what_arrived() {
    let m = ram_map(100, 512);
    run_out(&m, &write10(0, 2, 0), &[b'a'; 1024]);
    // Two blocks asked for, one block and 200 bytes sent: those are
    // written, the rest of the second block keeps its old data.
    let r = run_out(&m, &write10(0, 2, 0), &[b'b'; 712]);
    assert_eq!(r.status, status::GOOD);
    assert_eq!(
        r.transfer_length, 1024,
        "overflow residual is computed from this"
    );
    let back = run(&m, &read10(0, 2)).bytes();
    assert!(back[..712].iter().all(|&c| c == b'b'));
    assert!(back[712..].iter().all(|&c| c == b'a'));
    // Nothing sent: nothing written.
    let r = run_out(&m, &write10(0, 1, 0), &[]);
    assert_eq!((r.status, r.transfer_length), (status::GOOD, 512));
    assert_eq!(run(&m, &read10(0, 1)).bytes()[0], b'b');
    // More data than the CDB asks for: only the CDB's length is written.
    let r = run_out(&m, &write10(0, 1, 0), &[b'c'; 1024]);
    assert_eq!(r.status, status::GOOD);
    assert_eq!(r.transfer_length, 512);
    assert_eq!(run(&m, &read10(1, 1)).bytes()[0], b'b');
}

#[test]
fn read_only_lun_refuses_writes() {
    let mut c = cfg(512);
    c.read_only = true;
    let m = lu_with(Arc::new(RamBackend::new(512 * 100)), c);
    assert_eq!(
        sense_of(&run_out(&m, &write10(0, 1, 0), &[0; 512])),
        (key::DATA_PROTECT, 0x27, 0)
    );
    assert_eq!(run(&m, &read10(0, 1)).status, status::GOOD);
    // MODE SENSE reports WP.
    let r = run(&m, &[0x1a, 0, 0x3f, 0, 255, 0]);
    assert_eq!(r.bytes()[2] & 0x80, 0x80);
}

#[test]
fn unit_attention_after_attach_then_cleared() {
    let m = ram_map(100, 512);
    m.attach_nexus(N, &id("a"), false);
    // INQUIRY and REPORT LUNS pass through a pending UA.
    assert_eq!(run(&m, &[0x12, 0, 0, 0, 36, 0]).status, status::GOOD);
    assert_eq!(
        run(&m, &[0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]).status,
        status::GOOD
    );
    let r = run(&m, &[0x00, 0, 0, 0, 0, 0]);
    assert_eq!(sense_of(&r), (key::UNIT_ATTENTION, 0x29, 0x00));
    assert_eq!(run(&m, &[0x00, 0, 0, 0, 0, 0]).status, status::GOOD);
    // Another nexus has its own UA.
    let other = NexusId(2);
    m.attach_nexus(other, &id("b"), false);
    assert_eq!(run(&m, &[0x00, 0, 0, 0, 0, 0]).status, status::GOOD);
    let r = m.execute(Some(0), other, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(r.status, status::CHECK_CONDITION);
}

#[test]
fn capacity_change_and_reset_unit_attentions() {
    let m = ram_map(100, 512);
    m.attach_nexus(N, &id("a"), false);
    run(&m, &[0x00, 0, 0, 0, 0, 0]);
    let lu = m.get(0).unwrap().clone();
    lu.set_num_blocks(50);
    assert_eq!(
        sense_of(&run(&m, &read10(0, 1))),
        (key::UNIT_ATTENTION, 0x2a, 0x09)
    );
    let r = run(&m, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&r.bytes()[..4], &[0, 0, 0, 49]);
    lu.reset();
    // REQUEST SENSE reports and clears it.
    let r = run(&m, &[0x03, 0, 0, 0, 18, 0]);
    assert_eq!(r.status, status::GOOD);
    assert_eq!(
        (r.bytes()[2], r.bytes()[12], r.bytes()[13]),
        (key::UNIT_ATTENTION, 0x29, 0x03)
    );
    let r = run(&m, &[0x03, 0, 0, 0, 18, 0]);
    assert_eq!(r.bytes()[2], key::NO_SENSE);
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
    assert_eq!(sense_of(&r), (key::ILLEGAL_REQUEST, 0x21, 0));
}

#[test]
fn medium_errors_from_the_backend() {
    let b = Arc::new(FaultyBackend::new(RamBackend::new(512 * 100)));
    b.set_faults(Faults {
        read: Some(512 * 10..512 * 11),
        write: Some(0..512),
        flush: true,
    });
    let m = lu_with(b, cfg(512));
    let r = run(&m, &read10(10, 1));
    assert_eq!(sense_of(&r), (key::MEDIUM_ERROR, 0x11, 0x00));
    assert_eq!(&r.sense[3..7], &[0, 0, 0, 10], "INFORMATION holds the LBA");
    assert_eq!(run(&m, &read10(11, 1)).status, status::GOOD);
    assert_eq!(
        sense_of(&run_out(&m, &write10(0, 1, 0), &[0; 512])),
        (key::MEDIUM_ERROR, 0x0c, 0x00)
    );
    assert_eq!(
        sense_of(&run(&m, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0])),
        (key::MEDIUM_ERROR, 0x0c, 0x00)
    );
}

#[test]
fn mode_sense_pages() {
    let m = ram_map(100, 512);
    let r = run(&m, &[0x1a, 0, 0x3f, 0, 255, 0]);
    assert_eq!(r.status, status::GOOD);
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
    let r = run(&m, &[0x1a, 0, 0x3f, 0, 4, 0]);
    assert_eq!((r.data.len(), r.transfer_length), (4, 4));
    // MODE SENSE(10) with LLBAA: a 16-byte descriptor.
    let r = run(&m, &[0x5a, 0x10, 0x0a, 0, 0, 0, 0, 0, 255, 0]);
    assert_eq!(r.bytes()[4] & 1, 1);
    assert_eq!(u16::from_be_bytes([r.bytes()[6], r.bytes()[7]]), 16);
    assert_eq!(r.bytes()[8 + 16], 0x0a);
    // Saved values are not supported; unknown pages are invalid.
    assert_eq!(
        sense_of(&run(&m, &[0x1a, 0, 0xc8, 0, 255, 0])),
        (key::ILLEGAL_REQUEST, 0x39, 0)
    );
    assert_eq!(
        sense_of(&run(&m, &[0x1a, 0, 0x01, 0, 255, 0])),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
}

#[test]
fn report_luns_and_missing_luns() {
    let a = Arc::new(LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 10))).unwrap());
    let b = Arc::new(LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 10))).unwrap());
    let m = LunMap::new(vec![(0, a), (300, b)]);
    let rl = [0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    let r = m.execute(Some(5), N, &rl, &DataOutBuffer::new());
    assert_eq!(r.status, status::GOOD);
    assert_eq!(&r.bytes()[..4], &[0, 0, 0, 16]);
    assert_eq!(&r.bytes()[8..16], &[0; 8]);
    assert_eq!(&r.bytes()[16..18], &[0x41, 0x2c]);
    // Allocation length below 16 is invalid (SPC-4 §6.33).
    let short = [0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0];
    assert_eq!(
        sense_of(&m.execute(Some(0), N, &short, &DataOutBuffer::new())),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
    // A LUN without a logical unit.
    let r = m.execute(Some(5), N, &[0x12, 0, 0, 0, 96, 0], &DataOutBuffer::new());
    assert_eq!(r.bytes()[0], 0x7f);
    let r = m.execute(Some(5), N, &[0x00, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(sense_of(&r), (key::ILLEGAL_REQUEST, 0x25, 0));
    let r = m.execute(None, N, &[0x03, 0, 0, 0, 18, 0], &DataOutBuffer::new());
    assert_eq!(r.status, status::GOOD);
    assert_eq!((r.bytes()[2], r.bytes()[12]), (key::ILLEGAL_REQUEST, 0x25));
}

#[test]
fn unknown_opcode_and_report_supported_opcodes() {
    let m = ram_map(100, 512);
    assert_eq!(
        sense_of(&run(&m, &[0xc0, 0, 0, 0, 0, 0])),
        (key::ILLEGAL_REQUEST, 0x20, 0)
    );
    // One command, no service action: READ(10).
    let r = run(&m, &[0xa3, 0x0c, 0x01, 0x28, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(r.status, status::GOOD);
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
        (key::ILLEGAL_REQUEST, 0x24, 0)
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
    assert_eq!(
        len,
        8 * ops::OPS.iter().filter(|o| (o.available)(lu)).count()
    );
}

#[test]
fn block_size_4096() {
    let m = ram_map(16, 4096);
    let data = vec![0x5a; 4096];
    assert_eq!(run_out(&m, &write10(15, 1, 0), &data).status, status::GOOD);
    assert_eq!(&run(&m, &read10(15, 1)).bytes()[..], &data[..]);
    assert_eq!(
        sense_of(&run(&m, &read10(16, 1))),
        (key::ILLEGAL_REQUEST, 0x21, 0)
    );
}

#[test]
fn rejects_bad_configuration() {
    assert!(LogicalUnit::new(cfg(1024), Arc::new(RamBackend::new(1 << 20))).is_err());
    assert!(LogicalUnit::new(cfg(4096), Arc::new(RamBackend::new(100))).is_err());
    let _ = asc::WRITE_ERROR;
}

fn cdb16(op: u8, flags: u8, lba: u64, len: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = op;
    c[1] = flags;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&len.to_be_bytes());
    c
}

fn mode_sense_page(m: &LunMap, page: u8) -> Vec<u8> {
    let r = run(m, &[0x1a, 0x08, page, 0, 255, 0]);
    assert_eq!(r.status, status::GOOD);
    r.bytes()[4..].to_vec()
}

fn mode_select6(m: &LunMap, page: &[u8]) -> Response {
    let mut data = vec![0u8, 0, 0, 0];
    data.extend_from_slice(page);
    run_out(m, &[0x15, 0x10, 0, 0, data.len() as u8, 0], &data)
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
    let r = run(&m, &[0x1a, 0x08, 0x40 | 0x3f, 0, 255, 0]);
    assert_eq!(&r.bytes()[4..8], &[0x08, 0x12, 0x04, 0]);
    let mut caching = mode_sense_page(&m, 0x08);
    assert_eq!(caching[2] & 0x04, 0x04, "WCE on by default");
    caching[2] &= !0x04;
    assert_eq!(mode_select6(&m, &caching).status, status::GOOD);
    assert_eq!(mode_sense_page(&m, 0x08)[2] & 0x04, 0);
    // The other nexus hears about it.
    let r = m.execute(
        Some(0),
        NexusId(9),
        &[0, 0, 0, 0, 0, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(sense_of(&r), (key::UNIT_ATTENTION, 0x2a, 0x01));

    let mut control = mode_sense_page(&m, 0x0a);
    control[4] |= 0x08;
    assert_eq!(mode_select6(&m, &control).status, status::GOOD);
    assert_eq!(
        sense_of(&run_out(&m, &write10(0, 1, 0), &[0; 512])),
        (key::DATA_PROTECT, 0x27, 0)
    );
    assert_eq!(run(&m, &read10(0, 1)).status, status::GOOD);
    control[4] &= !0x08;
    control[2] |= 0x04;
    assert_eq!(mode_select6(&m, &control).status, status::GOOD);
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
        sense_of(&run_out(&m, &[0x15, 0x11, 0, 0, 16, 0], &[0; 16])).1,
        0x24
    );
    assert_eq!(
        sense_of(&run_out(&m, &[0x15, 0x00, 0, 0, 16, 0], &[0; 16])).1,
        0x24
    );
    // A block descriptor that restates the block length is fine; another
    // length is not.
    let mut data = vec![0u8, 0, 0, 8, 0, 0, 0, 0, 0, 0, 2, 0];
    assert_eq!(
        run_out(&m, &[0x15, 0x10, 0, 0, 12, 0], &data).status,
        status::GOOD
    );
    data[10] = 4;
    assert_eq!(
        sense_of(&run_out(&m, &[0x15, 0x10, 0, 0, 12, 0], &data)).1,
        0x26
    );
}

#[test]
fn verify_compares_and_reports_the_miscompare_offset() {
    let m = ram_map(100, 512);
    let data: Vec<u8> = (0..1024u32).map(|i| i as u8).collect();
    run_out(&m, &write10(4, 2, 0), &data);
    let verify10 = |bytchk: u8, lba: u32, n: u16| {
        let mut c = read10(lba, n);
        c[0] = 0x2f;
        c[1] = bytchk << 1;
        c
    };
    assert_eq!(run_out(&m, &verify10(1, 4, 2), &data).status, status::GOOD);
    let mut wrong = data.clone();
    wrong[700] ^= 1;
    let r = run_out(&m, &verify10(1, 4, 2), &wrong);
    assert_eq!(sense_of(&r), (key::MISCOMPARE, 0x1d, 0));
    assert_eq!(
        &r.sense[3..7],
        &700u32.to_be_bytes(),
        "INFORMATION: offset of the first difference"
    );
    // BYTCHK 0: no data, just the medium.
    assert_eq!(run(&m, &verify10(0, 0, 100)).status, status::GOOD);
    assert_eq!(
        sense_of(&run(&m, &verify10(0, 99, 2))),
        (key::ILLEGAL_REQUEST, 0x21, 0)
    );
    // BYTCHK 11b: one block compared with every block.
    run_out(&m, &write10(10, 3, 0), &[0x5a; 1536]);
    assert_eq!(
        run_out(&m, &verify10(3, 10, 3), &[0x5a; 512]).status,
        status::GOOD
    );
    let r = run_out(&m, &verify10(3, 9, 2), &[0x5a; 512]);
    assert_eq!(sense_of(&r).0, key::MISCOMPARE);
    assert_eq!(
        sense_of(&run_out(&m, &verify10(2, 10, 1), &[0; 512])),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
}

#[test]
fn compare_and_write_is_all_or_nothing() {
    let m = ram_map(100, 512);
    run_out(&m, &write10(0, 2, 0), &[b'A'; 1024]);
    let caw = |lba: u64, n: u8| {
        let mut c = [0u8; 16];
        c[0] = 0x89;
        c[2..10].copy_from_slice(&lba.to_be_bytes());
        c[13] = n;
        c
    };
    let mut data = vec![b'A'; 1024];
    data.extend_from_slice(&[b'B'; 1024]);
    assert_eq!(run_out(&m, &caw(0, 2), &data).status, status::GOOD);
    assert!(run(&m, &read10(0, 2))
        .data
        .to_bytes()
        .unwrap()
        .iter()
        .all(|&c| c == b'B'));
    // Miscompare at byte 600: nothing written.
    let mut data = vec![b'B'; 1024];
    data[600] = b'x';
    data.extend_from_slice(&[b'C'; 1024]);
    let r = run_out(&m, &caw(0, 2), &data);
    assert_eq!(sense_of(&r), (key::MISCOMPARE, 0x1d, 0));
    assert_eq!(&r.sense[3..7], &600u32.to_be_bytes());
    assert!(run(&m, &read10(0, 2))
        .data
        .to_bytes()
        .unwrap()
        .iter()
        .all(|&c| c == b'B'));
    // Wrong Data-Out sizes are refused.
    assert_eq!(
        sense_of(&run_out(&m, &caw(0, 1), &[b'B'; 512])).0,
        key::ILLEGAL_REQUEST
    );
    assert_eq!(
        sense_of(&run_out(&m, &caw(0, 1), &[b'B'; 2048])).0,
        key::ILLEGAL_REQUEST
    );
    assert_eq!(run(&m, &caw(0, 0)).status, status::GOOD);
    assert_eq!(
        sense_of(&run_out(&m, &caw(0, 0), &[0; 1024])),
        (key::ILLEGAL_REQUEST, 0x24, 0),
        "zero blocks with data"
    );
    assert_eq!(
        sense_of(&run(&m, &caw(0, 255))).0,
        key::ILLEGAL_REQUEST,
        "beyond the LUN"
    );
    let big = ram_map(1000, 512);
    assert_eq!(
        sense_of(&run(&big, &{
            let mut c = caw(0, 0);
            c[13] = 255;
            c[12] = 0;
            c
        }))
        .0,
        key::ILLEGAL_REQUEST
    );
}

#[test]
fn orwrite_and_write_atomic() {
    let m = ram_map(100, 512);
    run_out(&m, &write10(0, 1, 0), &[0x0f; 512]);
    assert_eq!(
        run_out(&m, &cdb16(0x8b, 0, 0, 1), &[0xa0; 512]).status,
        status::GOOD
    );
    assert!(run(&m, &read10(0, 1))
        .data
        .to_bytes()
        .unwrap()
        .iter()
        .all(|&c| c == 0xaf));
    let mut wa = [0u8; 16];
    wa[0] = 0x9c;
    wa[9] = 3;
    wa[13] = 2;
    assert_eq!(run_out(&m, &wa, &[7; 1024]).status, status::GOOD);
    assert!(run(&m, &read10(3, 2))
        .data
        .to_bytes()
        .unwrap()
        .iter()
        .all(|&c| c == 7));
    wa[9] = 99;
    assert_eq!(
        sense_of(&run_out(&m, &wa, &[7; 1024])),
        (key::ILLEGAL_REQUEST, 0x21, 0)
    );
}

#[test]
fn write_same_fills_and_zero_blocks_means_to_the_end() {
    let m = ram_map(100, 512);
    let ws10 = |flags: u8, lba: u32, n: u16| {
        let mut c = read10(lba, n);
        c[0] = 0x41;
        c[1] = flags;
        c
    };
    assert_eq!(run_out(&m, &ws10(0, 10, 5), &[9; 512]).status, status::GOOD);
    let back = run(&m, &read10(9, 7)).bytes();
    assert!(back[..512].iter().all(|&c| c == 0));
    assert!(back[512..512 * 6].iter().all(|&c| c == 9));
    assert!(back[512 * 6..].iter().all(|&c| c == 0));
    assert_eq!(run_out(&m, &ws10(0, 90, 0), &[3; 512]).status, status::GOOD);
    assert!(run(&m, &read10(90, 10))
        .data
        .to_bytes()
        .unwrap()
        .iter()
        .all(|&c| c == 3));
    // One block of Data-Out exactly.
    assert_eq!(
        sense_of(&run_out(&m, &ws10(0, 0, 1), &[3; 256])).0,
        key::ILLEGAL_REQUEST
    );
    assert_eq!(
        sense_of(&run_out(&m, &ws10(0, 0, 1), &[3; 1024])).0,
        key::ILLEGAL_REQUEST
    );
    // UNMAP needs a thin LU; ANCHOR is not supported.
    assert_eq!(
        sense_of(&run_out(&m, &ws10(0x08, 0, 1), &[0; 512])),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
    assert_eq!(
        sense_of(&run_out(&m, &ws10(0x10, 0, 1), &[0; 512])),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
    assert_eq!(
        sense_of(&run_out(&m, &ws10(0, 95, 6), &[0; 512])),
        (key::ILLEGAL_REQUEST, 0x21, 0)
    );
}

#[test]
fn thin_lu_unmaps_and_reports_lba_status() {
    let blocks = 1024u64; // 512 KiB: 8 RAM chunks of 128 blocks
    let m = thin_map(blocks);
    let r = run(&m, &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]);
    assert_eq!(r.bytes()[14] & 0xc0, 0xc0, "LBPME and LBPRZ");
    assert_eq!(r.bytes()[13] & 0x0f, 0, "physical block = logical block");
    let lbp = run(&m, &[0x12, 1, 0xb2, 0, 255, 0]);
    assert_eq!((lbp.bytes()[5], lbp.bytes()[6]), (0xe4, 0x02));
    let bl = run(&m, &[0x12, 1, 0xb0, 0, 255, 0]);
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

    let status = |lba: u64| {
        let mut c = [0u8; 16];
        c[0] = 0x9e;
        c[1] = 0x12;
        c[2..10].copy_from_slice(&lba.to_be_bytes());
        c[13] = 255;
        let r = run(&m, &c);
        assert_eq!(r.status, status::GOOD);
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
    };
    assert_eq!(
        status(0),
        vec![(0, 1024, 1)],
        "nothing written yet: all deallocated"
    );
    run_out(&m, &write10(0, 256, 0), &vec![b'a'; 256 * 512]);
    assert_eq!(status(0), vec![(0, 256, 0), (256, 768, 1)]);
    assert_eq!(
        status(100),
        vec![(100, 156, 0), (256, 768, 1)],
        "descriptors start at the LBA asked for"
    );

    let unmap = |ranges: &[(u64, u32)]| {
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
        run_out(&m, &[0x42, 0, 0, 0, 0, 0, 0, l[0], l[1], 0], &p)
    };
    // Unmap blocks 0..128 (a whole chunk) and 200..210 (part of one).
    assert_eq!(unmap(&[(0, 128), (200, 10)]).status, status::GOOD);
    assert_eq!(status(0), vec![(0, 128, 1), (128, 128, 0), (256, 768, 1)]);
    let back = run(&m, &read10(190, 30)).bytes();
    assert!(back[..10 * 512].iter().all(|&c| c == b'a'));
    assert!(
        back[10 * 512..20 * 512].iter().all(|&c| c == 0),
        "LBPRZ: unmapped reads zero"
    );
    assert!(back[20 * 512..].iter().all(|&c| c == b'a'));
    // Checked before anything happens: one bad descriptor, nothing unmapped.
    assert_eq!(
        sense_of(&unmap(&[(128, 10), (1020, 10)])),
        (key::ILLEGAL_REQUEST, 0x21, 0)
    );
    assert_eq!(run(&m, &read10(128, 1)).bytes()[0], b'a');
    assert_eq!(
        unmap(&[(1024, 0)]).status,
        status::GOOD,
        "zero blocks at the end"
    );
    assert_eq!(
        run(&m, &[0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0]).status,
        status::GOOD,
        "empty list"
    );
    assert_eq!(
        sense_of(&run_out(&m, &[0x42, 0, 0, 0, 0, 0, 0, 0, 4, 0], &[0; 4])).1,
        0x1a
    );

    // WRITE SAME(16) with UNMAP and zeros deallocates; with NDOB no data.
    run_out(&m, &write10(512, 128, 0), &vec![b'z'; 128 * 512]);
    assert_eq!(status(512)[0], (512, 128, 0));
    assert_eq!(
        run_out(&m, &cdb16(0x93, 0x08, 512, 128), &[0; 512]).status,
        status::GOOD
    );
    assert_eq!(status(512)[0], (512, 512, 1));
    run_out(&m, &write10(512, 128, 0), &vec![b'z'; 128 * 512]);
    assert_eq!(run(&m, &cdb16(0x93, 0x09, 512, 128)).status, status::GOOD);
    assert_eq!(status(512)[0], (512, 512, 1));
    // UNMAP deallocates whatever the data block holds.
    run_out(&m, &write10(600, 1, 0), &[5; 512]);
    assert_eq!(
        run_out(&m, &cdb16(0x93, 0x08, 600, 1), &[1; 512]).status,
        status::GOOD
    );
    assert_eq!(run(&m, &read10(600, 1)).bytes()[0], 0);
    // Beyond the end.
    assert_eq!(
        sense_of(&run(&m, &{
            let mut c = [0u8; 16];
            c[0] = 0x9e;
            c[1] = 0x12;
            c[2..10].copy_from_slice(&1024u64.to_be_bytes());
            c[13] = 24;
            c
        })),
        (key::ILLEGAL_REQUEST, 0x21, 0)
    );
}

#[test]
fn prefetch_and_read_defect_data() {
    let m = ram_map(100, 512);
    let mut pf = read10(0, 100);
    pf[0] = 0x34;
    pf[6] = 3;
    assert_eq!(run(&m, &pf).status, status::GOOD);
    assert_eq!(
        sense_of(&run(&m, &cdb16(0x90, 0, 99, 2))),
        (key::ILLEGAL_REQUEST, 0x21, 0)
    );
    let r = run(&m, &[0x37, 0, 0x18, 0, 0, 0, 0, 0, 32, 0]);
    assert_eq!(&r.bytes()[..], &[0, 0x18, 0, 0]);
    let r = run(&m, &[0xb7, 0x05, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]);
    assert_eq!(&r.bytes()[..], &[0, 0x05, 0, 0, 0, 0, 0, 0]);
}

/// PERSISTENT RESERVE OUT with the basic 24-byte parameter list.
fn prout(m: &LunMap, n: NexusId, sa: u8, ty: u8, key: u64, sa_key: u64, flags: u8) -> Response {
    let mut p = [0u8; 24];
    p[..8].copy_from_slice(&key.to_be_bytes());
    p[8..16].copy_from_slice(&sa_key.to_be_bytes());
    p[20] = flags;
    m.execute(
        Some(0),
        n,
        &[0x5f, sa, ty, 0, 0, 0, 0, 0, 24, 0],
        &DataOutBuffer::copy_from_slice(&p),
    )
}

fn prin(m: &LunMap, n: NexusId, sa: u8) -> Vec<u8> {
    let r = m.execute(
        Some(0),
        n,
        &[0x5e, sa, 0, 0, 0, 0, 0, 0x10, 0, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(r.status, status::GOOD, "{:?}", sense_of(&r));
    r.bytes().to_vec()
}

fn keys(m: &LunMap, n: NexusId) -> (u32, Vec<u64>) {
    let d = prin(m, n, 0);
    let gen = u32::from_be_bytes(d[..4].try_into().unwrap());
    let len = u32::from_be_bytes(d[4..8].try_into().unwrap()) as usize;
    (
        gen,
        d[8..8 + len]
            .chunks(8)
            .map(|c| u64::from_be_bytes(c.try_into().unwrap()))
            .collect(),
    )
}

fn two_nexus_map() -> (LunMap, NexusId, NexusId) {
    let m = ram_map(100, 512);
    let (a, b) = (NexusId(1), NexusId(2));
    m.attach_nexus(a, &id("a"), false);
    m.attach_nexus(b, &id("b"), false);
    for n in [a, b] {
        m.execute(Some(0), n, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    }
    (m, a, b)
}

const CONFLICT: u8 = status::RESERVATION_CONFLICT;

#[test]
fn spc2_reserve_release_between_two_nexuses() {
    let (m, a, b) = two_nexus_map();
    let reserve = [0x16, 0, 0, 0, 0, 0];
    let release = [0x17, 0, 0, 0, 0, 0];
    assert_eq!(
        m.execute(Some(0), a, &reserve, &DataOutBuffer::new())
            .status,
        status::GOOD
    );
    assert_eq!(
        m.execute(Some(0), a, &reserve, &DataOutBuffer::new())
            .status,
        status::GOOD,
        "holder may re-reserve"
    );
    assert_eq!(
        m.execute(Some(0), b, &reserve, &DataOutBuffer::new())
            .status,
        CONFLICT
    );
    assert_eq!(
        m.execute(Some(0), b, &read10(0, 1), &DataOutBuffer::new())
            .status,
        CONFLICT
    );
    assert_eq!(
        m.execute(Some(0), b, &[0x12, 0, 0, 0, 36, 0], &DataOutBuffer::new())
            .status,
        status::GOOD,
        "INQUIRY passes"
    );
    assert_eq!(
        m.execute(Some(0), b, &release, &DataOutBuffer::new())
            .status,
        status::GOOD,
        "a non-holder's RELEASE is a no-op"
    );
    assert_eq!(
        m.execute(Some(0), b, &reserve, &DataOutBuffer::new())
            .status,
        CONFLICT
    );
    assert_eq!(
        m.execute(Some(0), a, &read10(0, 1), &DataOutBuffer::new())
            .status,
        status::GOOD
    );
    assert_eq!(
        m.execute(Some(0), a, &release, &DataOutBuffer::new())
            .status,
        status::GOOD
    );
    assert_eq!(
        m.execute(Some(0), b, &reserve, &DataOutBuffer::new())
            .status,
        status::GOOD
    );
    // Nexus loss releases it; so does a LU reset.
    m.detach_nexus(b);
    assert_eq!(
        m.execute(Some(0), a, &reserve, &DataOutBuffer::new())
            .status,
        status::GOOD
    );
    m.get(0).unwrap().reset();
    m.attach_nexus(b, &id("b"), true);
    m.execute(Some(0), b, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(
        m.execute(Some(0), b, &reserve, &DataOutBuffer::new())
            .status,
        status::GOOD
    );
}

#[test]
fn persistent_register_reserve_release_and_conflicts() {
    let (m, a, b) = two_nexus_map();
    // REGISTER with a non-zero key from an unregistered nexus conflicts.
    assert_eq!(prout(&m, a, 0x00, 0, 5, 0x1111, 0).status, CONFLICT);
    assert_eq!(prout(&m, a, 0x00, 0, 0, 0x1111, 0).status, status::GOOD);
    assert_eq!(
        prout(&m, b, 0x06, 0, 0, 0x2222, 0).status,
        status::GOOD,
        "REGISTER AND IGNORE"
    );
    let (gen, k) = keys(&m, a);
    assert_eq!((gen, k), (2, vec![0x1111, 0x2222]));
    // Re-registering with the wrong current key conflicts.
    assert_eq!(prout(&m, a, 0x00, 0, 0x9999, 0x3333, 0).status, CONFLICT);
    // Write Exclusive by a.
    assert_eq!(
        prout(&m, a, 0x01, pr_type::WRITE_EXCLUSIVE, 0x1111, 0, 0).status,
        status::GOOD
    );
    let r = prin(&m, a, 1);
    assert_eq!(&r[4..8], &16u32.to_be_bytes());
    assert_eq!(&r[8..16], &0x1111u64.to_be_bytes());
    assert_eq!(r[21] & 0x0f, pr_type::WRITE_EXCLUSIVE);
    assert_eq!(
        m.execute(Some(0), b, &read10(0, 1), &DataOutBuffer::new())
            .status,
        status::GOOD,
        "reads pass WE"
    );
    assert_eq!(
        m.execute(
            Some(0),
            b,
            &write10(0, 1, 0),
            &DataOutBuffer::copy_from_slice(&[0; 512])
        )
        .status,
        CONFLICT
    );
    assert_eq!(
        m.execute(
            Some(0),
            a,
            &write10(0, 1, 0),
            &DataOutBuffer::copy_from_slice(&[0; 512])
        )
        .status,
        status::GOOD
    );
    // Another RESERVE by b conflicts; RESERVE(6) conflicts with PR state.
    assert_eq!(
        prout(&m, b, 0x01, pr_type::WRITE_EXCLUSIVE, 0x2222, 0, 0).status,
        CONFLICT
    );
    assert_eq!(
        m.execute(Some(0), b, &[0x16, 0, 0, 0, 0, 0], &DataOutBuffer::new())
            .status,
        CONFLICT
    );
    // RELEASE with the wrong type is an error; by a non-holder, a no-op.
    assert_eq!(
        sense_of(&prout(&m, a, 0x02, pr_type::EXCLUSIVE_ACCESS, 0x1111, 0, 0)),
        (key::ILLEGAL_REQUEST, 0x26, 0x04)
    );
    assert_eq!(
        prout(&m, b, 0x02, pr_type::WRITE_EXCLUSIVE, 0x2222, 0, 0).status,
        status::GOOD
    );
    assert_eq!(
        m.execute(
            Some(0),
            b,
            &write10(0, 1, 0),
            &DataOutBuffer::copy_from_slice(&[0; 512])
        )
        .status,
        CONFLICT
    );
    assert_eq!(
        prout(&m, a, 0x02, pr_type::WRITE_EXCLUSIVE, 0x1111, 0, 0).status,
        status::GOOD
    );
    assert_eq!(
        m.execute(
            Some(0),
            b,
            &write10(0, 1, 0),
            &DataOutBuffer::copy_from_slice(&[0; 512])
        )
        .status,
        status::GOOD
    );
    // Reserve/release do not bump the generation.
    assert_eq!(keys(&m, a).0, 2);
    // Unregistering the holder of a registrants-only reservation ends it
    // and tells the others.
    assert_eq!(
        prout(
            &m,
            a,
            0x01,
            pr_type::WRITE_EXCLUSIVE_REGISTRANTS_ONLY,
            0x1111,
            0,
            0
        )
        .status,
        status::GOOD
    );
    assert_eq!(prout(&m, a, 0x00, 0, 0x1111, 0, 0).status, status::GOOD);
    let r = m.execute(Some(0), b, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(
        sense_of(&r),
        (key::UNIT_ATTENTION, 0x2a, 0x04),
        "RESERVATIONS RELEASED"
    );
    assert_eq!(prin(&m, b, 1)[4..8], 0u32.to_be_bytes());
}

#[test]
fn all_registrants_reservation_survives_its_maker() {
    let (m, a, b) = two_nexus_map();
    prout(&m, a, 0x06, 0, 0, 1, 0);
    prout(&m, b, 0x06, 0, 0, 2, 0);
    assert_eq!(
        prout(
            &m,
            a,
            0x01,
            pr_type::EXCLUSIVE_ACCESS_ALL_REGISTRANTS,
            1,
            0,
            0
        )
        .status,
        status::GOOD
    );
    let r = prin(&m, b, 1);
    assert_eq!(
        &r[8..16],
        &0u64.to_be_bytes(),
        "all-registrants reservations report key 0"
    );
    assert_eq!(
        m.execute(
            Some(0),
            b,
            &write10(0, 1, 0),
            &DataOutBuffer::copy_from_slice(&[0; 512])
        )
        .status,
        status::GOOD
    );
    prout(&m, a, 0x00, 0, 1, 0, 0);
    assert_eq!(
        prin(&m, b, 1)[4..8],
        16u32.to_be_bytes(),
        "b still holds it"
    );
    prout(&m, b, 0x00, 0, 2, 0, 0);
    assert_eq!(
        prin(&m, a, 1)[4..8],
        0u32.to_be_bytes(),
        "gone with the last registrant"
    );
}

#[test]
fn preempt_and_clear() {
    let (m, a, b) = two_nexus_map();
    prout(&m, a, 0x06, 0, 0, 1, 0);
    prout(&m, b, 0x06, 0, 0, 2, 0);
    let gen = keys(&m, a).0;
    // No reservation: PREEMPT removes the registrations with that key.
    let r = prout(&m, b, 0x04, pr_type::EXCLUSIVE_ACCESS, 2, 1, 0);
    assert_eq!(
        (r.status, r.abort_nexuses),
        (status::GOOD, vec![]),
        "PREEMPT aborts nothing"
    );
    assert_eq!(keys(&m, b), (gen + 1, vec![2]));
    let r = m.execute(Some(0), a, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(
        sense_of(&r),
        (key::UNIT_ATTENTION, 0x2a, 0x05),
        "REGISTRATIONS PREEMPTED"
    );
    assert_eq!(
        prout(&m, b, 0x04, pr_type::EXCLUSIVE_ACCESS, 2, 7, 0).status,
        CONFLICT,
        "nobody has key 7"
    );
    // Preempting the holder takes its reservation.
    prout(&m, a, 0x06, 0, 0, 1, 0);
    prout(&m, a, 0x01, pr_type::EXCLUSIVE_ACCESS, 1, 0, 0);
    assert_eq!(
        m.execute(Some(0), b, &read10(0, 1), &DataOutBuffer::new())
            .status,
        CONFLICT
    );
    let r = prout(&m, b, 0x05, pr_type::WRITE_EXCLUSIVE, 2, 1, 0);
    assert_eq!(
        (r.status, r.abort_nexuses),
        (status::GOOD, vec![a]),
        "PREEMPT AND ABORT ends a's tasks"
    );
    let r = m.execute(Some(0), a, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(
        sense_of(&r),
        (key::UNIT_ATTENTION, 0x2a, 0x05),
        "the preempted holder is told"
    );
    let r = prin(&m, a, 1);
    assert_eq!(
        (&r[8..16], r[21] & 0x0f),
        (&2u64.to_be_bytes()[..], pr_type::WRITE_EXCLUSIVE)
    );
    // CLEAR by a registrant removes everything.
    assert_eq!(prout(&m, b, 0x03, 0, 2, 0, 0).status, status::GOOD);
    assert_eq!(keys(&m, a).1, Vec::<u64>::new());
    assert_eq!(prin(&m, a, 1)[4..8], 0u32.to_be_bytes());
}

#[test]
fn persistent_reserve_in_forms() {
    let (m, a, _b) = two_nexus_map();
    prout(&m, a, 0x06, 0, 0, 0xabc, 0);
    let caps = prin(&m, a, 2);
    assert_eq!(&caps[..2], &8u16.to_be_bytes());
    assert_eq!(caps[3] & 0x80, 0x80, "TMV");
    assert_eq!((caps[4], caps[5]), (0xea, 0x01));
    assert_eq!(caps[2] & 0x01, 0, "no APTPL without a store");
    let full = prin(&m, a, 3);
    assert_eq!(
        u32::from_be_bytes(full[4..8].try_into().unwrap()) as usize,
        full.len() - 8
    );
    assert_eq!(&full[8..16], &0xabcu64.to_be_bytes());
    let tid = &full[8 + 24..];
    assert_eq!(tid[0], 0x45);
    assert!(std::str::from_utf8(tid)
        .unwrap()
        .contains("iqn.2026-11.test:a,i,0x800000000001"));
    // Truncation keeps the additional length.
    let r = m.execute(
        Some(0),
        a,
        &[0x5e, 0, 0, 0, 0, 0, 0, 0, 8, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(r.data.len(), 8);
    assert_eq!(&r.bytes()[4..8], &8u32.to_be_bytes());
    for sa in 4..0x20u8 {
        let r = m.execute(
            Some(0),
            a,
            &[0x5e, sa, 0, 0, 0, 0, 0, 0x10, 0, 0],
            &DataOutBuffer::new(),
        );
        assert_eq!(
            sense_of(&r).0,
            key::ILLEGAL_REQUEST,
            "PR IN service action {sa}"
        );
    }
    // APTPL without a store, and a short parameter list.
    assert_eq!(sense_of(&prout(&m, a, 0x06, 0, 0, 1, 0x01)).1, 0x26);
    let r = m.execute(
        Some(0),
        a,
        &[0x5f, 0, 0, 0, 0, 0, 0, 0, 8, 0],
        &DataOutBuffer::copy_from_slice(&[0; 8]),
    );
    assert_eq!(sense_of(&r).1, 0x1a);
}

struct MemStore(std::sync::Mutex<Option<String>>);

impl reservations::PrStore for MemStore {
    fn save(&self, text: &str) -> std::io::Result<()> {
        *self.0.lock().unwrap() = Some(text.to_owned());
        Ok(())
    }
    fn clear(&self) -> std::io::Result<()> {
        *self.0.lock().unwrap() = None;
        Ok(())
    }
}

#[test]
fn aptpl_state_is_saved_and_restored() {
    let store = Arc::new(MemStore(std::sync::Mutex::new(None)));
    let mut lu = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 100))).unwrap();
    lu.set_pr_store(store.clone(), None);
    let m = LunMap::new(vec![(0, Arc::new(lu))]);
    m.attach_nexus(N, &id("a"), false);
    m.execute(Some(0), N, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(prout(&m, N, 0x06, 0, 0, 77, 0x01).status, status::GOOD);
    assert_eq!(
        prout(&m, N, 0x01, pr_type::EXCLUSIVE_ACCESS, 77, 0, 0).status,
        status::GOOD
    );
    let saved = store.0.lock().unwrap().clone().expect("saved with APTPL");
    // A new LU (a restart) restored from the saved text: the same nexus
    // identity still holds the reservation, another one conflicts.
    let mut lu = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 100))).unwrap();
    lu.set_pr_store(
        store.clone(),
        Some(reservations::PrState::decode(&saved).unwrap()),
    );
    let m2 = LunMap::new(vec![(0, Arc::new(lu))]);
    m2.attach_nexus(NexusId(5), &id("a"), false);
    m2.attach_nexus(NexusId(6), &id("b"), false);
    m2.execute(
        Some(0),
        NexusId(5),
        &[0, 0, 0, 0, 0, 0],
        &DataOutBuffer::new(),
    );
    m2.execute(
        Some(0),
        NexusId(6),
        &[0, 0, 0, 0, 0, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(
        m2.execute(Some(0), NexusId(5), &read10(0, 1), &DataOutBuffer::new())
            .status,
        status::GOOD
    );
    assert_eq!(
        m2.execute(Some(0), NexusId(6), &read10(0, 1), &DataOutBuffer::new())
            .status,
        CONFLICT
    );
    assert_eq!(prin(&m2, NexusId(5), 2)[3] & 0x01, 1, "PTPL_A");
    // Clearing APTPL forgets the saved state.
    assert_eq!(
        prout(&m2, NexusId(5), 0x00, 0, 77, 77, 0).status,
        status::GOOD
    );
    assert!(store.0.lock().unwrap().is_none());
}

#[test]
fn report_supported_task_management_functions() {
    let m = ram_map(100, 512);
    // ATS ATSS CTSS LURS QTS TRS; QTSS ITNRS.
    let r = run(&m, &[0xa3, 0x0d, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0]);
    assert_eq!(&r.bytes()[..], &[0xde, 0x03, 0, 0]);
    let r = run(&m, &[0xa3, 0x0d, 0x80, 0, 0, 0, 0, 0, 0, 16, 0, 0]);
    assert_eq!((r.data.len(), r.bytes()[3]), (16, 0x0c), "extended format");
}

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
        status::GOOD
    );
    let p = xcopy_params(7, 0b00, &[1, 2], &[(0, 1, 8, 0, 100)]);
    assert_eq!(xcopy(&m, &p).status, status::GOOD);
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
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
    // LIST ID USAGE 10b holds nothing.
    let p = xcopy_params(8, 0b10, &[1, 2], &[(0, 1, 8, 0, 100)]);
    assert_eq!(xcopy(&m, &p).status, status::GOOD);
    let mut c = status_cdb;
    c[2] = 8;
    assert_eq!(sense_of(&run(&m, &c)), (key::ILLEGAL_REQUEST, 0x24, 0));
    // A failed copy held with usage 00b reports "completed with errors".
    let p = xcopy_params(9, 0b00, &[1, 2], &[(0, 1, 8, 0, 100), (0, 1, 8, 0, 4095)]);
    assert_eq!(sense_of(&xcopy(&m, &p)), (key::COPY_ABORTED, 0, 0));
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
            status::GOOD
        );
    }
    let p = xcopy_params(0, 0b11, &[1], &[(0, 0, 4096, 0, 1000)]);
    assert_eq!(xcopy(&m, &p).status, status::GOOD);
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
    assert_eq!(sense_of(&xcopy(&m, &p)), (key::COPY_ABORTED, 0x08, 0x04));
    // A list identifier with usage 11b, reserved usage 01b.
    let p = xcopy_params(3, 0b11, &[1], &[(0, 0, 8, 0, 8)]);
    assert_eq!(sense_of(&xcopy(&m, &p)), (key::ILLEGAL_REQUEST, 0x26, 0));
    let p = xcopy_params(3, 0b01, &[1], &[(0, 0, 8, 0, 8)]);
    assert_eq!(sense_of(&xcopy(&m, &p)), (key::ILLEGAL_REQUEST, 0x26, 0));
    // Too many CSCD descriptors, too many segments.
    let p = xcopy_params(0, 0b11, &[1; 9], &[(0, 0, 8, 0, 8)]);
    assert_eq!(sense_of(&xcopy(&m, &p)), (key::ILLEGAL_REQUEST, 0x26, 0x06));
    let p = xcopy_params(0, 0b11, &[1], &[(0, 0, 1, 0, 8); 65]);
    assert_eq!(sense_of(&xcopy(&m, &p)), (key::ILLEGAL_REQUEST, 0x26, 0x08));
    // Truncated parameter list.
    let p = xcopy_params(0, 0b11, &[1], &[(0, 0, 1, 0, 8)]);
    assert_eq!(
        sense_of(&xcopy(&m, &p[..p.len() - 1])),
        (key::ILLEGAL_REQUEST, 0x1a, 0)
    );
    // A read-only destination.
    let mut c = cfg(512);
    c.read_only = true;
    c.naa_id = 5;
    let ro = Arc::new(LogicalUnit::new(c, Arc::new(RamBackend::new(4096 * 512))).unwrap());
    let rw = Arc::new(LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(4096 * 512))).unwrap());
    let m = LunMap::new(vec![(0, rw), (1, ro)]);
    let p = xcopy_params(0, 0b11, &[0xabcdef, 5], &[(0, 1, 1, 0, 0)]);
    assert_eq!(sense_of(&xcopy(&m, &p)), (key::DATA_PROTECT, 0x27, 0));
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
    let inq = run(&m, &[0x12, 0, 0, 0, 96, 0]);
    assert_eq!(inq.bytes()[5] & 0x08, 0x08, "3PC");
}

fn sanitize_map(backend: Arc<dyn Backend>, thin: bool) -> LunMap {
    let mut c = cfg(512);
    c.thin = thin;
    c.sanitize = true;
    lu_with(backend, c)
}

/// SANITIZE with a parameter list of `len` bytes (`data` may be longer).
fn sanitize(m: &LunMap, sa: u8, len: u16, data: &[u8]) -> Response {
    let l = len.to_be_bytes();
    run_out(m, &[0x48, sa, 0, 0, 0, 0, 0, l[0], l[1], 0], data)
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
        (key::ILLEGAL_REQUEST, 0x20, 0)
    );
    // Without thin provisioning there is no BLOCK ERASE.
    let m = sanitize_map(Arc::new(RamBackend::new(64 * 512)), false);
    assert_eq!(
        sense_of(&sanitize(&m, 0x02, 0, &[])),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
    let r = run(&m, &[0x12, 1, 0xb1, 0, 64, 0]);
    assert_eq!(r.bytes()[7] & 0xc0, 0, "WABEREQ 0 without BLOCK ERASE");
}

#[test]
fn sanitize_overwrite_and_its_parameter_checks() {
    let m = sanitize_map(Arc::new(RamBackend::new(64 * 512)), false);
    assert_eq!(
        run_out(&m, &write10(0, 1, 0), &[b'a'; 512]).status,
        status::GOOD
    );
    let p = overwrite_params(1, &[0xaa; 512]);
    assert_eq!(sanitize(&m, 0x01, p.len() as u16, &p).status, status::GOOD);
    for lba in [0, 63] {
        assert!(run(&m, &read10(lba, 1))
            .data
            .to_bytes()
            .unwrap()
            .iter()
            .all(|&b| b == 0xaa));
    }
    // A 3-byte pattern repeats through each block; INVERT with two passes
    // ends on the pattern itself.
    let mut p = overwrite_params(2, &[1, 2, 3]);
    p[0] |= 0x80;
    assert_eq!(sanitize(&m, 0x01, p.len() as u16, &p).status, status::GOOD);
    let r = run(&m, &read10(5, 1));
    assert_eq!(&r.bytes()[..6], &[1, 2, 3, 1, 2, 3]);
    assert_eq!(r.bytes()[511], [1, 2, 3][511 % 3]);
    // Parameter list length 0..=4 and block size + 5: INVALID FIELD IN CDB.
    let big = overwrite_params(1, &[0; 512]);
    for len in [0u16, 4, 517] {
        assert_eq!(
            sense_of(&sanitize(&m, 0x01, len, &big)),
            (key::ILLEGAL_REQUEST, 0x24, 0)
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
            (key::ILLEGAL_REQUEST, 0x26, 0)
        );
    }
    // Reserved bit 6 of byte 1; unknown and unsupported service actions.
    assert_eq!(
        sense_of(&sanitize(&m, 0x41, 8, &overwrite_params(1, &[1; 4]))),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
    for sa in [0x00, 0x03, 0x04, 0x1e] {
        assert_eq!(
            sense_of(&sanitize(&m, sa, 0, &[])),
            (key::ILLEGAL_REQUEST, 0x24, 0)
        );
    }
    assert_eq!(
        sense_of(&sanitize(&m, 0x1f, 8, &[0; 8])),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
    assert_eq!(sanitize(&m, 0x1f, 0, &[]).status, status::GOOD);
}

#[test]
fn sanitize_block_erase_deallocates_everything() {
    let m = sanitize_map(Arc::new(RamBackend::new(64 * 512)), true);
    assert_eq!(
        run_out(&m, &write10(0, 4, 0), &[b'a'; 2048]).status,
        status::GOOD
    );
    assert_eq!(
        sense_of(&sanitize(&m, 0x02, 8, &[0; 8])),
        (key::ILLEGAL_REQUEST, 0x24, 0)
    );
    assert_eq!(sanitize(&m, 0x02, 0, &[]).status, status::GOOD);
    assert!(run(&m, &read10(0, 4))
        .data
        .to_bytes()
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    // GET LBA STATUS: one descriptor, all 64 blocks deallocated.
    let r = run(&m, &cdb16(0x9e, 0x12, 0, 64));
    assert_eq!(&r.bytes()[..4], &[0, 0, 0, 20]);
    assert_eq!(&r.bytes()[16..20], &64u32.to_be_bytes());
    assert_eq!(r.bytes()[20] & 0x0f, 1, "deallocated");
    let r = run(&m, &[0x12, 1, 0xb1, 0, 64, 0]);
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
    assert_eq!(sense_of(&run(&m, &[0; 6])), (key::NOT_READY, 0x04, 0x1b));
    assert_eq!(
        sense_of(&run(&m, &read10(0, 1))),
        (key::NOT_READY, 0x04, 0x1b)
    );
    assert_eq!(run(&m, &[0x12, 0, 0, 0, 36, 0]).status, status::GOOD);
    let rs = run(&m, &[0x03, 0, 0, 0, 18, 0]);
    assert_eq!(
        (
            rs.bytes()[2],
            rs.bytes()[12],
            rs.bytes()[13],
            rs.bytes()[15] & 0x80
        ),
        (key::NOT_READY, 0x04, 0x1b, 0x80)
    );
    let p = overwrite_params(1, &[1; 4]);
    assert_eq!(
        sense_of(&sanitize(&m, 0x01, 8, &p)),
        (key::NOT_READY, 0x04, 0x1b)
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
        (key::MEDIUM_ERROR, 0x31, 0x03)
    );
    b.set_faults(Faults::default());
    assert_eq!(
        sense_of(&run(&m, &read10(0, 1))),
        (key::MEDIUM_ERROR, 0x31, 0x03)
    );
    assert_eq!(run(&m, &[0x12, 0, 0, 0, 36, 0]).status, status::GOOD);
    assert_eq!(sanitize(&m, 0x1f, 0, &[]).status, status::GOOD);
    assert_eq!(run(&m, &read10(0, 1)).status, status::GOOD);
}

#[test]
fn physical_block_exponent() {
    let mut c = cfg(512);
    c.physical_block_size = 4096;
    let m = lu_with(Arc::new(RamBackend::new(64 * 512)), c);
    let r = run(&m, &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]);
    assert_eq!(
        r.bytes()[13] & 0x0f,
        3,
        "8 logical blocks per physical block"
    );
}

#[test]
fn large_copies_and_blocking_backends_run_off_the_network_thread() {
    let ram = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(1 << 20))).unwrap();
    let read = read10(0, 8);
    assert!(!ram.may_block(&read, 4096));
    assert!(!ram.may_block(&read, lu::OFFLOAD_TRANSFER - 512));
    assert!(ram.may_block(&read, lu::OFFLOAD_TRANSFER));
    // A null LUN copies nothing, whatever the size.
    let null = LogicalUnit::new(
        cfg(512),
        Arc::new(ironlun_backend::NullBackend::new(1 << 20)),
    )
    .unwrap();
    assert!(!null.may_block(&read, 16 << 20));
    // Work not bounded by the transfer (UNMAP) always goes off.
    assert!(null.may_block(&[0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0], 24));
}

/// A write that arrived in several PDUs reaches the medium in its pieces
/// (a vectored write, no join), exactly, including a partial last block
/// that spans pieces when the initiator sent less than the CDB asks for.
#[test]
fn writes_in_several_pieces_land_exactly() {
    let data: Vec<u8> = (0..2048u32).map(|i| (i * 7 + i / 512) as u8).collect();
    let split = |sizes: &[usize]| {
        let mut at = 0;
        DataOutBuffer::from_segments(sizes.iter().map(|&n| {
            let b = Bytes::copy_from_slice(&data[at..at + n]);
            at += n;
            b
        }))
    };
    let dir = tempfile::tempdir().unwrap();
    for backend in ["ram", "file"] {
        let b: Arc<dyn Backend> = match backend {
            "ram" => Arc::new(RamBackend::new(64 * 512)),
            _ => Arc::new(
                ironlun_backend::FileBackend::open_file(
                    &dir.path().join("lun"),
                    &ironlun_backend::FileOptions {
                        size: Some(64 * 512),
                        ..Default::default()
                    },
                )
                .unwrap(),
            ),
        };
        let m = lu_with(b, cfg(512));
        let pieces = split(&[100, 700, 1, 1000, 247]);
        assert_eq!(pieces.segments().len(), 5);
        let r = m.execute(Some(0), N, &write10(8, 4, 0), &pieces);
        assert_eq!(r.status, status::GOOD, "{backend}");
        assert_eq!(&run(&m, &read10(8, 4)).bytes()[..], &data[..], "{backend}");

        // 1500 of 2048 bytes sent: two whole blocks and 476 bytes merged
        // into the third; the fourth keeps what it held.
        run_out(&m, &write10(20, 4, 0), &[0xee; 2048]);
        let short = split(&[300, 900, 300]);
        let r = m.execute(Some(0), N, &write10(20, 4, 0), &short);
        assert_eq!(r.status, status::GOOD, "{backend}");
        let back = run(&m, &read10(20, 4)).bytes();
        assert_eq!(&back[..1500], &data[..1500], "{backend}");
        assert!(back[1500..].iter().all(|&b| b == 0xee), "{backend}");
    }
}
