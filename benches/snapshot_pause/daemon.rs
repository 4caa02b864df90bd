//! The daemon under test: a configuration of one target with one LUN,
//! started by benches/common/daemon.rs.

use std::path::Path;

pub use crate::common_daemon::Daemon;

/// The target's name.
pub const TARGET: &str = "iqn.2026-11.io.ironlun.snap:t";

/// Starts the daemon with one target whose LUN 0 is `spec`, in `dir`;
/// returns once the API answers.
pub fn start(ironlun: &Path, dir: &Path, spec: &str) -> Result<Daemon, String> {
    Daemon::start(ironlun, dir, |port, socket| {
        format!(
            "listen = [\"127.0.0.1:{port}\"]\nadmin_socket = \"{}\"\n\n\
             [[target]]\nname = \"{TARGET}\"\n[[target.lun]]\nspec = \"{spec}\"\n",
            socket.display()
        )
    })
}

/// LUN 0's URL on `d`.
pub fn url(d: &Daemon) -> String {
    format!("iscsi://127.0.0.1:{}/{TARGET}/0", d.port)
}
