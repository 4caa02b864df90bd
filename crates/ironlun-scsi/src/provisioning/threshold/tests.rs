//! The soft threshold: its arithmetic, when the space is looked at, and
//! crossings and re-arming seen by two I_T nexuses, with the free space
//! set by the test.

use std::sync::Arc;

use ironlun_backend::RamBackend;

use super::*;
use crate::test_util::{cfg, id, run, run_out, sense_of, threshold_lu, write10, ThresholdLu, N};
use crate::{DataOutBuffer, LunMap, NexusId, Response};
use ironlun_scsi_codes::{SenseKey, Status};

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;
const OTHER: NexusId = NexusId(2);
const TUR: [u8; 6] = [0; 6];

#[test]
fn exponent_sets_and_steps() {
    // One set per provisioning granule: a 64 KiB RAM chunk is 128 blocks
    // of 512 bytes (2^7), a 4 KiB file system block 8 (2^3) or one 4096
    // byte block, which is still exponent 1 (zero means "no thresholds").
    assert_eq!(exponent_for(32768, 512, 64 * KIB), 7);
    assert_eq!(exponent_for(32768, 512, 4096), 3);
    assert_eq!(exponent_for(32768, 4096, 4096), 1);
    assert_eq!(exponent_for(32768, 512, 0), 1);
    // Big enough that the capacity counts below 2^32 sets.
    assert_eq!(exponent_for(1 << 40, 512, 4096), 9);
    assert_eq!(exponent_for((1 << 40) - 1, 512, 4096), 8);
    assert_eq!(exponent_for(u64::MAX, 512, 4096), 32);
    // A store that reports a granule near 2^64 bytes: a set is taken up
    // to what a u64 holds (2^63 bytes), never a shift that loses its bits
    // (512 << 55 was 0, and a RESOURCE COUNT divided by it).
    for (bs, granule, e) in [
        (512, u64::MAX, 54),
        (512, 1 << 63, 54),
        (4096, u64::MAX, 51),
    ] {
        assert_eq!(exponent_for(32768, bs, granule), e);
        let set = u64::from(bs) << e;
        assert_eq!(set >> e, u64::from(bs), "no bit shifted out");
    }
    assert_eq!(check_step(MIB), 64 * KIB);
    assert_eq!(check_step(8 * MIB), 512 * KIB);
    assert_eq!(check_step(1 << 40), MIB);
    assert_eq!(check_step(0), 64 * KIB);
    assert_eq!(SoftThreshold::Percent(10).bytes_for(1000), 100);
    assert_eq!(SoftThreshold::Percent(100).bytes_for(u64::MAX), u64::MAX);
    assert_eq!(SoftThreshold::Bytes(5).bytes_for(1), 5);
}

#[test]
fn judged_with_hysteresis() {
    use Judgement::{Reached, Rearmed};
    // Armed: reached strictly below the threshold.
    assert_eq!(judge(false, 99, 100, 10), Some(Reached));
    assert_eq!(judge(false, 100, 100, 10), None);
    // Reached: armed again only at the threshold plus the margin.
    assert_eq!(judge(true, 50, 100, 10), None);
    assert_eq!(judge(true, 109, 100, 10), None);
    assert_eq!(judge(true, 110, 100, 10), Some(Rearmed));
    assert_eq!(
        judge(true, u64::MAX - 1, u64::MAX - 5, 10),
        None,
        "no overflow"
    );
}

/// A 16 MiB LU of 512-byte blocks (64 KiB threshold sets) with a 1 MiB
/// soft threshold, and two nexuses past their power-on unit attentions.
fn two_nexus_lu(free: u64) -> ThresholdLu {
    let t = threshold_lu(16 * MIB, 512, SoftThreshold::Bytes(MIB), free);
    t.map.attach_nexus(N, &id("a"), false);
    t.map.attach_nexus(OTHER, &id("b"), false);
    for n in [N, OTHER] {
        let r = on(&t.map, n, &TUR);
        assert_eq!(sense_of(&r).0, SenseKey::UNIT_ATTENTION);
    }
    t
}

fn on(m: &LunMap, n: NexusId, cdb: &[u8]) -> Response {
    m.execute(Some(0), n, cdb, &DataOutBuffer::new())
}

/// A 64 KiB write (one check step: the space is looked at after it).
fn write_64k(m: &LunMap, lba: u32) -> Response {
    run_out(m, &write10(lba, 128, 0), &[0x5a; 64 << 10])
}

fn events(t: &ThresholdLu) -> Vec<ThresholdEvent> {
    t.events.lock().unwrap().clone()
}

/// Each nexus's next command reports the crossing once; the one after
/// runs.
fn each_nexus_told_once(m: &LunMap) {
    for n in [N, OTHER] {
        let r = on(m, n, &TUR);
        assert_eq!(
            sense_of(&r),
            (SenseKey::UNIT_ATTENTION, 0x38, 0x07),
            "nexus {n:?}"
        );
        assert_eq!(on(m, n, &TUR).status, Status::GOOD, "nexus {n:?}");
    }
}

#[test]
fn a_crossing_tells_every_nexus_once_and_rearms_above_the_margin() {
    let t = two_nexus_lu(4 * MIB);
    assert_eq!(write_64k(&t.map, 0).status, Status::GOOD);
    for n in [N, OTHER] {
        assert_eq!(on(&t.map, n, &TUR).status, Status::GOOD, "above: no UA");
    }
    assert!(events(&t).is_empty());

    // The file system drops below 1 MiB: the next write looks and sees it.
    t.backend.set_free_bytes(Some(900 * KIB));
    assert_eq!(write_64k(&t.map, 128).status, Status::GOOD);
    let reached = ThresholdEvent::Reached {
        free_bytes: 900 * KIB,
        threshold_bytes: MIB,
    };
    assert_eq!(events(&t), vec![reached]);
    each_nexus_told_once(&t.map);
    assert!(t.map.get(0).unwrap().soft_threshold_reached());

    // Further writes below the threshold (but above the hard limit) run
    // and tell no one again; nor does space back at the threshold but
    // inside the margin (1 MiB + one 64 KiB set).
    for (i, free) in [(2u32, 800 * KIB), (3, 700 * KIB), (4, MIB + 60 * KIB)] {
        t.backend.set_free_bytes(Some(free));
        assert_eq!(write_64k(&t.map, i * 128).status, Status::GOOD);
        for n in [N, OTHER] {
            assert_eq!(on(&t.map, n, &TUR).status, Status::GOOD);
        }
    }
    t.backend.set_free_bytes(Some(500 * KIB));
    assert_eq!(write_64k(&t.map, 5 * 128).status, Status::GOOD);
    assert_eq!(events(&t), vec![reached], "one event per crossing");

    // Space freed past the margin re-arms it; the next drop is told again.
    t.backend.set_free_bytes(Some(MIB + 64 * KIB));
    assert_eq!(write_64k(&t.map, 6 * 128).status, Status::GOOD);
    assert!(!t.map.get(0).unwrap().soft_threshold_reached());
    t.backend.set_free_bytes(Some(300 * KIB));
    assert_eq!(write_64k(&t.map, 7 * 128).status, Status::GOOD);
    assert_eq!(
        events(&t),
        vec![
            reached,
            ThresholdEvent::Rearmed {
                free_bytes: MIB + 64 * KIB,
                threshold_bytes: MIB,
            },
            ThresholdEvent::Reached {
                free_bytes: 300 * KIB,
                threshold_bytes: MIB,
            },
        ]
    );
    each_nexus_told_once(&t.map);
}

#[test]
fn the_space_is_looked_at_per_step_of_bytes_or_interval_not_per_write() {
    let t = two_nexus_lu(4 * MIB);
    let lu = t.map.get(0).unwrap();
    let state = lu.soft_threshold().unwrap();
    t.backend.set_free_bytes(Some(100 * KIB));
    // At the instant of the last look, writes short of the 64 KiB step
    // do not look: the crossing is not seen yet.
    for _ in 0..15 {
        state.note_write(lu, 4096, state.epoch);
    }
    assert!(events(&t).is_empty());
    assert_eq!(on(&t.map, N, &TUR).status, Status::GOOD);
    // The 16th 4 KiB write completes the step.
    state.note_write(lu, 4096, state.epoch);
    assert_eq!(events(&t).len(), 1);
    each_nexus_told_once(&t.map);

    // After the interval, one small write is enough to look again.
    t.backend.set_free_bytes(Some(2 * MIB));
    state.note_write(lu, 512, state.epoch);
    assert_eq!(events(&t).len(), 1, "within the interval: not looked");
    state.note_write(lu, 512, state.epoch + CHECK_INTERVAL);
    assert!(matches!(
        events(&t).get(1),
        Some(ThresholdEvent::Rearmed { .. })
    ));
}

#[test]
fn reads_and_non_medium_commands_do_not_look() {
    let t = two_nexus_lu(4 * MIB);
    t.backend.set_free_bytes(Some(0));
    let read = [0x28, 0, 0, 0, 0, 0, 0, 0, 128, 0];
    for _ in 0..4 {
        assert_eq!(run(&t.map, &read).status, Status::GOOD);
        assert_eq!(run(&t.map, &TUR).status, Status::GOOD);
    }
    assert!(events(&t).is_empty());
}

#[test]
fn a_percentage_is_of_the_capacity_in_whole_sets() {
    // 10% of 16 MiB is 1677721.6 bytes: 26 sets of 64 KiB, rounded up.
    let t = threshold_lu(16 * MIB, 512, SoftThreshold::Percent(10), 4 * MIB);
    let lu = t.map.get(0).unwrap();
    let spec = lu.soft_threshold().unwrap().spec();
    assert_eq!(threshold_count(lu, spec), 26);
    assert_eq!(threshold_bytes(lu, spec), 26 * 64 * KIB);
    assert_eq!(in_sets(lu, 26 * 64 * KIB - 1), 25);
}

#[test]
fn only_thin_lus_on_a_file_system_take_a_threshold() {
    let ram = |thin| {
        let c = crate::LuConfig { thin, ..cfg(512) };
        LogicalUnit::new(c, Arc::new(RamBackend::new(MIB))).unwrap()
    };
    let spec = SoftThreshold::Bytes(MIB);
    assert!(ram(false).set_soft_threshold(spec, None).is_err());
    let err = ram(true).set_soft_threshold(spec, None).unwrap_err();
    assert!(err.contains("file system"), "{err}");
    let t = threshold_lu(MIB, 512, spec, MIB);
    let fake = t.backend.clone();
    let c = crate::LuConfig {
        thin: true,
        ..cfg(512)
    };
    let mut lu = LogicalUnit::new(c, fake).unwrap();
    assert!(lu
        .set_soft_threshold(SoftThreshold::Bytes(0), None)
        .is_err());
    assert!(lu
        .set_soft_threshold(SoftThreshold::Percent(0), None)
        .is_err());
    assert!(lu.set_soft_threshold(spec, None).is_ok());
}
