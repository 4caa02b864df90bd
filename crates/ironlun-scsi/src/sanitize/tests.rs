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

// --- Pace and progress: arithmetic, no clock ---------------------------

#[test]
fn steps_are_whole_blocks_and_about_an_eighth_of_a_second_at_a_rate() {
    use super::pace::{step_bytes, CHUNK};
    assert_eq!(step_bytes(None, 512), CHUNK);
    // 64 MiB/s: an eighth of a second is 8 MiB, held to one chunk.
    assert_eq!(step_bytes(Some(64 << 20), 512), CHUNK);
    assert_eq!(step_bytes(Some(1 << 20), 512), 128 << 10);
    assert_eq!(step_bytes(Some(1 << 20), 4096), 128 << 10);
    // 1000 B/s: 125 bytes is less than a block: one block.
    assert_eq!(step_bytes(Some(1000), 512), 512);
    assert_eq!(step_bytes(Some(100_000), 4096), 12 * 1024 / 4096 * 4096);
    assert_eq!(step_bytes(Some(100_000), 512), 12_288);
}

#[test]
fn work_is_due_at_the_configured_rate() {
    use super::pace::due;
    use std::time::Duration;
    assert_eq!(due(0, 1 << 20), Duration::ZERO);
    assert_eq!(due(1 << 20, 1 << 20), Duration::from_secs(1));
    assert_eq!(due(16 << 20, 1 << 20), Duration::from_secs(16));
    assert_eq!(due(512, 1024), Duration::from_millis(500));
    // No overflow at the extremes.
    assert!(due(u64::MAX, 1) >= Duration::from_secs(u64::MAX / 1_000_000_000));
    assert_eq!(due(1, 0), Duration::from_secs(1));
}

#[test]
fn progress_is_a_fraction_of_65536() {
    use super::pace::{checkpoint_due, progress, CHECKPOINT_EVERY};
    use std::time::Duration;
    assert_eq!(progress(0, 100), 0);
    assert_eq!(progress(50, 100), 32767);
    assert_eq!(progress(99, 100), 64879);
    assert_eq!(progress(100, 100), 65535);
    assert_eq!(progress(7, 0), 65535);
    // Large media: no overflow.
    assert_eq!(progress(1 << 62, 1 << 63), 32767);
    assert!(!checkpoint_due(Duration::ZERO));
    assert!(checkpoint_due(CHECKPOINT_EVERY));
}

#[test]
fn a_job_knows_its_pass_offset_and_inverted_passes() {
    use super::job::{Job, Method};
    let ow = |passes, invert, done| Job {
        method: Method::Overwrite {
            pattern: vec![1],
            passes,
            invert,
        },
        total: 1000,
        done,
    };
    assert_eq!(ow(3, false, 0).work(), 3000);
    assert_eq!(ow(3, false, 2500).position(), (2, 500));
    assert_eq!(ow(3, false, 1000).position(), (1, 0));
    // INVERT over three passes: plain, inverted, plain (the last plain).
    let j = ow(3, true, 0);
    let flips: Vec<bool> = (0..3).map(|p| j.inverted_pass(p)).collect();
    assert_eq!(flips, [false, true, false]);
    let j = ow(2, true, 0);
    assert_eq!([j.inverted_pass(0), j.inverted_pass(1)], [true, false]);
    assert!(!ow(2, false, 0).inverted_pass(0));
    let erase = Job {
        method: Method::BlockErase,
        total: 1000,
        done: 0,
    };
    assert_eq!(erase.work(), 1000);
}

// --- The saved record and what a restarted LU does with it -------------

fn geo() -> super::record::Geometry {
    super::record::Geometry {
        naa: 0xabcdef,
        block_size: 512,
        blocks: 64,
    }
}

fn overwrite_job(done: u64) -> super::job::Job {
    super::job::Job {
        method: super::job::Method::Overwrite {
            pattern: vec![0xa5, 0x00, 0xff],
            passes: 2,
            invert: true,
        },
        total: 64 * 512,
        done,
    }
}

#[test]
fn records_round_trip() {
    use super::job::{Job, Method};
    use super::record::Record;
    let running = Record::Running {
        lu: geo(),
        job: overwrite_job(4096),
    };
    let text = running.encode();
    assert!(
        text.starts_with("ironlun-sanitize 2\n") && text.ends_with("\nend\n"),
        "{text}"
    );
    assert!(text.contains("pattern a500ff\n"), "{text}");
    assert_eq!(Record::decode(&text), Ok(running));
    let erase = Record::Running {
        lu: geo(),
        job: Job {
            method: Method::BlockErase,
            total: 64 * 512,
            done: 0,
        },
    };
    assert_eq!(Record::decode(&erase.encode()), Ok(erase));
    let failed = Record::Failed { lu: geo() };
    assert_eq!(Record::decode(&failed.encode()), Ok(failed));
    // Version 1 (no end line) is read too: its fields are numbers and hex.
    let v1 = text
        .replace("ironlun-sanitize 2", "ironlun-sanitize 1")
        .replace("end\n", "");
    assert_eq!(Record::decode(&v1), Record::decode(&text));
}

#[test]
fn damaged_records_do_not_decode() {
    use super::record::{Record, MAX_RECORD_BYTES};
    let good = Record::Running {
        lu: geo(),
        job: overwrite_job(4096),
    }
    .encode();
    for bad in [
        String::new(),
        "ironlun-pr 1\n".into(),
        good.replace("pattern a500ff", "pattern a500f"),
        good.replace("pattern a500ff", "pattern zz"),
        good.replace("done 4096", "done -1"),
        good.replace("done 4096\n", ""),
        good.replace("state running", "state odd"),
        good.replace("method overwrite", "method crypto"),
        good.replace("lu 0000000000abcdef", "lu x"),
        good.clone() + "extra line\n",
        good.clone() + "end\n",
        good.replace("end\n", ""),
        good.replace("end\n", "end"),
        good.replace("done 4096", "done 4096 4096"),
        good.replace("done 4096", "done 04096"),
        good.replace("done 4096\n", "done 4096\ndone 4096\n"),
        good.replace("state running\n", "state running\nstate running\n"),
        good.replace("state running", "state failed"),
        good.replace("\n", "\r\n"),
        good.replace("\n", "\n\n"),
        good.replace("method overwrite 2 1", "method overwrite 0 1"),
        good.replace("method overwrite 2 1", "method overwrite 32 1"),
        good.replace("method overwrite 2 1", "method overwrite 2 2"),
        good.replace("method overwrite 2 1", "method overwrite 2"),
        good.replace("method overwrite 2 1", "method block-erase"),
        good.replace("pattern a500ff", "pattern A500FF"),
        good.replace("pattern a500ff", "pattern "),
        good.replace("pattern a500ff", &format!("pattern {}", "00".repeat(4097))),
        good.replace(" 512 64", " 520 64"),
        good.replace(" 512 64", " 512 0"),
        good.replace("lu 0000000000abcdef", "lu abcdef"),
        good.replace("lu ", "lu  "),
        format!("{good}{}", "#".repeat(MAX_RECORD_BYTES)),
    ] {
        assert!(Record::decode(&bad).is_err(), "{bad}");
    }
}

#[test]
fn a_restarted_lu_resumes_only_what_it_can() {
    use super::record::{resume_plan, Offered, Record};
    let both = Offered {
        overwrite: true,
        block_erase: true,
    };
    let rec = |done| Record::Running {
        lu: geo(),
        job: overwrite_job(done),
    };
    assert_eq!(resume_plan(rec(4096), geo(), both), Ok(overwrite_job(4096)));
    assert_eq!(resume_plan(rec(0), geo(), both), Ok(overwrite_job(0)));
    let fails = |saved, here, offered| resume_plan(saved, here, offered).unwrap_err();
    assert!(fails(Record::Failed { lu: geo() }, geo(), both).contains("failed"));
    // Another medium: grown, other block size, another LU.
    for here in [
        super::record::Geometry {
            blocks: 128,
            ..geo()
        },
        super::record::Geometry {
            block_size: 4096,
            blocks: 8,
            ..geo()
        },
        super::record::Geometry { naa: 1, ..geo() },
    ] {
        assert!(fails(rec(4096), here, both).contains("another medium"));
    }
    let none = Offered {
        overwrite: false,
        block_erase: false,
    };
    assert!(fails(rec(4096), geo(), none).contains("not offered"));
    let erase = Record::Running {
        lu: geo(),
        job: super::job::Job {
            method: super::job::Method::BlockErase,
            total: 64 * 512,
            done: 0,
        },
    };
    let no_erase = Offered {
        overwrite: true,
        block_erase: false,
    };
    assert!(fails(erase, geo(), no_erase).contains("not offered"));
    // Beyond the work (two passes), or not on a block boundary.
    assert!(fails(rec(2 * 64 * 512 + 512), geo(), both).contains("does not fit"));
    assert!(fails(rec(100), geo(), both).contains("does not fit"));
}

mod operation;

#[test]
fn a_unit_attention_comes_before_sanitize_in_progress() {
    use crate::test_util::{id, N};
    let m = sanitize_map(Arc::new(RamBackend::new(64 * 512)), false);
    let lu = m.get(0).unwrap().clone();
    m.attach_nexus(N, &id("a"), false);
    lu.sanitize
        .running
        .store(true, std::sync::atomic::Ordering::Release);
    // SAM-5 §6.3.1's POWER ON, RESET first (an initiator's login clears
    // it), then NOT READY, SANITIZE IN PROGRESS.
    assert_eq!(
        sense_of(&run(&m, &[0; 6])),
        (SenseKey::UNIT_ATTENTION, 0x29, 0x00)
    );
    assert_eq!(
        sense_of(&run(&m, &[0; 6])),
        (SenseKey::NOT_READY, 0x04, 0x1b)
    );
}
