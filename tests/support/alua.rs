//! Two ALUA gateways on loopback for the end-to-end tests (tests/e2e/alua.rs,
//! tests/e2e/alua_initiator.rs): one target served by two daemons, each its own
//! target port group, as a gateway group would serve it but with the
//! states set by configuration, not by a lock.

use std::path::{Path, PathBuf};

use super::Target;

/// One gateway: the daemon and its management socket.
pub struct Gateway {
    pub t: Target,
    pub sock: PathBuf,
}

/// Gateway `tag` (portal group tag, relative port and local group all
/// `tag`) of target `name` in ALUA `mode`, groups 1 (preferred) and 2 in
/// `states`, serving LUN 0 from `lun`. Its files go in `dir`.
pub fn gateway(
    dir: &Path,
    name: &str,
    tag: u16,
    mode: &str,
    states: [&str; 2],
    lun: &str,
) -> Gateway {
    use std::os::unix::fs::PermissionsExt;
    let cfg = dir.join(format!("gw{tag}.toml"));
    let sock = dir.join(format!("gw{tag}.sock"));
    let text = format!(
        r#"listen = ["127.0.0.1:0"]
admin_socket = "{}"
[[target]]
name = "{name}"
portal_group_tag = {tag}
[target.alua]
mode = "{mode}"
local_group = {tag}
transition_time = 10
groups = [
  {{ id = 1, state = "{}", preferred = true }},
  {{ id = 2, state = "{}" }},
]
[[target.lun]]
spec = "{lun}"
"#,
        sock.display(),
        states[0],
        states[1]
    );
    std::fs::write(&cfg, text).unwrap();
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).unwrap();
    let t = Target::start_with(&["--config", cfg.to_str().unwrap()], false);
    Gateway { t, sock }
}
