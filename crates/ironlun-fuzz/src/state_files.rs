//! The state directory's files: persistent reservations saved with APTPL
//! (`ironlun-scsi` `reservations/persist.rs`) and sanitize records
//! (`sanitize/record.rs`), as the target reads them at start.
//!
//! Input: one byte that picks what the rest is, by its value modulo 3:
//! 0, a persistent reservation file; 1, a sanitize record; 2, bytes a
//! persistent reservation state is built from (names of any bytes but
//! NUL, the shapes a running LU can hold), to be saved and read back.
//!
//! Checked beyond "does not panic":
//! - a file that reads re-encodes to text that reads to the same state,
//!   no longer than the reader accepts;
//! - a version 2 file that reads is exactly what the writer writes for
//!   what it read (the reader accepts one spelling only), so no other
//!   text can smuggle a record in;
//! - a built state is read back as it was saved (decode(encode(x)) ==
//!   x), whatever its names hold.

use ironlun_scsi::reservations::{
    pr_type, ItNexus, PrState, Registration, Reservation, MAX_ISCSI_NAME_BYTES, MAX_STATE_BYTES,
};
use ironlun_scsi::SanitizeRecord;

/// What one input exercised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateFilesRun {
    /// Which reader: `pr`, `sanitize` or `pr-built`.
    pub kind: &'static str,
    pub decoded: bool,
    pub registrations: usize,
    pub reserved: bool,
}

pub fn state_files(data: &[u8]) -> StateFilesRun {
    let (which, rest) = data.split_first().unwrap_or((&0, &[]));
    match which % 3 {
        0 => pr_file(rest),
        1 => sanitize_file(rest),
        _ => pr_built(rest),
    }
}

fn pr_file(bytes: &[u8]) -> StateFilesRun {
    let mut run = StateFilesRun {
        kind: "pr",
        ..StateFilesRun::default()
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return run;
    };
    let Ok(st) = PrState::decode(text) else {
        return run;
    };
    let again = st.encode();
    assert!(
        again.len() <= MAX_STATE_BYTES,
        "a state that reads is too long to read when saved"
    );
    assert_eq!(
        PrState::decode(&again).as_ref(),
        Ok(&st),
        "saved again it reads differently"
    );
    if text.starts_with("ironlun-pr 2\n") {
        assert_eq!(
            again, text,
            "a version 2 file that reads is not the writer's spelling"
        );
    }
    run.decoded = true;
    run.registrations = st.registrations.len();
    run.reserved = st.reservation.is_some();
    run
}

fn sanitize_file(bytes: &[u8]) -> StateFilesRun {
    let mut run = StateFilesRun {
        kind: "sanitize",
        ..StateFilesRun::default()
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return run;
    };
    let Ok(r) = SanitizeRecord::decode(text) else {
        return run;
    };
    let again = r.encode();
    assert_eq!(
        SanitizeRecord::decode(&again).as_ref(),
        Ok(&r),
        "saved again it reads differently"
    );
    if text.starts_with("ironlun-sanitize 2\n") {
        assert_eq!(
            again, text,
            "a version 2 record that reads is not the writer's spelling"
        );
    }
    run.decoded = true;
    run
}

/// A state built from `bytes`: records of a tag byte (what), a length
/// byte, and a name of that many bytes.
fn pr_built(bytes: &[u8]) -> StateFilesRun {
    let st = build(bytes);
    let text = st.encode();
    assert!(
        text.len() <= MAX_STATE_BYTES,
        "a saved state is longer than the reader takes"
    );
    assert_eq!(
        PrState::decode(&text).as_ref(),
        Ok(&st),
        "a saved state reads back differently:\n{text}"
    );
    assert_eq!(
        text.lines().count(),
        3 + st.registrations.len() + usize::from(st.reservation.is_some()),
        "one line per record"
    );
    StateFilesRun {
        kind: "pr-built",
        decoded: true,
        registrations: st.registrations.len(),
        reserved: st.reservation.is_some(),
    }
}

fn build(mut bytes: &[u8]) -> PrState {
    let mut st = PrState {
        generation: 0,
        registrations: Vec::new(),
        reservation: None,
        aptpl: true,
    };
    while let [tag, len, rest @ ..] = bytes {
        let n = usize::from(*len).min(rest.len());
        let (raw, after) = rest.split_at(n);
        bytes = after;
        st.generation = st.generation.wrapping_mul(31).wrapping_add(u32::from(*tag));
        let nexus = nexus(raw, *tag);
        if st
            .registrations
            .iter()
            .any(|g| g.nexus.initiator_port == nexus.initiator_port)
        {
            continue;
        }
        st.registrations.push(Registration {
            nexus: nexus.clone(),
            key: u64::from(*tag) << 8 | n as u64 | 1,
            all_tg_pt: tag & 0x80 != 0,
        });
        let types = [1, 3, 5, 6, 7, 8];
        let t = types.get(usize::from(tag % 8)).copied();
        if let (Some(t), None) = (t, &st.reservation) {
            debug_assert!(pr_type::valid(t));
            st.reservation = Some(Reservation {
                holder: nexus,
                pr_type: t,
            });
        }
        if st.registrations.len() >= 64 {
            break;
        }
    }
    st
}

/// An initiator port named by any bytes but NUL (what a login name may
/// hold), lower-cased as [`ItNexus::new`] does, at most 223 bytes.
fn nexus(raw: &[u8], tag: u8) -> ItNexus {
    let name: String = String::from_utf8_lossy(raw)
        .chars()
        .filter(|c| *c != '\0')
        .collect();
    let mut name: String = name.chars().take(MAX_ISCSI_NAME_BYTES / 4).collect();
    if name.is_empty() {
        name.push('x');
    }
    ItNexus::new(&name, [tag, 0, 0, 0, 0, 1], u16::from(tag >> 4))
}
