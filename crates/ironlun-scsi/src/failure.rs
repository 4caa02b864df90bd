//! How a store's error becomes sense data: the one place that reads an
//! [`io::Error`] from a backend ([`store_error`]); the commands only say
//! what they were doing ([`Access`]) and at which LBA.
//!
//! | the store says | sense |
//! |---|---|
//! | unreachable (ECONNRESET, ENOTCONN, ESHUTDOWN, ETIMEDOUT, ECONNREFUSED, EHOSTUNREACH) | NOT READY, LOGICAL UNIT IS IN PROCESS OF BECOMING READY (04h/01h): retried; on a flush, MEDIUM ERROR, WRITE ERROR as below |
//! | [`Fault::Fenced`] | NOT READY, LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED (04h/03h): not retried |
//! | [`Fault::LostWrites`] | MEDIUM ERROR, WRITE ERROR (0Ch/00h), without an LBA |
//! | [`Fault::NotOwner`] (EROFS on a grouped image) | NOT READY, ASYMMETRIC ACCESS STATE TRANSITION (04h/0Ah): retried |
//! | ENOSPC, EDQUOT on a write or flush | DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (27h/07h) |
//! | anything else | MEDIUM ERROR, UNRECOVERED READ ERROR (11h/00h) or WRITE ERROR (0Ch/00h) |

use std::io;

use ironlun_backend::Fault;
use ironlun_scsi_codes::{Asc, SenseKey};

use crate::sense::Sense;

/// What the command was doing when the store failed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    /// SYNCHRONIZE CACHE.
    Flush,
    /// TEST UNIT READY: nothing transferred ([`ironlun_backend::Backend::ready`]).
    Ready,
}

/// What a store's error says, whatever the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    Unreachable,
    Fenced,
    LostWrites,
    NotOwner,
    NoSpace,
    Medium,
}

fn cause(e: &io::Error) -> Cause {
    match Fault::of(e) {
        Some(Fault::Fenced) => Cause::Fenced,
        Some(Fault::LostWrites(_)) => Cause::LostWrites,
        Some(Fault::NotOwner) => Cause::NotOwner,
        None if unavailable(e) => Cause::Unreachable,
        None if out_of_space(e) => Cause::NoSpace,
        None => Cause::Medium,
    }
}

/// The sense a command that failed in the store answers with; `lba`, the
/// command's first block, goes into INFORMATION where the error is about
/// the command's own blocks.
pub(crate) fn store_error(access: Access, lba: Option<u64>, e: &io::Error) -> Sense {
    let at = |s: Sense| match lba {
        Some(lba) => s.with_info(lba),
        None => s,
    };
    match (cause(e), access) {
        // A failed flush is never retryable: the store reports the
        // failure of a write to one flush only (Linux's fdatasync once per
        // open file, librbd once per client), so the retry would answer
        // GOOD over writes that never reached the medium.
        (Cause::Unreachable, Access::Flush) => lost_writes(),
        (Cause::Unreachable, _) => not_ready(),
        (Cause::Fenced, _) => fenced(),
        // Another gateway owns the image: the group is between owners
        // (SPC-5 §5.16.2.6), or this gateway's view of the owner is a
        // beat behind. Retried, through this port or another.
        (Cause::NotOwner, _) => Sense::new(
            SenseKey::NOT_READY,
            Asc::LU_NOT_ACCESSIBLE_ASYMMETRIC_ACCESS_STATE_TRANSITION,
        ),
        // The lost writes are not this command's blocks: no INFORMATION.
        (Cause::LostWrites, Access::Write | Access::Flush) => lost_writes(),
        // SBC-4 §4.7.3.6: a thin LU that cannot allocate; the medium is fine.
        (Cause::NoSpace, Access::Write | Access::Flush) => at(Sense::new(
            SenseKey::DATA_PROTECT,
            Asc::SPACE_ALLOCATION_FAILED_WRITE_PROTECT,
        )),
        (Cause::Medium, Access::Write | Access::Flush) => {
            at(Sense::new(SenseKey::MEDIUM_ERROR, Asc::WRITE_ERROR))
        }
        (_, Access::Read) => at(Sense::new(
            SenseKey::MEDIUM_ERROR,
            Asc::UNRECOVERED_READ_ERROR,
        )),
        (_, Access::Ready) => not_ready(),
    }
}

/// A reservation command whose shared store failed
/// (`reservations::shared`): NOT READY, retried, as for a medium that
/// cannot be reached; once the gateway is fenced (the store is reached
/// through the fenced client, and refuses), MANUAL INTERVENTION
/// REQUIRED, as media access answers then. Never GOOD either way.
pub(crate) fn shared_store_error(e: &io::Error) -> Sense {
    match cause(e) {
        Cause::Fenced => fenced(),
        _ => not_ready(),
    }
}

/// A read that failed at `lba`.
pub(crate) fn read_error(lba: u64, e: &io::Error) -> Sense {
    store_error(Access::Read, Some(lba), e)
}

/// A write that failed at `lba`.
pub(crate) fn write_error(lba: u64, e: &io::Error) -> Sense {
    store_error(Access::Write, Some(lba), e)
}

/// SYNCHRONIZE CACHE could not make the cache durable.
pub(crate) fn flush_error(e: &io::Error) -> Sense {
    store_error(Access::Flush, None, e)
}

/// Whether the store could not be reached (a network store whose cluster
/// is gone or did not answer in time), as opposed to a failed medium:
/// nothing is known to be wrong with the data, and the command may
/// succeed when it is sent again.
fn unavailable(e: &io::Error) -> bool {
    const ECONNRESET: i32 = 104;
    const ENOTCONN: i32 = 107;
    const ESHUTDOWN: i32 = 108;
    const ETIMEDOUT: i32 = 110;
    const ECONNREFUSED: i32 = 111;
    const EHOSTUNREACH: i32 = 113;
    matches!(
        e.raw_os_error(),
        Some(ECONNRESET | ENOTCONN | ESHUTDOWN | ETIMEDOUT | ECONNREFUSED | EHOSTUNREACH)
    )
}

/// ENOSPC (or EDQUOT, a quota that ran out), as Linux numbers them.
fn out_of_space(e: &io::Error) -> bool {
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    matches!(e.raw_os_error(), Some(ENOSPC | EDQUOT))
}

/// NOT READY / LOGICAL UNIT IS IN PROCESS OF BECOMING READY (SPC-5
/// §4.4.8, Annex D.2): the answer while the store is unreachable. Not a
/// MEDIUM ERROR, which would tell the initiator its data is damaged;
/// initiators retry this one (Linux's sd after a delay).
fn not_ready() -> Sense {
    Sense::new(SenseKey::NOT_READY, Asc::LU_NOT_READY_BECOMING_READY)
}

/// NOT READY / LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED (SPC-5
/// Annex D.2, 04h/03h): the cluster fenced this gateway and it will not
/// serve the LU again by itself. Initiators do not retry it (Linux's sd
/// fails the command at once), and a multipath initiator fails the path.
fn fenced() -> Sense {
    Sense::new(
        SenseKey::NOT_READY,
        Asc::LU_NOT_READY_MANUAL_INTERVENTION_REQUIRED,
    )
}

/// MEDIUM ERROR / WRITE ERROR (SPC-5 Annex D.2, 0Ch/00h): writes that
/// were acknowledged are gone, so the cache cannot be made durable
/// (SBC-4 §5.24: SYNCHRONIZE CACHE makes the blocks' most recent data
/// durable, and here it cannot). dm-multipath passes it up rather than
/// trying another path (not a path error), unlike NOT READY. Linux's
/// SCSI layer retries it a few times (`scsi_check_sense`: only ASC 11h,
/// 13h and 14h are final), which is why the store keeps reporting the
/// loss for a while (ironlun-backend's `rbd` ledger). A current error
/// (SPC-5 §4.4.2, response code 70h/72h), not a deferred one.
fn lost_writes() -> Sense {
    Sense::new(SenseKey::MEDIUM_ERROR, Asc::WRITE_ERROR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ironlun_scsi_codes::SenseCode;

    fn code(s: &Sense) -> SenseCode {
        s.code
    }

    #[test]
    fn each_cause_has_its_sense() {
        let errno = io::Error::from_raw_os_error;
        let lost: io::Error = Fault::LostWrites(2).into();
        let fenced: io::Error = Fault::Fenced.into();
        let medium = io::Error::other("bad sector");
        let nr = SenseCode::new(SenseKey::NOT_READY, Asc::LU_NOT_READY_BECOMING_READY);
        let manual = SenseCode::new(
            SenseKey::NOT_READY,
            Asc::LU_NOT_READY_MANUAL_INTERVENTION_REQUIRED,
        );
        let we = SenseCode::new(SenseKey::MEDIUM_ERROR, Asc::WRITE_ERROR);
        let transition = SenseCode::new(
            SenseKey::NOT_READY,
            Asc::LU_NOT_ACCESSIBLE_ASYMMETRIC_ACCESS_STATE_TRANSITION,
        );
        let re = SenseCode::new(SenseKey::MEDIUM_ERROR, Asc::UNRECOVERED_READ_ERROR);
        let dp = SenseCode::new(
            SenseKey::DATA_PROTECT,
            Asc::SPACE_ALLOCATION_FAILED_WRITE_PROTECT,
        );
        let cases = [
            (Access::Read, errno(108), nr),
            (Access::Write, errno(110), nr),
            (Access::Flush, errno(110), we),
            (Access::Flush, errno(108), we),
            (Access::Write, fenced, manual),
            (Access::Flush, lost, we),
            (Access::Write, errno(28), dp),
            (Access::Read, errno(28), re),
            (Access::Write, medium, we),
            (Access::Write, Fault::NotOwner.into(), transition),
            (Access::Flush, Fault::NotOwner.into(), transition),
            // EROFS of any other store (a file's read-only file system) is
            // the medium's.
            (Access::Write, errno(30), we),
        ];
        for (access, e, want) in cases {
            assert_eq!(
                code(&store_error(access, Some(7), &e)),
                want,
                "{access:?} {e}"
            );
        }
        let fenced: io::Error = Fault::Fenced.into();
        for access in [Access::Read, Access::Flush, Access::Ready] {
            assert_eq!(code(&store_error(access, None, &fenced)), manual);
        }
    }

    #[test]
    fn lost_writes_name_no_lba_of_the_command() {
        let lost: io::Error = Fault::LostWrites(1).into();
        let s = store_error(Access::Write, Some(9), &lost);
        assert_eq!(s.info, None, "the lost writes were elsewhere");
        let s = store_error(Access::Write, Some(9), &io::Error::other("x"));
        assert_eq!(s.info, Some(9));
    }
}
