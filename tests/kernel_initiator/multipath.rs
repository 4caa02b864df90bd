//! Case multipath: dm-multipath (Debian's multipath-tools in the guest,
//! with the settings docs/ha.md gives) over two gateways of one target,
//! the alua case's two daemons on loopback (gateway 1 preferred, as a
//! gateway group's preferred gateway is). multipathd must make one map
//! with gateway 1's path in the active group (prio alua); when the guest
//! reports `phase=mpath-seen` the host swaps the ALUA states on both
//! gateways, and the guest's writes and reads through the map must go on
//! without an error while dm-multipath moves to gateway 2's path. The
//! host then checks, from each gateway's own session counters, that the
//! writes after the swap reached gateway 2.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use ironlun_vm::cases;
use ironlun_vm::guest::{field, parse_record};

use super::alua::{gateway, swap};
use super::support::run;
use super::{boot_watching, require_kv, require_pass, verdict};
use super::{Ctx, Verdict};

/// How long the guest waits for the map to move; it only stops a guest
/// that would otherwise wait for ever.
const WAIT_S: &str = "300";

/// Bytes written through the sessions a gateway serves now.
pub(super) fn written(sock: &Path) -> Result<u64, String> {
    let args = [
        "admin",
        "--socket",
        sock.to_str().unwrap_or_default(),
        "--json",
        "sessions",
    ];
    let (rc, out) = run(super::support::ironlun_bin(), &args);
    if rc != 0 {
        return Err(format!("ironlun {}: exit {rc}: {out}", args.join(" ")));
    }
    let v: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("sessions answer: {e}: {out}"))?;
    Ok(v.as_array()
        .map(|a| a.iter().filter_map(|s| s["write_bytes"].as_u64()).sum())
        .unwrap_or(0))
}

pub(super) fn case_multipath(ctx: &Ctx) -> Verdict {
    let dir = ctx.work.path();
    let (mut g1, sock1) = gateway(dir, "multipath", 1, true);
    let (mut g2, sock2) = gateway(dir, "multipath", 2, true);
    let swapped: Mutex<Option<Result<(u64, u64), String>>> = Mutex::new(None);
    let after: Mutex<Option<Result<(u64, u64), String>>> = Mutex::new(None);
    let both = || -> Result<(u64, u64), String> { Ok((written(&sock1)?, written(&sock2)?)) };
    let on_line = |line: &str| {
        let rec = parse_record(line).unwrap_or_default();
        if field(&rec, "phase") == Some("mpath-seen") {
            let r = both().and_then(|w| swap(&sock1).and_then(|()| swap(&sock2)).map(|()| w));
            *swapped.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        }
        if field(&rec, "writeB") == Some("ok") {
            *after.lock().unwrap_or_else(|e| e.into_inner()) = Some(both());
        }
    };
    let port2 = g2.addr.port().to_string();
    let extra = [("PORT2", port2.as_str()), ("WAIT_S", WAIT_S)];
    let o = boot_watching(
        ctx,
        &cases::MULTIPATH,
        "multipath",
        g1.addr.port(),
        &extra,
        Some(&on_line),
    );
    let r = (|| {
        let taken = |m: Mutex<Option<Result<(u64, u64), String>>>, what: &str| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .ok_or_else(|| {
                    format!(
                        "the guest never reported {what}; {}",
                        require_pass(&o).err().unwrap_or_default()
                    )
                })?
        };
        let before = taken(swapped, "phase=mpath-seen")?;
        let end = taken(after, "writeB=ok")?;
        require_pass(&o)?;
        for k in ["login", "login2", "writeA", "writeB", "logout"] {
            require_kv(&o, k, "ok")?;
        }
        let (p1, p2) = (o.get("path1").unwrap_or("?"), o.get("path2").unwrap_or("?"));
        require_kv(&o, "active_before", p1)?;
        require_kv(&o, "active_after", p2)?;
        // Pattern A (4 MiB) went to gateway 1 before the swap; B (4 MiB)
        // to gateway 2 after it.
        const MIB4: u64 = 4 << 20;
        if before.0 < MIB4 {
            return Err(format!(
                "gateway 1 took {} bytes before the swap, not pattern A's {MIB4}",
                before.0
            ));
        }
        if end.1.saturating_sub(before.1) < MIB4 {
            return Err(format!(
                "gateway 2 took {} bytes after the swap, not pattern B's {MIB4}",
                end.1.saturating_sub(before.1)
            ));
        }
        Ok(format!(
            "one map {} over {p1} and {p2}; prios before {} / {}, after {} / {}; the map moved to gateway 2 in {} ms with {} I/O(s) through it and none failed",
            o.get("map").unwrap_or("?"),
            o.get("path1_prio").unwrap_or("?"),
            o.get("path2_prio").unwrap_or("?"),
            o.get("path1_prio_after").unwrap_or("?"),
            o.get("path2_prio_after").unwrap_or("?"),
            o.get("switch_ms").unwrap_or("?"),
            o.get("ios_during_switch").unwrap_or("?"),
        ))
    })();
    let _ = g1.terminate(Duration::from_secs(10));
    let _ = g2.terminate(Duration::from_secs(10));
    verdict(r)
}
