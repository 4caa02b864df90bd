//! The daemon under test: a configuration of N targets with one null LUN
//! each, started by benches/common/daemon.rs.

use std::fmt::Write as _;
use std::path::Path;

pub use crate::common_daemon::Daemon;

/// Target `i`'s name.
pub fn target_name(i: usize) -> String {
    format!("iqn.2026-11.io.ironlun.cp:t{i:04}")
}

/// The configuration: `targets` targets, each one `null:1GiB` LUN.
pub fn config(port: u16, socket: &Path, targets: usize) -> String {
    let mut s = format!(
        "listen = [\"127.0.0.1:{port}\"]\nadmin_socket = \"{}\"\n",
        socket.display()
    );
    for i in 0..targets {
        let _ = write!(
            s,
            "\n[[target]]\nname = \"{}\"\n[[target.lun]]\nspec = \"null:1GiB\"\n",
            target_name(i)
        );
    }
    s
}

/// Starts the daemon with `targets` targets (its log in `dir/target.log`);
/// returns once the API answers.
pub fn start(ironlun: &Path, dir: &Path, targets: usize) -> Result<Daemon, String> {
    Daemon::start(ironlun, dir, |port, socket| config(port, socket, targets))
}

/// The URL of target `target`'s LUN `lun` on `d`.
pub fn url(d: &Daemon, target: usize, lun: u16) -> String {
    format!("iscsi://127.0.0.1:{}/{}/{lun}", d.port, target_name(target))
}
