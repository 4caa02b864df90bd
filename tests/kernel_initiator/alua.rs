//! Case alua: two gateways of one target (two daemons on loopback, RAM
//! LUNs, the same `[target.alua]` groups, each its own local group) as
//! two paths of the Linux kernel initiator. scsi_dh_alua must attach to
//! both (it reads TPGS, VPD 83h's port designators and REPORT TARGET PORT
//! GROUPS), name gateway 1's path active/optimized and preferred and
//! gateway 2's standby, and see one WWID through both. When the guest
//! reports `phase=alua-seen` the host swaps the states on both gateways
//! with `ironlun admin alua set`; the guest must then see the new states
//! of both paths after reads through path 1 met ASYMMETRIC ACCESS STATE
//! CHANGED (one REPORT TARGET PORT GROUPS through path 1 gives the kernel
//! both), and read through path 2.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use ironlun_vm::cases;
use ironlun_vm::guest::{field, parse_record};

use super::support::{run, Target};
use super::{boot_watching, require_kv, require_pass, verdict};
use super::{Ctx, Verdict, IQN};

/// How long the guest reads through path 1 waiting for the new states;
/// it only stops a guest that would otherwise wait for ever.
const WAIT_S: &str = "300";

/// Gateway `tag` (portal group tag and local group `tag`) of case
/// `case`: group 1 active/optimized (and preferred if `pref`), group 2
/// standby.
pub(super) fn gateway(dir: &Path, case: &str, tag: u16, pref: bool) -> (Target, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let cfg = dir.join(format!("{case}-gw{tag}.toml"));
    let sock = dir.join(format!("{case}-gw{tag}.sock"));
    let text = format!(
        "listen = [\"127.0.0.1:0\"]\nadmin_socket = \"{}\"\n[[target]]\nname = \"{IQN}\"\nportal_group_tag = {tag}\n[target.alua]\nmode = \"implicit\"\nlocal_group = {tag}\ngroups = [{{ id = 1, state = \"active/optimized\", preferred = {pref} }}, {{ id = 2, state = \"standby\" }}]\n[[target.lun]]\nspec = \"ram:64MiB\"\n",
        sock.display()
    );
    std::fs::write(&cfg, text).unwrap();
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).unwrap();
    (
        Target::start_with(&["--config", cfg.to_str().unwrap()], false),
        sock,
    )
}

/// Group 2 active/optimized, then group 1 standby, on one gateway: the
/// order docs/ha.md gives for moving the optimized path, so that an
/// initiator reading the states between the two steps sees two active
/// groups, never none.
pub(super) fn swap(sock: &Path) -> Result<(), String> {
    for (group, state) in [("2", "active/optimized"), ("1", "standby")] {
        let args = [
            "admin",
            "--socket",
            sock.to_str().unwrap_or_default(),
            "alua",
            "set",
            IQN,
            group,
            state,
        ];
        let (rc, out) = run(super::support::ironlun_bin(), &args);
        if rc != 0 {
            return Err(format!("ironlun {}: exit {rc}: {out}", args.join(" ")));
        }
    }
    Ok(())
}

pub(super) fn case_alua(ctx: &Ctx) -> Verdict {
    let dir = ctx.work.path();
    let (mut g1, sock1) = gateway(dir, "alua", 1, true);
    let (mut g2, sock2) = gateway(dir, "alua", 2, true);
    let swapped: Mutex<Option<Result<(), String>>> = Mutex::new(None);
    let on_line = |line: &str| {
        let rec = parse_record(line).unwrap_or_default();
        if field(&rec, "phase") == Some("alua-seen") {
            let r = swap(&sock1).and_then(|()| swap(&sock2));
            *swapped.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        }
    };
    let port2 = g2.addr.port().to_string();
    let extra = [("PORT2", port2.as_str()), ("WAIT_S", WAIT_S)];
    let o = boot_watching(
        ctx,
        &cases::ALUA,
        "alua",
        g1.addr.port(),
        &extra,
        Some(&on_line),
    );
    let r = (|| {
        match swapped.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(format!("the host's swap failed: {e}")),
            None => {
                return Err(format!(
                    "the guest never reported phase=alua-seen; {}",
                    require_pass(&o).err().unwrap_or_default()
                ))
            }
        }
        require_pass(&o)?;
        for k in ["login", "login2", "read1", "read2", "logout"] {
            require_kv(&o, k, "ok")?;
        }
        for (k, want) in [
            ("path1_dh", "alua"),
            ("path2_dh", "alua"),
            ("path1_state", "active/optimized"),
            ("path2_state", "standby"),
            ("path1_preferred", "1"),
            ("path2_preferred", "0"),
            ("path1_state_after", "standby"),
            ("path2_state_after", "active/optimized"),
        ] {
            require_kv(&o, k, want)?;
        }
        let (w1, w2) = (o.get("path1_wwid"), o.get("path2_wwid"));
        if w1.is_none() || w1 != w2 {
            return Err(format!("the paths name different LUs: {w1:?}, {w2:?}"));
        }
        for (g, name) in [(&g1, "gateway 1"), (&g2, "gateway 2")] {
            if !g.log().contains("ALUA group 1 active/optimized -> standby") {
                return Err(format!("{name} did not log the swap: {}", g.log()));
            }
        }
        Ok(format!(
            "scsi_dh_alua on both paths, one WWID {}, states swapped after {} read(s) through path 1",
            w1.unwrap_or_default(),
            o.get("reads_to_notice").unwrap_or("?")
        ))
    })();
    let _ = g1.terminate(Duration::from_secs(10));
    let _ = g2.terminate(Duration::from_secs(10));
    verdict(r)
}
