//! What a store says that no errno says: its conditions that need more
//! than "the medium failed" or "the store is unreachable", carried inside
//! an [`io::Error`] so that every backend method keeps its signature.
//! ironlun-scsi turns each into its sense data (in one place,
//! `block::store_error`); this crate knows nothing of sense.

use std::fmt;
use std::io;

/// A store condition carried in an [`io::Error`] (see [`Fault::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The cluster fenced this gateway (blocklisted its client) and the
    /// LU does not reconnect by itself: nothing reaches the medium until
    /// an operator acts (adds the LUN again, restarts the target).
    Fenced,
    /// Writes acknowledged since the last successful flush were lost with
    /// a client that was replaced or fenced: this many. Reported by the
    /// next flush (and refused durable writes until then), never GOOD.
    LostWrites(u64),
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
                "{n} acknowledged writes were lost with a client that was cut off before \
                 they were flushed"
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
        assert_eq!(Fault::of(&io::Error::from_raw_os_error(108)), None);
        assert_eq!(Fault::of(&io::Error::other("something else")), None);
        assert!(e.to_string().starts_with("3 acknowledged writes were lost"));
    }
}
