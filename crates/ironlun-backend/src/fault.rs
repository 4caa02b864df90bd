//! What a store says that no errno says: its conditions that need more
//! than "the medium failed" or "the store is unreachable", carried inside
//! an [`io::Error`] so that every backend method keeps its signature.
//! ironlun-scsi turns each into its sense data (in one place,
//! `block::store_error`); this crate knows nothing of sense.

use std::fmt;
use std::io;
use std::time::Duration;

/// How long SYNCHRONIZE CACHE and durable writes keep reporting lost
/// writes ([`Fault::LostWrites`]) after the first report. Initiators
/// retry a failed command by themselves: Linux's `scsi_check_sense`
/// retries a MEDIUM ERROR unless its ASC is 11h, 13h or 14h (up to 5
/// times for sd, at once), and a report given once would let the retry
/// answer GOOD. A minute covers such retries; a flush after it is a new
/// one.
pub const LOSS_REPORTED_FOR: Duration = Duration::from_secs(60);

/// A store condition carried in an [`io::Error`] (see [`Fault::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The cluster fenced this gateway (blocklisted its client) and the
    /// LU does not reconnect by itself: nothing reaches the medium until
    /// an operator acts (adds the LUN again, restarts the target).
    Fenced,
    /// Writes acknowledged since the last successful flush may be lost:
    /// this many (those counted) were, with a client that was replaced or
    /// fenced, or with a flush that failed (the store reports such a
    /// failure to one flush only). Reported by a flush (and refused
    /// durable writes) for a while, never GOOD.
    LostWrites(u64),
    /// Another gateway of the group owns the image (holds its lock in
    /// managed mode), so this one may not write it: librbd's EROFS on a
    /// grouped image. Passing, as the group hands the image over.
    NotOwner,
}

impl Fault {
    /// The fault `e` carries, if it carries one.
    pub fn of(e: &io::Error) -> Option<Fault> {
        e.get_ref()?.downcast_ref::<Fault>().copied()
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Fenced => f.write_str(
                "the cluster fenced this gateway (its client is blocklisted) and it does not \
                 reconnect: add the LUN again or restart the target",
            ),
            Fault::LostWrites(n) => write!(
                f,
                "acknowledged writes were lost before a flush made them durable ({n} counted): \
                 a flush failed, or the client that had them was cut off"
            ),
            Fault::NotOwner => f.write_str(
                "another gateway of the group owns the image (holds its lock): this one may not \
                 write it",
            ),
        }
    }
}

impl std::error::Error for Fault {}

impl From<Fault> for io::Error {
    fn from(f: Fault) -> io::Error {
        io::Error::other(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_survives_the_trip_through_io_error() {
        let e: io::Error = Fault::LostWrites(3).into();
        assert_eq!(Fault::of(&e), Some(Fault::LostWrites(3)));
        assert_eq!(Fault::of(&Fault::Fenced.into()), Some(Fault::Fenced));
        assert_eq!(Fault::of(&Fault::NotOwner.into()), Some(Fault::NotOwner));
        assert_eq!(Fault::of(&io::Error::from_raw_os_error(108)), None);
        assert_eq!(Fault::of(&io::Error::other("something else")), None);
        assert!(e.to_string().contains("(3 counted)"), "{e}");
    }
}
