//! Block commands: reads, writes and their checks, VERIFY, COMPARE AND
//! WRITE, ORWRITE, WRITE ATOMIC, WRITE SAME, PRE-FETCH, READ CAPACITY and
//! READ DEFECT DATA.

use std::sync::Arc;

use bytes::Bytes;
use ironlun_backend::testing::{Faults, FaultyBackend};
use ironlun_backend::{Backend, RamBackend};

use crate::test_util::{cdb16, cfg, lu_with, ram_map, read10, run, run_out, sense_of, write10, N};
use crate::{DataOutBuffer, Failure, LuConfig};
use ironlun_scsi_codes::{opcode, SenseKey, Status};

#[test]
fn read_capacity_10_and_16() {
    let m = ram_map(2048, 4096);
    let r = run(&m, &[opcode::READ_CAPACITY_10, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
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
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(r.transfer_length, 1024);
    assert_eq!(&run(&m, &read10(10, 2)).bytes()[..], &data[..]);
    // READ(6), (12) and (16) see the same data.
    assert_eq!(
        &run(&m, &[opcode::READ_6, 0, 0, 10, 2, 0]).bytes()[..],
        &data[..]
    );
    assert_eq!(
        &run(&m, &[opcode::READ_12, 0, 0, 0, 0, 10, 0, 0, 0, 2, 0, 0]).bytes()[..],
        &data[..]
    );
    let r16 = [0x88, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 2, 0, 0];
    assert_eq!(&run(&m, &r16).bytes()[..], &data[..]);
    // WRITE(16) with FUA, then WRITE AND VERIFY(10) with BYTCHK=1.
    let w16 = [0x8a, 0x08, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0];
    assert_eq!(run_out(&m, &w16, &data[..512]).status, Status::GOOD);
    let wv = [0x2e, 0x02, 0, 0, 0, 21, 0, 0, 1, 0];
    assert_eq!(run_out(&m, &wv, &data[..512]).status, Status::GOOD);
    assert_eq!(
        &run(&m, &read10(20, 2)).bytes()[..],
        &[&data[..512], &data[..512]].concat()[..]
    );
    // READ(6) transfer length 0 means 256 blocks.
    assert_eq!(
        run(&m, &[opcode::READ_6, 0, 0, 0, 0, 0]).data.len(),
        256 * 512
    );
}

#[test]
fn lba_out_of_range_and_zero_length() {
    let m = ram_map(100, 512);
    let oob = (SenseKey::ILLEGAL_REQUEST, 0x21, 0x00);
    assert_eq!(sense_of(&run(&m, &read10(99, 2))), oob);
    assert_eq!(sense_of(&run(&m, &read10(100, 1))), oob);
    assert_eq!(sense_of(&run(&m, &read10(u32::MAX, 1))), oob);
    // Zero blocks: fine inside the medium, out of range past it.
    assert_eq!(run(&m, &read10(0, 0)).status, Status::GOOD);
    assert_eq!(run(&m, &read10(99, 0)).status, Status::GOOD);
    assert_eq!(sense_of(&run(&m, &read10(101, 0))), oob);
    let r16 = [
        0x88, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 0,
    ];
    assert_eq!(sense_of(&run(&m, &r16)), oob);
    // Beyond MAXIMUM TRANSFER LENGTH (1 MiB = 2048 blocks here).
    let big = ram_map(10_000, 512);
    assert_eq!(
        sense_of(&run(&big, &read10(0, 2049))),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
}

/// A range whose end wraps u64 (LBA near 2^64 plus its length), or
/// reaches past the medium from its last block, is LOGICAL BLOCK ADDRESS
/// OUT OF RANGE (SBC-4 §4.5) for every command that takes an LBA and a
/// length from a 16-byte CDB: checked before any byte offset is computed
/// or any Data-Out is looked at.
#[test]
fn ranges_that_wrap_u64_are_out_of_range() {
    let m = ram_map(100, 512);
    let oob = (SenseKey::ILLEGAL_REQUEST, 0x21, 0x00);
    let ops = [
        opcode::READ_16,
        opcode::WRITE_16,
        opcode::WRITE_AND_VERIFY_16,
        opcode::VERIFY_16,
        opcode::PRE_FETCH_16,
        opcode::SYNCHRONIZE_CACHE_16,
        opcode::WRITE_SAME_16,
        opcode::ORWRITE_16,
        opcode::COMPARE_AND_WRITE,
        opcode::WRITE_ATOMIC_16,
    ];
    for op in ops {
        for (lba, blocks) in [(u64::MAX - 1, 4), (u64::MAX, 1), (99, 2), (1 << 63, 200)] {
            let r = run(&m, &cdb16(op, 0, lba, blocks));
            assert_eq!(
                sense_of(&r),
                oob,
                "opcode {op:#04x} LBA {lba:#x} + {blocks}"
            );
        }
    }
}

#[test]
fn protect_fields_and_reserved_bits_are_invalid_field_in_cdb() {
    let m = ram_map(100, 512);
    for rdprotect in 1..8u8 {
        let mut c = read10(0, 1);
        c[1] = rdprotect << 5;
        assert_eq!(sense_of(&run(&m, &c)), (SenseKey::ILLEGAL_REQUEST, 0x24, 0));
    }
    // DPO/FUA are accepted (DPOFUA is set in MODE SENSE).
    let mut c = read10(0, 1);
    c[1] = 0x18;
    assert_eq!(run(&m, &c).status, Status::GOOD);
}

#[test]
fn write_with_too_little_data_writes_what_arrived() {
    let m = ram_map(100, 512);
    run_out(&m, &write10(0, 2, 0), &[b'a'; 1024]);
    // Two blocks asked for, one block and 200 bytes sent: those are
    // written, the rest of the second block keeps its old data.
    let r = run_out(&m, &write10(0, 2, 0), &[b'b'; 712]);
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(
        r.transfer_length, 1024,
        "overflow residual is computed from this"
    );
    let back = run(&m, &read10(0, 2)).bytes();
    assert!(back[..712].iter().all(|&c| c == b'b'));
    assert!(back[712..].iter().all(|&c| c == b'a'));
    // Nothing sent: nothing written.
    let r = run_out(&m, &write10(0, 1, 0), &[]);
    assert_eq!((r.status, r.transfer_length), (Status::GOOD, 512));
    assert_eq!(run(&m, &read10(0, 1)).bytes()[0], b'b');
    // More data than the CDB asks for: only the CDB's length is written.
    let r = run_out(&m, &write10(0, 1, 0), &[b'c'; 1024]);
    assert_eq!(r.status, Status::GOOD);
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
        (SenseKey::DATA_PROTECT, 0x27, 0)
    );
    assert_eq!(run(&m, &read10(0, 1)).status, Status::GOOD);
    // WRITE SAME with UNMAP on this fully provisioned LU: refused as a
    // write first, not as an unsupported UNMAP bit.
    for ws in [cdb16(opcode::WRITE_SAME_16, 0x08, 0, 1).to_vec(), {
        let mut c = write10(0, 1, 0x08).to_vec();
        c[0] = opcode::WRITE_SAME_10;
        c
    }] {
        assert_eq!(
            sense_of(&run_out(&m, &ws, &[0; 512])),
            (SenseKey::DATA_PROTECT, 0x27, 0)
        );
    }
    // MODE SENSE reports WP.
    let r = run(&m, &[opcode::MODE_SENSE_6, 0, 0x3f, 0, 255, 0]);
    assert_eq!(r.bytes()[2] & 0x80, 0x80);
}

#[test]
fn medium_errors_from_the_backend() {
    let b = Arc::new(FaultyBackend::new(RamBackend::new(512 * 100)));
    b.set_faults(Faults {
        read: Some(512 * 10..512 * 11),
        write: Some(0..512),
        flush: true,
        no_space: false,
        raise: None,
    });
    let m = lu_with(b, cfg(512));
    let r = run(&m, &read10(10, 1));
    assert_eq!(sense_of(&r), (SenseKey::MEDIUM_ERROR, 0x11, 0x00));
    assert_eq!(&r.sense[3..7], &[0, 0, 0, 10], "INFORMATION holds the LBA");
    assert_eq!(run(&m, &read10(11, 1)).status, Status::GOOD);
    assert_eq!(
        sense_of(&run_out(&m, &write10(0, 1, 0), &[0; 512])),
        (SenseKey::MEDIUM_ERROR, 0x0c, 0x00)
    );
    assert_eq!(
        sense_of(&run(
            &m,
            &[opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        )),
        (SenseKey::MEDIUM_ERROR, 0x0c, 0x00)
    );
    // Counted as medium errors, apart from what a healthy initiator
    // meets (an opcode the LU does not know is ILLEGAL REQUEST).
    run(&m, &[0xff, 0, 0, 0, 0, 0]);
    let io = m.get(0).unwrap().io_stats();
    let medium = Failure::CheckCondition(Some(SenseKey::MEDIUM_ERROR));
    let illegal = Failure::CheckCondition(Some(SenseKey::ILLEGAL_REQUEST));
    assert_eq!((io.failed(medium), io.failed(illegal)), (3, 1), "{io:?}");
    assert_eq!(io.failed_commands, 4);
}

#[test]
fn block_size_4096() {
    let m = ram_map(16, 4096);
    let data = vec![0x5a; 4096];
    assert_eq!(run_out(&m, &write10(15, 1, 0), &data).status, Status::GOOD);
    assert_eq!(&run(&m, &read10(15, 1)).bytes()[..], &data[..]);
    assert_eq!(
        sense_of(&run(&m, &read10(16, 1))),
        (SenseKey::ILLEGAL_REQUEST, 0x21, 0)
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
    assert_eq!(run_out(&m, &verify10(1, 4, 2), &data).status, Status::GOOD);
    let mut wrong = data.clone();
    wrong[700] ^= 1;
    let r = run_out(&m, &verify10(1, 4, 2), &wrong);
    assert_eq!(sense_of(&r), (SenseKey::MISCOMPARE, 0x1d, 0));
    assert_eq!(
        &r.sense[3..7],
        &700u32.to_be_bytes(),
        "INFORMATION: offset of the first difference"
    );
    // BYTCHK 0: no data, just the medium.
    assert_eq!(run(&m, &verify10(0, 0, 100)).status, Status::GOOD);
    assert_eq!(
        sense_of(&run(&m, &verify10(0, 99, 2))),
        (SenseKey::ILLEGAL_REQUEST, 0x21, 0)
    );
    // BYTCHK 11b: one block compared with every block.
    run_out(&m, &write10(10, 3, 0), &[0x5a; 1536]);
    assert_eq!(
        run_out(&m, &verify10(3, 10, 3), &[0x5a; 512]).status,
        Status::GOOD
    );
    let r = run_out(&m, &verify10(3, 9, 2), &[0x5a; 512]);
    assert_eq!(sense_of(&r).0, SenseKey::MISCOMPARE);
    assert_eq!(
        sense_of(&run_out(&m, &verify10(2, 10, 1), &[0; 512])),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
}

/// VERIFY with BYTCHK 11b transfers one block however long the range
/// (SBC-4 §5.32): the medium is read in pieces of at most MAXIMUM
/// TRANSFER LENGTH, not the whole range into one buffer (a VERIFY(16) of
/// 2^32 - 1 blocks asked for that), and a miscompare in a later piece
/// still reports its offset from the start of the range.
#[test]
fn verify_bytchk_11_reads_the_range_in_bounded_pieces() {
    use ironlun_backend::testing::record::{Call, Recorder};
    let rec = Recorder::new(RamBackend::new(64 * 512));
    let log = rec.log();
    let c = LuConfig {
        max_transfer_bytes: 8 * 512,
        ..cfg(512)
    };
    let m = lu_with(Arc::new(rec), c);
    for lba in 0..8 {
        run_out(&m, &write10(lba * 8, 8, 0), &[0x5a; 8 * 512]);
    }
    run_out(&m, &write10(40, 1, 0), &[0x5b; 512]);
    log.take();
    let v16 = cdb16(0x8f, 0b11 << 1, 0, 64);
    let r = run_out(&m, &v16, &[0x5a; 512]);
    assert_eq!(sense_of(&r).0, SenseKey::MISCOMPARE);
    assert_eq!(&r.sense[3..7], &(40u32 * 512).to_be_bytes());
    let reads: Vec<usize> = log
        .take()
        .iter()
        .filter_map(|c| match c {
            Call::Read { len, .. } => Some(*len),
            _ => None,
        })
        .collect();
    assert_eq!(reads, vec![8 * 512; 6], "pieces up to the miscompare");
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
    assert_eq!(run_out(&m, &caw(0, 2), &data).status, Status::GOOD);
    assert!(run(&m, &read10(0, 2)).bytes().iter().all(|&c| c == b'B'));
    // Miscompare at byte 600: nothing written.
    let mut data = vec![b'B'; 1024];
    data[600] = b'x';
    data.extend_from_slice(&[b'C'; 1024]);
    let r = run_out(&m, &caw(0, 2), &data);
    assert_eq!(sense_of(&r), (SenseKey::MISCOMPARE, 0x1d, 0));
    assert_eq!(&r.sense[3..7], &600u32.to_be_bytes());
    assert!(run(&m, &read10(0, 2)).bytes().iter().all(|&c| c == b'B'));
    // Wrong Data-Out sizes are refused.
    assert_eq!(
        sense_of(&run_out(&m, &caw(0, 1), &[b'B'; 512])).0,
        SenseKey::ILLEGAL_REQUEST
    );
    assert_eq!(
        sense_of(&run_out(&m, &caw(0, 1), &[b'B'; 2048])).0,
        SenseKey::ILLEGAL_REQUEST
    );
    assert_eq!(run(&m, &caw(0, 0)).status, Status::GOOD);
    assert_eq!(
        sense_of(&run_out(&m, &caw(0, 0), &[0; 1024])),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0),
        "zero blocks with data"
    );
    assert_eq!(
        sense_of(&run(&m, &caw(0, 255))).0,
        SenseKey::ILLEGAL_REQUEST,
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
        SenseKey::ILLEGAL_REQUEST
    );
}

#[test]
fn orwrite_and_write_atomic() {
    let m = ram_map(100, 512);
    run_out(&m, &write10(0, 1, 0), &[0x0f; 512]);
    assert_eq!(
        run_out(&m, &cdb16(0x8b, 0, 0, 1), &[0xa0; 512]).status,
        Status::GOOD
    );
    assert!(run(&m, &read10(0, 1)).bytes().iter().all(|&c| c == 0xaf));
    let mut wa = [0u8; 16];
    wa[0] = 0x9c;
    wa[9] = 3;
    wa[13] = 2;
    assert_eq!(run_out(&m, &wa, &[7; 1024]).status, Status::GOOD);
    assert!(run(&m, &read10(3, 2)).bytes().iter().all(|&c| c == 7));
    wa[9] = 99;
    assert_eq!(
        sense_of(&run_out(&m, &wa, &[7; 1024])),
        (SenseKey::ILLEGAL_REQUEST, 0x21, 0)
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
    assert_eq!(run_out(&m, &ws10(0, 10, 5), &[9; 512]).status, Status::GOOD);
    let back = run(&m, &read10(9, 7)).bytes();
    assert!(back[..512].iter().all(|&c| c == 0));
    assert!(back[512..512 * 6].iter().all(|&c| c == 9));
    assert!(back[512 * 6..].iter().all(|&c| c == 0));
    assert_eq!(run_out(&m, &ws10(0, 90, 0), &[3; 512]).status, Status::GOOD);
    assert!(run(&m, &read10(90, 10)).bytes().iter().all(|&c| c == 3));
    // One block of Data-Out exactly.
    assert_eq!(
        sense_of(&run_out(&m, &ws10(0, 0, 1), &[3; 256])).0,
        SenseKey::ILLEGAL_REQUEST
    );
    assert_eq!(
        sense_of(&run_out(&m, &ws10(0, 0, 1), &[3; 1024])).0,
        SenseKey::ILLEGAL_REQUEST
    );
    // UNMAP needs a thin LU; ANCHOR is not supported.
    assert_eq!(
        sense_of(&run_out(&m, &ws10(0x08, 0, 1), &[0; 512])),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    assert_eq!(
        sense_of(&run_out(&m, &ws10(0x10, 0, 1), &[0; 512])),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    assert_eq!(
        sense_of(&run_out(&m, &ws10(0, 95, 6), &[0; 512])),
        (SenseKey::ILLEGAL_REQUEST, 0x21, 0)
    );
}

#[test]
fn prefetch_and_read_defect_data() {
    let m = ram_map(100, 512);
    let mut pf = read10(0, 100);
    pf[0] = 0x34;
    pf[6] = 3;
    assert_eq!(run(&m, &pf).status, Status::GOOD);
    assert_eq!(
        sense_of(&run(&m, &cdb16(0x90, 0, 99, 2))),
        (SenseKey::ILLEGAL_REQUEST, 0x21, 0)
    );
    let r = run(
        &m,
        &[opcode::READ_DEFECT_DATA_10, 0, 0x18, 0, 0, 0, 0, 0, 32, 0],
    );
    assert_eq!(&r.bytes()[..], &[0, 0x18, 0, 0]);
    let r = run(&m, &[0xb7, 0x05, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]);
    assert_eq!(&r.bytes()[..], &[0, 0x05, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn physical_block_exponent() {
    let mut c = cfg(512);
    c.physical_block_size = Some(4096);
    let m = lu_with(Arc::new(RamBackend::new(64 * 512)), c);
    let r = run(&m, &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]);
    assert_eq!(
        r.bytes()[13] & 0x0f,
        3,
        "8 logical blocks per physical block"
    );
}

/// READ CAPACITY(16)'s exponent (byte 13) and the Block Limits page's
/// OPTIMAL TRANSFER LENGTH GRANULARITY (bytes 6-7) of an LU over `backend`.
fn reported_geometry(backend: Arc<dyn Backend>, c: LuConfig) -> (u8, u16) {
    let m = lu_with(backend, c);
    let rc = run(&m, &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]);
    let bl = run(&m, &[opcode::INQUIRY, 1, 0xb0, 0, 255, 0]);
    (
        rc.bytes()[13] & 0x0f,
        u16::from_be_bytes([bl.bytes()[6], bl.bytes()[7]]),
    )
}

/// The store's physical block reaches the initiator unless `pbs=` says
/// otherwise; memory has none, so the logical block is reported.
#[test]
fn physical_block_follows_the_store() {
    let store = |bytes| {
        let b = FaultyBackend::new(RamBackend::new(64 * 4096)).with_physical_block(bytes);
        Arc::new(b) as Arc<dyn Backend>
    };
    assert_eq!(reported_geometry(store(4096), cfg(512)), (3, 8), "512e");
    assert_eq!(reported_geometry(store(4096), cfg(4096)), (0, 1), "4Kn");
    assert_eq!(reported_geometry(store(16384), cfg(512)), (5, 32));
    let mut c = cfg(512);
    c.physical_block_size = Some(512);
    assert_eq!(reported_geometry(store(4096), c), (0, 1), "pbs=512 wins");
    let ram = Arc::new(RamBackend::new(64 * 512));
    assert_eq!(reported_geometry(ram, cfg(512)), (0, 1), "memory");
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
        assert_eq!(r.status, Status::GOOD, "{backend}");
        assert_eq!(&run(&m, &read10(8, 4)).bytes()[..], &data[..], "{backend}");

        // 1500 of 2048 bytes sent: two whole blocks and 476 bytes merged
        // into the third; the fourth keeps what it held.
        run_out(&m, &write10(20, 4, 0), &[0xee; 2048]);
        let short = split(&[300, 900, 300]);
        let r = m.execute(Some(0), N, &write10(20, 4, 0), &short);
        assert_eq!(r.status, Status::GOOD, "{backend}");
        let back = run(&m, &read10(20, 4)).bytes();
        assert_eq!(&back[..1500], &data[..1500], "{backend}");
        assert!(back[1500..].iter().all(|&b| b == 0xee), "{backend}");
    }
}

/// A store that lost acknowledged writes (an RBD client cut off before
/// its flush) fails SYNCHRONIZE CACHE with MEDIUM ERROR / WRITE ERROR and
/// no LBA; a fenced one answers NOT READY, MANUAL INTERVENTION REQUIRED
/// to every command that reaches it and to TEST UNIT READY.
#[test]
fn store_faults_have_their_own_sense() {
    let b = Arc::new(FaultyBackend::new(RamBackend::new(512 * 100)));
    let sync = [opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let tur = [opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0];
    b.set_faults(Faults {
        write: Some(0..512),
        flush: true,
        raise: Some(ironlun_backend::Fault::LostWrites(3)),
        ..Faults::default()
    });
    let m = lu_with(b.clone(), cfg(512));
    let r = run(&m, &sync);
    assert_eq!(sense_of(&r), (SenseKey::MEDIUM_ERROR, 0x0c, 0x00));
    assert_eq!(r.sense[0] & 0x7f, 0x70, "a current error, not deferred");
    assert_eq!(
        r.sense[0] & 0x80,
        0,
        "no INFORMATION: not this command's blocks"
    );
    let r = run_out(&m, &write10(0, 1, 0x08), &[1; 512]);
    assert_eq!(sense_of(&r), (SenseKey::MEDIUM_ERROR, 0x0c, 0x00));
    assert_eq!(run(&m, &tur).status, Status::GOOD);
    b.set_faults(Faults {
        read: Some(0..512 * 100),
        flush: true,
        raise: Some(ironlun_backend::Fault::Fenced),
        ..Faults::default()
    });
    let manual = (SenseKey::NOT_READY, 0x04, 0x03);
    assert_eq!(sense_of(&run(&m, &read10(5, 1))), manual);
    assert_eq!(sense_of(&run(&m, &sync)), manual);
    assert_eq!(sense_of(&run(&m, &tur)), manual);
}

/// fsyncgate (crate::durability): the store reports a failed writeback to
/// one flush only (Linux's fdatasync, once per open file), so once a
/// flush failed, the initiator's retry of it, later flushes and durable
/// writes answer MEDIUM ERROR / WRITE ERROR although the store would now
/// answer success; writes the cache may hold, and reads, go on.
#[test]
fn a_failed_flush_is_not_followed_by_good() {
    let b = Arc::new(FaultyBackend::new(RamBackend::new(512 * 100)));
    let m = lu_with(b.clone(), cfg(512));
    let sync = [opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let we = (SenseKey::MEDIUM_ERROR, 0x0c, 0x00);
    assert_eq!(run(&m, &sync).status, Status::GOOD);
    b.set_faults(Faults {
        flush: true,
        ..Faults::default()
    });
    assert_eq!(sense_of(&run(&m, &sync)), we);
    // The store's next flush would succeed: the error was reported once.
    b.set_faults(Faults::default());
    let r = run(&m, &sync);
    assert_eq!(sense_of(&r), we, "the retry");
    assert_eq!(r.sense[0] & 0x80, 0, "no LBA: not the command's blocks");
    let fua = run_out(&m, &write10(0, 1, 0x08), &[1; 512]);
    assert_eq!(sense_of(&fua), we, "a FUA write");
    assert_eq!(
        run_out(&m, &write10(0, 1, 0), &[1; 512]).status,
        Status::GOOD
    );
    assert_eq!(run(&m, &read10(0, 1)).status, Status::GOOD);
}

/// A durable write that failed may have taken a writeback error with it
/// (RWF_DSYNC consumes it as fdatasync does): the next flush is not GOOD.
#[test]
fn a_failed_durable_write_is_not_followed_by_a_good_flush() {
    let b = Arc::new(FaultyBackend::new(RamBackend::new(512 * 100)));
    let m = lu_with(b.clone(), cfg(512));
    let sync = [opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    b.set_faults(Faults {
        write: Some(0..512),
        ..Faults::default()
    });
    let r = run_out(&m, &write10(0, 1, 0x08), &[1; 512]);
    assert_eq!(sense_of(&r), (SenseKey::MEDIUM_ERROR, 0x0c, 0x00));
    b.set_faults(Faults::default());
    assert_eq!(
        sense_of(&run(&m, &sync)),
        (SenseKey::MEDIUM_ERROR, 0x0c, 0x00)
    );
    // A plain write that failed says nothing of what earlier ones left.
    let c = Arc::new(FaultyBackend::new(RamBackend::new(512 * 100)));
    let m = lu_with(c.clone(), cfg(512));
    c.set_faults(Faults {
        write: Some(0..512),
        ..Faults::default()
    });
    let r = run_out(&m, &write10(0, 1, 0), &[1; 512]);
    assert_eq!(sense_of(&r), (SenseKey::MEDIUM_ERROR, 0x0c, 0x00));
    c.set_faults(Faults::default());
    assert_eq!(run(&m, &sync).status, Status::GOOD);
}

/// A full file system under the LU is not a bad medium: DATA PROTECT /
/// SPACE ALLOCATION FAILED WRITE PROTECT (27h/07h, SBC-4 §4.7.3.6) for the
/// write and the cache flush, and reads still work.
#[test]
fn out_of_space_is_data_protect_not_a_medium_error() {
    let b = Arc::new(FaultyBackend::new(RamBackend::new(512 * 100)));
    b.set_faults(Faults {
        read: None,
        write: Some(512 * 20..512 * 100),
        flush: true,
        no_space: true,
        raise: None,
    });
    let m = lu_with(b, cfg(512));
    let r = run_out(&m, &write10(30, 1, 0), &[7; 512]);
    assert_eq!(sense_of(&r), (SenseKey::DATA_PROTECT, 0x27, 0x07));
    assert_eq!(&r.sense[3..7], &[0, 0, 0, 30], "INFORMATION holds the LBA");
    let sync = [opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        sense_of(&run(&m, &sync)),
        (SenseKey::DATA_PROTECT, 0x27, 0x07)
    );
    assert_eq!(
        run_out(&m, &write10(0, 1, 0), &[7; 512]).status,
        Status::GOOD
    );
    assert_eq!(run(&m, &read10(30, 1)).status, Status::GOOD);
}

/// A store shared with other clients, as an RBD image is: a write-same
/// and a compare-and-write of its own (recorded), the latter atomic only
/// up to `cmp_limit` bytes.
struct SharedStore {
    inner: RamBackend,
    offload_write_same: bool,
    cmp_limit: Option<u64>,
    /// (offset, len, pattern length, durable) of each write-same taken.
    write_sames: std::sync::Mutex<Vec<(u64, u64, usize, bool)>>,
    /// Lengths of the compare-and-writes the store was asked to do.
    compares: std::sync::Mutex<Vec<usize>>,
}

impl SharedStore {
    fn new(bytes: u64, offload_write_same: bool, cmp_limit: Option<u64>) -> Arc<SharedStore> {
        Arc::new(SharedStore {
            inner: RamBackend::new(bytes),
            offload_write_same,
            cmp_limit,
            write_sames: Default::default(),
            compares: Default::default(),
        })
    }
}

impl Backend for SharedStore {
    fn kind(&self) -> &'static str {
        "shared"
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read(&self, offset: u64, len: usize) -> std::io::Result<Bytes> {
        self.inner.read(offset, len)
    }
    fn write(&self, offset: u64, data: &[u8], durable: bool) -> std::io::Result<()> {
        self.inner.write(offset, data, durable)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
    fn may_block(&self) -> bool {
        false
    }
    fn compare_and_write_limit(&self) -> Option<u64> {
        self.cmp_limit
    }
    fn compare_and_write(
        &self,
        offset: u64,
        compare: &[u8],
        data: &[u8],
        _durable: bool,
    ) -> std::io::Result<ironlun_backend::CompareWrite> {
        self.compares.lock().unwrap().push(data.len());
        let now = self.inner.read(offset, compare.len())?;
        if let Some(i) = now.iter().zip(compare).position(|(a, b)| a != b) {
            return Ok(ironlun_backend::CompareWrite::Mismatch(i as u64));
        }
        self.inner.write(offset, data, false)?;
        Ok(ironlun_backend::CompareWrite::Written)
    }
    fn write_same(
        &self,
        offset: u64,
        len: u64,
        pattern: &[u8],
        durable: bool,
    ) -> std::io::Result<bool> {
        if !self.offload_write_same {
            return Ok(false);
        }
        let p = pattern.len();
        self.write_sames
            .lock()
            .unwrap()
            .push((offset, len, p, durable));
        let all: Vec<u8> = pattern.iter().copied().cycle().take(len as usize).collect();
        self.inner.write(offset, &all, durable)?;
        Ok(true)
    }
}

fn ws16(lba: u64, n: u32) -> [u8; 16] {
    cdb16(opcode::WRITE_SAME_16, 0, lba, n)
}

#[test]
fn write_same_without_unmap_goes_to_the_stores_own_call() {
    let store = SharedStore::new(512 * 100, true, None);
    let m = lu_with(store.clone(), cfg(512));
    assert_eq!(run_out(&m, &ws16(10, 5), &[9; 512]).status, Status::GOOD);
    // One call for the whole range, the block as the pattern; the write
    // cache is on by default, so not durable.
    assert_eq!(
        *store.write_sames.lock().unwrap(),
        vec![(10 * 512, 5 * 512, 512, false)]
    );
    let back = run(&m, &read10(9, 7)).bytes();
    assert!(back[..512].iter().all(|&c| c == 0));
    assert!(back[512..512 * 6].iter().all(|&c| c == 9));
    assert!(back[512 * 6..].iter().all(|&c| c == 0));
    // Zero blocks: to the end of the medium, still one call.
    assert_eq!(run_out(&m, &ws16(90, 0), &[3; 512]).status, Status::GOOD);
    assert_eq!(
        store.write_sames.lock().unwrap().last(),
        Some(&(90 * 512, 10 * 512, 512, false))
    );
    // Refused before the store is asked: past the end.
    let calls = store.write_sames.lock().unwrap().len();
    assert_eq!(
        sense_of(&run_out(&m, &ws16(95, 6), &[0; 512])),
        (SenseKey::ILLEGAL_REQUEST, 0x21, 0)
    );
    assert_eq!(store.write_sames.lock().unwrap().len(), calls);
}

#[test]
fn write_same_falls_back_to_writing_the_copies() {
    let store = SharedStore::new(512 * 100, false, None);
    let m = lu_with(store.clone(), cfg(512));
    assert_eq!(run_out(&m, &ws16(3, 4), &[7; 512]).status, Status::GOOD);
    assert!(store.write_sames.lock().unwrap().is_empty());
    let back = run(&m, &read10(3, 4)).bytes();
    assert!(back.iter().all(|&c| c == 7));
}

fn caw(lba: u64, n: u8) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x89;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[13] = n;
    c
}

/// MAXIMUM COMPARE AND WRITE LENGTH (Block Limits VPD byte 5).
fn max_caw(m: &crate::LunMap) -> u8 {
    run(m, &[opcode::INQUIRY, 1, 0xb0, 0, 255, 0]).bytes()[5]
}

#[test]
fn a_shared_store_offers_only_its_atomic_compare_and_write() {
    // 512 bytes atomic in the store: one 512-byte block.
    let store = SharedStore::new(512 * 100, false, Some(512));
    let m = lu_with(store.clone(), cfg(512));
    assert_eq!(max_caw(&m), 1);
    let mut data = vec![0u8; 512];
    data.extend_from_slice(&[b'B'; 512]);
    assert_eq!(run_out(&m, &caw(4, 1), &data).status, Status::GOOD);
    assert!(run(&m, &read10(4, 1)).bytes().iter().all(|&c| c == b'B'));
    assert_eq!(*store.compares.lock().unwrap(), vec![512]);
    // Two blocks: INVALID FIELD IN CDB (SBC-4 §5.3), the store not asked
    // and nothing compared or written here either.
    let mut two = vec![0u8; 1024];
    two.extend_from_slice(&[b'C'; 1024]);
    assert_eq!(
        sense_of(&run_out(&m, &caw(10, 2), &two)),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    assert_eq!(store.compares.lock().unwrap().len(), 1);
    assert!(run(&m, &read10(10, 2)).bytes().iter().all(|&c| c == 0));
    // Zero blocks are still no-ops.
    assert_eq!(run(&m, &caw(0, 0)).status, Status::GOOD);
}

#[test]
fn a_shared_store_without_a_whole_block_refuses_compare_and_write() {
    // 4096-byte blocks over a store atomic for 512 bytes: none at all.
    let store = SharedStore::new(4096 * 16, false, Some(512));
    let m = lu_with(store.clone(), cfg(4096));
    assert_eq!(max_caw(&m), 0);
    let mut data = vec![0u8; 4096];
    data.extend_from_slice(&[1; 4096]);
    assert_eq!(
        sense_of(&run_out(&m, &caw(0, 1), &data)),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0)
    );
    assert!(store.compares.lock().unwrap().is_empty());
}

#[test]
fn an_lus_own_store_keeps_the_full_compare_and_write_length() {
    assert_eq!(max_caw(&ram_map(1000, 512)), 255);
    let store = SharedStore::new(512 * 1000, false, None);
    assert_eq!(max_caw(&lu_with(store, cfg(512))), 255);
    // A limit above 255 blocks is capped at the field's and ironlun's 255.
    let big = SharedStore::new(512 * 1000, false, Some(1 << 20));
    assert_eq!(max_caw(&lu_with(big, cfg(512))), 255);
}

#[test]
fn a_partial_last_block_is_merged_with_the_lu_alone() {
    // A short Data-Out ending inside a block is a read-modify-write of
    // that block: while another command has the LU (here a shared
    // guard, as any ordinary read or write holds), it waits.
    let m = ram_map(100, 512);
    let lu = m.get(0).unwrap().clone();
    let held = lu.shared_access();
    let (tx, rx) = std::sync::mpsc::channel();
    let m2 = m.clone();
    let t = std::thread::spawn(move || {
        let r = run_out(&m2, &write10(0, 2, 0), &[b'b'; 712]);
        tx.send(r.status).unwrap();
    });
    assert!(
        rx.recv_timeout(std::time::Duration::from_millis(100))
            .is_err(),
        "merged a partial block beside another command"
    );
    drop(held);
    let status = rx.recv_timeout(std::time::Duration::from_secs(30)).unwrap();
    assert_eq!(status, Status::GOOD);
    t.join().unwrap();
    // Whole blocks alone share the LU.
    let _held = lu.shared_access();
    assert_eq!(
        run_out(&m, &write10(0, 1, 0), &[b'c'; 512]).status,
        Status::GOOD
    );
}
