//! # ironlun-initiator: an async iSCSI initiator
//!
//! **Owns:** the handles callers hold on a session and the tokio task
//! per session that drives ironlun-initiator-core's `InitiatorCore` over
//! TCP (`driver.rs`: name resolution and socket options, reads into the
//! core, one vectored write of what it sends, its timer, callers'
//! requests and answers), multipath (several sessions to one target
//! through several portals, with failover; which path takes a command
//! is the core's `ChoosePath` hook), the ISID each of an
//! initiator's concurrent sessions gets, SendTargets discovery, iSCSI
//! URLs, opening a LUN (login, then its unit attention cleared), typed
//! SCSI helpers (INQUIRY and the serial number page, READ CAPACITY,
//! READ/WRITE, SYNCHRONIZE CACHE, UNMAP, REPORT LUNS), and `dd`'s copies
//! between LUNs and local files.
//!
//! **Must not know:** PDU layouts or negotiation rules (the wire codec and
//! the sans-IO `ironlun_proto::initiator` own them), when to log out,
//! reconnect or send a command again, or the rules of choosing a path
//! (ironlun-initiator-core decides),
//! benchmarks, or anything of the target daemon.

#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod copy;
pub mod discovery;
mod driver;
pub mod error;
pub mod isid;
pub mod lun;
pub mod multipath;
pub mod scsi;
pub mod session;
pub mod url;
pub mod xcopy;

pub use discovery::{discover, DiscoveredTarget};
pub use error::{Error, Result};
pub use ironlun_initiator_core::{ChoosePath, PathState, PathView};
pub use ironlun_proto::initiator::{ScsiReply, ScsiRequest, SessionLimits};
pub use ironlun_proto::params::{DigestKind, Offers};
pub use ironlun_scsi_codes::{SenseData, SenseKey};
pub use isid::isid_for;
pub use lun::{open_lun, open_lun_paths};
pub use multipath::{Multipath, PathPolicy};
pub use scsi::{Capacity, Inquiry};
pub use session::{
    ReconnectPolicy, Responder, Session, SessionInfo, SessionOptions, TcpOptions,
    DEFAULT_INITIATOR_NAME,
};
pub use url::IscsiUrl;
