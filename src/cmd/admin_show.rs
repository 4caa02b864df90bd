//! What `ironlun admin state` and `ironlun admin sessions` print from
//! the management API's JSON (`--json` prints that JSON as it came).
//!
//! The state is a tree, as targetcli's `ls` shows its objects: each
//! target with its portals, its LUNs (the spec in the configuration's own
//! grammar, the size, and the flags ro, thin, offline with the reason),
//! its access list, its initiator entries (CHAP on or off, the map in the
//! file's `{ lun, target_lun, read_only }` form) and its sessions. The
//! sessions are an aligned table with the target of each.

// Indexing a serde_json::Value by key yields Null for a missing key: it
// cannot panic, which is what the lint guards against.
#![allow(clippy::indexing_slicing)]

use comfy_table::{presets, CellAlignment, Table};
use ironlun_units::format_size;
use serde_json::Value;

/// One line of the tree and the lines under it.
struct Node {
    label: String,
    children: Vec<Node>,
}

impl Node {
    fn leaf(label: impl Into<String>) -> Node {
        Node {
            label: label.into(),
            children: Vec::new(),
        }
    }

    fn with(label: impl Into<String>, children: Vec<Node>) -> Node {
        Node {
            label: label.into(),
            children,
        }
    }

    /// `o- LABEL`, its children two columns in, a `|` down the left of
    /// each child that has a later sibling (targetcli's layout).
    fn render(&self, prefix: &str, last: bool, out: &mut String) {
        out.push_str(prefix);
        out.push_str("o- ");
        out.push_str(&self.label);
        out.push('\n');
        let inner = format!("{prefix}{}", if last { "  " } else { "| " });
        let n = self.children.len();
        for (i, c) in self.children.iter().enumerate() {
            c.render(&inner, i + 1 == n, out);
        }
    }
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn on_off(chap: bool, mutual: bool) -> &'static str {
    match (chap, mutual) {
        (false, _) => "CHAP off",
        (true, false) => "CHAP on",
        (true, true) => "CHAP on (mutual)",
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The tree of `state` (`GET /v1/state`), with `sessions` (`GET
/// /v1/sessions`) under their targets.
pub fn state(state: &Value, sessions: &Value) -> String {
    let portals: Vec<&str> = list(&state["portals"]).iter().map(text).collect();
    let mut top: Vec<Node> = list(&state["targets"])
        .iter()
        .map(|t| target(t, &portals, sessions))
        .collect();
    let discovery: Vec<Node> = list(sessions)
        .iter()
        .filter(|s| s["target"].is_null())
        .map(session)
        .collect();
    let chap = on_off(state["discovery_chap"].as_bool() == Some(true), false);
    top.push(Node::with(
        format!(
            "discovery [{chap}, {}]",
            count(discovery.len(), "session", "sessions")
        ),
        discovery,
    ));
    let root = Node::with(
        format!(
            "/ [{}, {}]",
            count(portals.len(), "portal", "portals"),
            count(list(&state["targets"]).len(), "target", "targets")
        ),
        top,
    );
    let mut out = String::new();
    root.render("", true, &mut out);
    out
}

fn target(t: &Value, portals: &[&str], sessions: &Value) -> Node {
    let name = text(&t["name"]);
    let mut about = Vec::new();
    if let Some(a) = t["alias"].as_str() {
        about.push(format!("alias {a:?}"));
    }
    about.push(
        on_off(
            t["chap"].as_bool() == Some(true),
            t["mutual_chap"].as_bool() == Some(true),
        )
        .to_owned(),
    );
    about.push(format!("default_map {}", text(&t["default_map"])));
    let luns: Vec<Node> = list(&t["luns"]).iter().map(lun).collect();
    let mine: Vec<Node> = list(sessions)
        .iter()
        .filter(|s| s["target"].as_str() == Some(name))
        .map(session)
        .collect();
    let mut children = vec![
        Node::with(
            format!("portals [tpgt {}]", t["portal_group_tag"]),
            portals.iter().map(|p| Node::leaf(*p)).collect(),
        ),
        Node::with(format!("luns [{}]", luns.len()), luns),
        acl(&t["allow"]),
        initiators(&t["initiators"]),
        Node::with(format!("sessions [{}]", mine.len()), mine),
    ];
    if let Some(g) = group(&t["group"]) {
        children.push(g);
    }
    Node::with(format!("{name} [{}]", about.join(", ")), children)
}

/// The gateway group: this gateway, each gateway's health, each LUN's
/// owner and this gateway's role for it; none without a group.
fn group(g: &Value) -> Option<Node> {
    if g.is_null() {
        return None;
    }
    let gateways = list(&g["gateways"])
        .iter()
        .map(|m| {
            let me = if m["local"].as_bool() == Some(true) {
                " (this gateway)"
            } else {
                ""
            };
            Node::leaf(format!(
                "{} tpg {}{me}: {}",
                text(&m["name"]),
                m["tpg"],
                text(&m["health"])
            ))
        })
        .collect();
    let luns = list(&g["luns"])
        .iter()
        .map(|l| {
            let owner = l["owner"].as_str().unwrap_or("none");
            Node::leaf(format!(
                "lun{}: owner {owner}; here {}",
                l["lun"],
                text(&l["role"])
            ))
        })
        .collect();
    Some(Node::with(
        format!(
            "group {} [gateway {}]",
            text(&g["group"]),
            text(&g["gateway"])
        ),
        vec![
            Node::with("gateways".to_owned(), gateways),
            Node::with("owners".to_owned(), luns),
        ],
    ))
}

/// `lun0 file:/srv/a.img,size=10GiB,thin [10GiB, 512-byte blocks, thin]`.
fn lun(l: &Value) -> Node {
    let bytes = l["bytes"].as_u64().unwrap_or(0);
    let mut about = vec![size(bytes), format!("{}-byte blocks", l["block_size"])];
    if l["read_only"].as_bool() == Some(true) {
        about.push("ro".to_owned());
    }
    if l["thin"].as_bool() == Some(true) {
        about.push("thin".to_owned());
    }
    if let Some(why) = l["offline"].as_str() {
        about.push(format!("OFFLINE: {why}"));
    }
    let spec = match text(&l["spec"]) {
        "" => text(&l["kind"]),
        s => s,
    };
    let label = format!("lun{} {spec} [{}]", l["lun"], about.join(", "));
    let children = alua(&l["alua"])
        .into_iter()
        .chain(schedule_text(&l["snapshot_schedule"]).map(Node::leaf))
        .collect();
    Node::with(label, children)
}

/// A LUN's snapshot schedule and its last run: `snapshots every 1h,
/// keep 24 (auto-…): last auto-20261128T045000Z at 2026-11-28T04:50:00Z,
/// I/O paused 1.2 ms; 3 taken, 0 failed, 3 kept`; none without one.
fn schedule_text(s: &Value) -> Option<String> {
    if s.is_null() {
        return None;
    }
    let head = format!(
        "snapshots every {}, keep {} ({}-…)",
        text(&s["every"]),
        s["keep"],
        text(&s["prefix"])
    );
    let last = &s["last"];
    let at = last["at"].as_u64().map_or_else(|| "-".into(), taken_text);
    let last = match (last["snapshot"].as_str(), last["error"].as_str()) {
        _ if last.is_null() => "no run yet".to_owned(),
        (Some(name), err) => {
            let mut t = format!(
                "last {name} at {at}, I/O paused {:.1} ms",
                last["paused_ms"].as_f64().unwrap_or(0.0)
            );
            let deleted: Vec<&str> = list(&last["deleted"]).iter().map(text).collect();
            if !deleted.is_empty() {
                t.push_str(&format!(", deleted {}", deleted.join(" ")));
            }
            if let Some(e) = err {
                t.push_str(&format!(", then FAILED: {e}"));
            }
            t
        }
        (None, err) => format!("last run at {at} FAILED: {}", err.unwrap_or("?")),
    };
    let kept = s["kept"]
        .as_u64()
        .map_or_else(String::new, |k| format!(", {k} kept"));
    Some(format!(
        "{head}: {last}; {} taken, {} failed{kept}",
        s["taken"], s["failures"]
    ))
}

/// A LUN's ALUA: its mode, this gateway's group and state, and every
/// group (`*` marks the preferred ones); none without ALUA.
fn alua(a: &Value) -> Option<Node> {
    if a.is_null() {
        return None;
    }
    let groups: Vec<String> = list(&a["groups"])
        .iter()
        .map(|g| {
            let pref = if g["preferred"].as_bool() == Some(true) {
                "*"
            } else {
                ""
            };
            format!(
                "{}{pref} {} ports {}",
                g["id"],
                text(&g["state"]),
                g["ports"]
            )
        })
        .collect();
    Some(Node::leaf(format!(
        "ALUA {}: local group {} {}; groups: {}",
        text(&a["mode"]),
        a["local_group"],
        text(&a["local_state"]),
        groups.join(", ")
    )))
}

/// A size exactly where a unit holds it in a few digits (`16MiB`,
/// `10GB`), else about (`~465.8GiB`); small ones in bytes.
fn size(n: u64) -> String {
    let exact = format_size(n);
    let digits = exact.bytes().take_while(u8::is_ascii_digit).count();
    if (exact.ends_with('B') && digits <= 4) || n < 1024 {
        return exact;
    }
    let units = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    let (unit, shift) = units
        .into_iter()
        .find(|(_, shift)| n >> shift > 0)
        .unwrap_or(("KiB", 10));
    format!("~{:.1}{unit}", n as f64 / (1u64 << shift) as f64)
}

fn acl(allow: &Value) -> Node {
    let entries: Vec<Node> = list(allow).iter().map(|e| Node::leaf(text(e))).collect();
    if entries.is_empty() {
        return Node::leaf("acl [everyone may log in]");
    }
    Node::with(format!("acl [{} allowed]", entries.len()), entries)
}

/// Each entry with CHAP on or off and its map as the file writes it.
fn initiators(entries: &Value) -> Node {
    let nodes: Vec<Node> = list(entries)
        .iter()
        .map(|e| {
            let chap = on_off(
                e["chap"].as_bool() == Some(true),
                e["mutual_chap"].as_bool() == Some(true),
            );
            let map = match e["luns"].as_array() {
                None => "the target's LUNs".to_owned(),
                Some(m) => format!("luns = [{}]", mappings(m)),
            };
            Node::leaf(format!("{} [{chap}] {map}", text(&e["name"])))
        })
        .collect();
    Node::with(format!("initiators [{}]", nodes.len()), nodes)
}

/// The API's `[mapped, target LUN, read-only]` triples in the file's
/// `{ lun = 0, target_lun = 1, read_only = true }` form.
fn mappings(m: &[Value]) -> String {
    m.iter()
        .map(|x| {
            let ro = x[2].as_bool() == Some(true);
            format!(
                "{{ lun = {}, target_lun = {}, read_only = {ro} }}",
                x[0], x[1]
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn session(s: &Value) -> Node {
    Node::leaf(format!(
        "tsih {} {} from {} [isid {}, {} commands]",
        s["tsih"],
        text(&s["initiator"]),
        text(&s["peer"]),
        text(&s["isid"]),
        s["commands"]
    ))
}

/// The sessions (`GET /v1/sessions`) as an aligned table.
/// A snapshot's time (seconds since 1970) in UTC; the number itself
/// where RFC 3339 cannot write it (after the year 9999, as a file's
/// mtime can be), never a panic on what the server sent.
fn taken_text(secs: u64) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let at = std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(secs));
    match at.map(|t| write!(out, "{}", humantime::format_rfc3339_seconds(t))) {
        Some(Ok(())) => out,
        _ => format!("@{secs}"),
    }
}

/// `admin snapshot list`: one row a snapshot (NAME, SIZE in bytes,
/// TAKEN in UTC, and the spec that exports it read-only); then each LUN
/// that keeps none and why, and each LUN's schedule with its last run.
pub fn snapshots(v: &Value) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(["TARGET", "LUN", "NAME", "BYTES", "TAKEN", "EXPORT"]);
    let mut none = Vec::new();
    for l in list(v) {
        if let Some(why) = l["none_because"].as_str() {
            none.push(format!("{} LUN {}: {why}", text(&l["target"]), l["lun"]));
        }
        for s in list(&l["snapshots"]) {
            let taken = s["taken"].as_u64().map_or_else(|| "-".into(), taken_text);
            t.add_row([
                text(&l["target"]).to_owned(),
                l["lun"].to_string(),
                text(&s["name"]).to_owned(),
                s["bytes"].to_string(),
                taken,
                text(&s["export"]).to_owned(),
            ]);
        }
    }
    for c in t.column_iter_mut() {
        c.set_padding((0, 2));
    }
    for l in list(v) {
        if let Some(s) = schedule_text(&l["schedule"]) {
            none.push(format!("{} LUN {}: {s}", text(&l["target"]), l["lun"]));
        }
    }
    let mut out = String::new();
    if t.row_count() == 0 {
        out.push_str("(no snapshots)\n");
    } else {
        out.extend(t.lines().map(|l| l.trim_end().to_owned() + "\n"));
    }
    for n in none {
        out.push_str(&n);
        out.push('\n');
    }
    out
}

pub fn sessions(v: &Value) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header([
        "TSIH",
        "TARGET",
        "INITIATOR",
        "ISID",
        "PEER",
        "COMMANDS",
        "READ",
        "WRITTEN",
    ]);
    for s in list(v) {
        let target = s["target"].as_str().unwrap_or("(discovery)");
        t.add_row([
            s["tsih"].to_string(),
            target.to_owned(),
            text(&s["initiator"]).to_owned(),
            text(&s["isid"]).to_owned(),
            text(&s["peer"]).to_owned(),
            s["commands"].to_string(),
            s["read_bytes"].to_string(),
            s["write_bytes"].to_string(),
        ]);
    }
    for (i, c) in t.column_iter_mut().enumerate() {
        // No margin on the left, two spaces between columns.
        c.set_padding((0, 2));
        if matches!(i, 0 | 5 | 6 | 7) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out: String = t.lines().map(|l| l.trim_end().to_owned() + "\n").collect();
    if list(v).is_empty() {
        out.push_str("(no sessions)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn a_snapshot_time_out_of_rfc_3339_is_shown_as_a_number() {
        assert_eq!(taken_text(0), "1970-01-01T00:00:00Z");
        assert_eq!(taken_text(300_000_000_000), "@300000000000");
        assert_eq!(taken_text(u64::MAX), format!("@{}", u64::MAX));
    }

    fn state_json() -> Value {
        json!({
            "portals": ["127.0.0.1:3260", "[::1]:3260"],
            "discovery_chap": false,
            "targets": [{
                "name": "iqn.2026-11.test:t",
                "alias": "store",
                "default_map": "none",
                "portal_group_tag": 1,
                "allow": ["iqn.2026-11.test:init", "10.0.0.0/8"],
                "chap": true,
                "mutual_chap": true,
                "sessions": 1,
                "luns": [
                    {"lun": 0, "kind": "file", "bytes": 10737418240u64, "block_size": 512,
                     "read_only": false, "spec": "file:/srv/a.img,size=10GiB,thin", "thin": true},
                    {"lun": 1, "kind": "ram", "bytes": 16777216, "block_size": 4096,
                     "read_only": true, "spec": "ram:16MiB,bs=4096,ro", "thin": false,
                     "offline": "its reservations file does not parse"}
                ],
                "initiators": [
                    {"name": "iqn.2026-11.test:init", "luns": [[0, 1, true], [1, 0, false]],
                     "chap": true, "mutual_chap": false},
                    {"name": "iqn.2026-11.test:b", "luns": null, "chap": false, "mutual_chap": false}
                ]
            }]
        })
    }

    fn sessions_json() -> Value {
        json!([
            {"tsih": 1, "initiator": "iqn.2026-11.test:init", "isid": "400001370000",
             "target": "iqn.2026-11.test:t", "peer": "127.0.0.1:40000", "started": 0,
             "negotiated": "", "commands": 12, "read_bytes": 4096, "write_bytes": 0},
            {"tsih": 22, "initiator": "iqn.2026-11.test:b", "isid": "400001370001",
             "target": null, "peer": "127.0.0.1:40002", "started": 0,
             "negotiated": "", "commands": 0, "read_bytes": 0, "write_bytes": 0}
        ])
    }

    #[test]
    fn the_state_is_a_tree_of_what_the_configuration_says() {
        let shown = state(&state_json(), &sessions_json());
        let want = "\
o- / [2 portals, 1 target]
  o- iqn.2026-11.test:t [alias \"store\", CHAP on (mutual), default_map none]
  | o- portals [tpgt 1]
  | | o- 127.0.0.1:3260
  | | o- [::1]:3260
  | o- luns [2]
  | | o- lun0 file:/srv/a.img,size=10GiB,thin [10GiB, 512-byte blocks, thin]
  | | o- lun1 ram:16MiB,bs=4096,ro [16MiB, 4096-byte blocks, ro, OFFLINE: its reservations file does not parse]
  | o- acl [2 allowed]
  | | o- iqn.2026-11.test:init
  | | o- 10.0.0.0/8
  | o- initiators [2]
  | | o- iqn.2026-11.test:init [CHAP on] luns = [{ lun = 0, target_lun = 1, read_only = true }, { lun = 1, target_lun = 0, read_only = false }]
  | | o- iqn.2026-11.test:b [CHAP off] the target's LUNs
  | o- sessions [1]
  |   o- tsih 1 iqn.2026-11.test:init from 127.0.0.1:40000 [isid 400001370000, 12 commands]
  o- discovery [CHAP off, 1 session]
    o- tsih 22 iqn.2026-11.test:b from 127.0.0.1:40002 [isid 400001370001, 0 commands]
";
        assert_eq!(shown, want, "\n{shown}");
    }

    #[test]
    fn sizes_are_exact_where_a_unit_holds_them() {
        assert_eq!(size(16 << 20), "16MiB");
        assert_eq!(size(10_000_000), "10MB");
        assert_eq!(size(10_000_000_000), "~9.3GiB");
        assert_eq!(size(500), "500");
        assert_eq!(size(500_107_862_016), "~465.8GiB");
        assert_eq!(size(3 << 40), "3072GiB");
        assert_eq!(size((3 << 40) + 1), "~3.0TiB");
    }

    #[test]
    fn snapshots_are_rows_and_luns_without_them_say_why() {
        let v = serde_json::json!([
            {"target": "iqn.2026-11.test:t", "lun": 0, "kind": "file", "snapshots": [
                {"name": "nightly", "bytes": 16777216, "taken": 1795828386_u64,
                 "export": "file:/srv/a.img.snapshots/nightly,ro"}
            ]},
            {"target": "iqn.2026-11.test:t", "lun": 1, "kind": "ram", "snapshots": [],
             "none_because": "a ram LUN has no snapshots: …"}
        ]);
        let shown = snapshots(&v);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), 3, "{shown}");
        assert!(lines[0].starts_with("TARGET"), "{shown}");
        assert!(
            lines[1].contains("  nightly  16777216  2026-11-28T"),
            "{shown}"
        );
        assert!(
            lines[1].ends_with("file:/srv/a.img.snapshots/nightly,ro"),
            "{shown}"
        );
        assert_eq!(
            lines[2],
            "iqn.2026-11.test:t LUN 1: a ram LUN has no snapshots: …"
        );
        assert_eq!(snapshots(&serde_json::json!([])), "(no snapshots)\n");
    }

    #[test]
    fn a_schedule_shows_its_last_run_or_its_failure() {
        let v = serde_json::json!([
            {"target": "iqn.2026-11.test:t", "lun": 0, "kind": "file", "snapshots": [],
             "schedule": {"every": "1h", "keep": 24, "prefix": "auto", "next": 1795845000_u64,
                "running": false, "taken": 25, "failures": 1, "kept": 24,
                "last_success": 1795841400_u64,
                "last": {"at": 1795841400_u64, "snapshot": "auto-20261128T045000Z",
                         "paused_ms": 0.42, "deleted": ["auto-20261127T045000Z"]}}},
            {"target": "iqn.2026-11.test:t", "lun": 1, "kind": "rbd", "snapshots": [],
             "schedule": {"every": "10m", "keep": 3, "prefix": "auto", "next": null,
                "running": false, "taken": 0, "failures": 2, "kept": null,
                "last_success": null,
                "last": {"at": 1795841400_u64, "error": "the cluster is down"}}}
        ]);
        let shown = snapshots(&v);
        assert!(
            shown.contains(
                "iqn.2026-11.test:t LUN 0: snapshots every 1h, keep 24 (auto-…): last auto-20261128T045000Z at 2026-11-28T04:50:00Z, I/O paused 0.4 ms, deleted auto-20261127T045000Z; 25 taken, 1 failed, 24 kept\n"
            ),
            "{shown}"
        );
        assert!(
            shown.contains(
                "iqn.2026-11.test:t LUN 1: snapshots every 10m, keep 3 (auto-…): last run at 2026-11-28T04:50:00Z FAILED: the cluster is down; 0 taken, 2 failed\n"
            ),
            "{shown}"
        );
    }

    #[test]
    fn the_sessions_table_is_aligned_with_a_target_column() {
        let shown = sessions(&sessions_json());
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), 3, "{shown}");
        assert!(lines[0].starts_with("TSIH  TARGET"), "{shown}");
        assert!(lines[2].contains("(discovery)"), "{shown}");
        // Every column starts where its header does.
        for h in ["TARGET", "INITIATOR", "ISID", "PEER"] {
            let at = lines[0].find(h).unwrap();
            for l in &lines[1..] {
                assert_ne!(l.as_bytes()[at], b' ', "{h} in {l:?}");
                assert_eq!(l.as_bytes()[at - 1], b' ', "{h} in {l:?}");
            }
        }
        // Numbers are right-aligned: they end where their header ends.
        let end = lines[0].find("COMMANDS").unwrap() + "COMMANDS".len();
        for l in &lines[1..] {
            assert!(l.as_bytes()[end - 1].is_ascii_digit(), "{l:?}");
        }
        assert_eq!(sessions(&json!([])).lines().last(), Some("(no sessions)"));
    }
}
