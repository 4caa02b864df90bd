//! How a command that did not end GOOD is counted: by its status (SAM-5
//! §5.3.1) and, for CHECK CONDITION, by the sense key of its
//! sense data (SPC-4 §4.5.6, table 27). A fixed set of classes, one
//! counter each: whatever an initiator sends cannot make new ones.
//!
//! The split is what lets a monitor tell a failing medium (MEDIUM ERROR,
//! HARDWARE ERROR) from the ordinary traffic of a healthy initiator: a
//! unit attention after a login, ILLEGAL REQUEST for a VPD page or an
//! opcode the device does not offer.

use ironlun_scsi_codes::{SenseCode, SenseKey, Status};

/// One class of failed command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// CHECK CONDITION with this sense key; `None`: sense data that does
    /// not parse.
    CheckCondition(Option<SenseKey>),
    Busy,
    ReservationConflict,
    TaskSetFull,
    AcaActive,
    TaskAborted,
    /// Any other status but GOOD.
    OtherStatus,
}

/// The sense keys: the low four bits of their byte (SPC-4 §4.5.6).
const SENSE_KEYS: usize = 16;

impl Failure {
    /// How many classes there are (and counters per LU).
    pub const COUNT: usize = SENSE_KEYS + 7;

    /// How a command that ended with `status` and `sense` is counted;
    /// `None` for GOOD. Inlined: it runs for every command, and for a
    /// GOOD one it is a compare.
    #[inline(always)]
    pub fn of(status: Status, sense: &[u8]) -> Option<Failure> {
        if status == Status::GOOD {
            return None;
        }
        Some(Failure::of_failed(status, sense))
    }

    #[cold]
    fn of_failed(status: Status, sense: &[u8]) -> Failure {
        match status {
            Status::CHECK_CONDITION => {
                Failure::CheckCondition(SenseCode::parse(sense).map(|c| c.key))
            }
            Status::BUSY => Failure::Busy,
            Status::RESERVATION_CONFLICT => Failure::ReservationConflict,
            Status::TASK_SET_FULL => Failure::TaskSetFull,
            Status::ACA_ACTIVE => Failure::AcaActive,
            Status::TASK_ABORTED => Failure::TaskAborted,
            _ => Failure::OtherStatus,
        }
    }

    /// Its counter's index, below [`Failure::COUNT`].
    pub(crate) fn index(self) -> usize {
        match self {
            Failure::CheckCondition(Some(k)) => usize::from(k.0 & 0x0f),
            Failure::CheckCondition(None) => SENSE_KEYS,
            Failure::Busy => SENSE_KEYS + 1,
            Failure::ReservationConflict => SENSE_KEYS + 2,
            Failure::TaskSetFull => SENSE_KEYS + 3,
            Failure::AcaActive => SENSE_KEYS + 4,
            Failure::TaskAborted => SENSE_KEYS + 5,
            Failure::OtherStatus => SENSE_KEYS + 6,
        }
    }

    /// Every class, in index order.
    pub fn all() -> impl Iterator<Item = Failure> {
        let keys = (0..SENSE_KEYS as u8).map(|k| Failure::CheckCondition(Some(SenseKey(k))));
        keys.chain([
            Failure::CheckCondition(None),
            Failure::Busy,
            Failure::ReservationConflict,
            Failure::TaskSetFull,
            Failure::AcaActive,
            Failure::TaskAborted,
            Failure::OtherStatus,
        ])
    }

    /// The status; `None` for [`Failure::OtherStatus`].
    pub fn status(self) -> Option<Status> {
        Some(match self {
            Failure::CheckCondition(_) => Status::CHECK_CONDITION,
            Failure::Busy => Status::BUSY,
            Failure::ReservationConflict => Status::RESERVATION_CONFLICT,
            Failure::TaskSetFull => Status::TASK_SET_FULL,
            Failure::AcaActive => Status::ACA_ACTIVE,
            Failure::TaskAborted => Status::TASK_ABORTED,
            Failure::OtherStatus => return None,
        })
    }

    /// The sense key, where the status is CHECK CONDITION and the sense
    /// data parsed.
    pub fn sense_key(self) -> Option<SenseKey> {
        match self {
            Failure::CheckCondition(k) => k,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sense::Sense;
    use ironlun_scsi_codes::Asc;

    #[test]
    fn good_is_no_failure_and_every_other_status_is_one() {
        assert_eq!(Failure::of(Status::GOOD, &[]), None);
        assert_eq!(Failure::of(Status::BUSY, &[]), Some(Failure::Busy));
        assert_eq!(
            Failure::of(Status::RESERVATION_CONFLICT, &[]),
            Some(Failure::ReservationConflict)
        );
        assert_eq!(
            Failure::of(Status::TASK_SET_FULL, &[]),
            Some(Failure::TaskSetFull)
        );
        assert_eq!(
            Failure::of(Status::TASK_ABORTED, &[]),
            Some(Failure::TaskAborted)
        );
        assert_eq!(
            Failure::of(Status::CONDITION_MET, &[]),
            Some(Failure::OtherStatus)
        );
        assert_eq!(Failure::of(Status(0x22), &[]), Some(Failure::OtherStatus));
    }

    #[test]
    fn check_condition_is_split_by_the_sense_key_in_either_format() {
        let medium = Sense::new(SenseKey::MEDIUM_ERROR, Asc::UNRECOVERED_READ_ERROR);
        for descriptor in [false, true] {
            let bytes = medium.encode(descriptor);
            assert_eq!(
                Failure::of(Status::CHECK_CONDITION, &bytes),
                Some(Failure::CheckCondition(Some(SenseKey::MEDIUM_ERROR))),
                "descriptor format {descriptor}"
            );
        }
        let ua = Sense::new(
            SenseKey::UNIT_ATTENTION,
            Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET,
        );
        assert_eq!(
            Failure::of(Status::CHECK_CONDITION, &ua.encode(false)),
            Some(Failure::CheckCondition(Some(SenseKey::UNIT_ATTENTION)))
        );
        // No sense data, or bytes that are not sense data.
        assert_eq!(
            Failure::of(Status::CHECK_CONDITION, &[]),
            Some(Failure::CheckCondition(None))
        );
        assert_eq!(
            Failure::of(Status::CHECK_CONDITION, &[0x12, 0x34]),
            Some(Failure::CheckCondition(None))
        );
    }

    #[test]
    fn indexes_are_dense_distinct_and_in_the_order_of_all() {
        let all: Vec<Failure> = Failure::all().collect();
        assert_eq!(all.len(), Failure::COUNT);
        for (i, f) in all.iter().enumerate() {
            assert_eq!(f.index(), i, "{f:?}");
        }
        assert_eq!(
            Failure::CheckCondition(Some(SenseKey::ILLEGAL_REQUEST)).index(),
            0x5
        );
    }

    #[test]
    fn status_and_sense_key_say_what_the_class_counts() {
        let ua = Failure::CheckCondition(Some(SenseKey::UNIT_ATTENTION));
        assert_eq!(ua.status(), Some(Status::CHECK_CONDITION));
        assert_eq!(ua.sense_key(), Some(SenseKey::UNIT_ATTENTION));
        assert_eq!(Failure::Busy.status(), Some(Status::BUSY));
        assert_eq!(Failure::Busy.sense_key(), None);
        assert_eq!(Failure::OtherStatus.status(), None);
        assert_eq!(Failure::CheckCondition(None).sense_key(), None);
    }
}
