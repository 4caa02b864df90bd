//! What a driver's callers ask of a session.

use ironlun_proto::initiator::ScsiRequest;
use ironlun_wire::{Lun, TmfFunction};

/// One request, handed in with the caller's token
/// ([`InitiatorCore::handle_request`](crate::InitiatorCore::handle_request)).
#[derive(Clone, Debug)]
pub enum Request {
    Scsi(ScsiRequest),
    /// A text exchange (RFC 7143 §11.10), e.g. `SendTargets=All`.
    Text(Vec<(String, String)>),
    /// A task management function (RFC 7143 §11.5).
    TaskMgmt {
        function: TmfFunction,
        lun: Lun,
        referenced_itt: u32,
    },
    /// A NOP-Out the target answers (RFC 7143 §11.18).
    Ping,
    /// Log the session out (RFC 7143 §11.14); the session ends after it.
    Logout,
}
