//! # ironlun-fuzz: fuzz harnesses
//!
//! **Owns:** one function per fuzz target, each taking arbitrary bytes and
//! driving a part of the target that reads network input or a file, with the
//! invariants that part must keep checked by assertions (a failed
//! assertion is a finding, like a panic):
//!
//! | target | drives | module |
//! |--------|--------|--------|
//! | `wire` | framing, digests, PDU headers | [`wire`](mod@wire) |
//! | `text` | text keys and negotiation | [`text`](mod@text) |
//! | `cdb` | the SCSI device's CDB decoding and handlers | [`device`](mod@device) |
//! | `login` | the login state machine with CHAP | [`login`](mod@login) |
//! | `session` | login, then full feature phase through the daemon's own connection logic (ironlun-target-core) | [`session`](mod@session) |
//! | `initiator` | the initiator's login and full feature phase (Data-In, R2T, status) against a hostile target | [`initiator`](mod@initiator) |
//! | `state_files` | the state directory's files: saved persistent reservations and sanitize records | [`state_files`](mod@state_files) |
//! | `config_files` | the TOML configuration and the management API's JSON operations (run dry) | [`config_files`](mod@config_files) |
//!
//! It also owns the seed inputs ([`seeds`]): real exchanges recorded from
//! ironlun's own initiator (and, for `initiator`, from its own target), so
//! the fuzzer starts from inputs that reach deep into each state machine.
//!
//! **Must not know:** libFuzzer or cargo-fuzz. The coverage-guided runs
//! live in `fuzz/` (a cargo-fuzz project outside the workspace, whose
//! targets call these functions); this crate builds on stable Rust and its
//! tests replay the committed seeds and every past finding
//! (`fuzz/regressions/`) in the ordinary test run.

#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod config_files;
pub mod device;
pub mod initiator;
pub mod input;
pub mod login;
pub mod seeds;
pub mod session;
pub mod state_files;
pub mod text;
pub mod wire;
pub mod world;

pub use config_files::{config_files, ConfigFilesRun};
pub use device::{cdb, CdbRun};
pub use initiator::{initiator, InitiatorRun};
pub use login::{login, LoginRun};
pub use session::{session, SessionRun};
pub use state_files::{state_files, StateFilesRun};
pub use text::{text, TextRun};
pub use wire::{wire, WireRun};

/// The fuzz targets by name, as `fuzz/` and the seed corpus name them.
pub const TARGETS: [&str; 8] = [
    "wire",
    "text",
    "cdb",
    "login",
    "session",
    "initiator",
    "state_files",
    "config_files",
];

/// Runs the named target's harness on one input; `None` for an unknown
/// name. For replaying corpora and findings.
pub fn run(target: &str, data: &[u8]) -> Option<String> {
    Some(match target {
        "wire" => format!("{:?}", wire(data)),
        "text" => format!("{:?}", text(data)),
        "cdb" => format!("{:?}", cdb(data)),
        "login" => format!("{:?}", login(data)),
        "session" => format!("{:?}", session(data)),
        "initiator" => format!("{:?}", initiator(data)),
        "state_files" => format!("{:?}", state_files(data)),
        "config_files" => format!("{:?}", config_files(data)),
        _ => return None,
    })
}
