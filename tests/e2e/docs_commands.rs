//! The docs and the program agree (issue 42): every `ironlun` command
//! shown in README.md and docs/*.md runs here and exits as documented,
//! or is in [`EXCLUDED`] with the reason it cannot run on loopback.
//!
//! **Which lines are commands** (`docs_commands/extract.rs`): in a
//! ```sh, ```bash or ```shell block, every line whose command (after any
//! `NAME=VALUE` environment words) is `ironlun`; in a ```console block
//! or one with no language, only such lines after a `$ ` prompt (other
//! lines there are output or tables). A line ending in `\` goes on on
//! the next; `# …` is a comment; `NAME=VALUE` alone on a line sets a
//! variable for the document's later commands; a command ending in `&`
//! runs in the background until the document's last command is done.
//!
//! **Expected status.** 0, unless the command's comment starts with
//! `exit N`: `ironlun target --lun ram:1000 --check   # exit 2: not whole
//! blocks`. A command documented to fail carries that annotation.
//!
//! **How each runs** (`docs_commands/session.rs`): the documents one
//! after another, each in a scratch directory of its own holding
//! `var/tmp/disk.img` (64 MiB), `etc/ironlun/agents.token` (mode 0600)
//! and `before.json`/`after.json` (a bench result); each command with
//! `bash -c` (pipefail: the status is `ironlun`'s even in `| head`),
//! `ironlun` being the binary under test. A command that serves
//! (`ironlun target` without `--check`, `ironlun netem` without
//! `--time`, `ironlun bench agent`) is started, must say it listens
//! (`listening on`, netem `relaying`), and is then stopped with SIGTERM
//! (exit 0 or the signal), at once or, with `&`, after the document.
//!
//! **Substitutions** (`docs_commands/rewrite.rs`, and nothing else):
//! - `127.0.0.1:3260` is the target serving the document: the one it
//!   started with `ironlun target … &`, else the test's own
//!   (`iqn.2026-11.io.ironlun:lab`, four `ram:1GiB,thin` LUNs, with
//!   `--stats`); `127.0.0.1:9260` is that target's `--stats` address;
//!   `$(pidof ironlun)` its process. `ironlun admin` given none of
//!   `--socket`, `--config`, `--url` talks to the test's target.
//! - `$URL` where the document sets none, and `URL0`…`URL3`: LUN 0…3 of
//!   the test's target. Other `$NAME`s must be set by the document.
//! - A command that serves listens on `127.0.0.1:0` (`[::1]:0` for an
//!   IPv6 `--listen`), a target's `--stats` too; a target given no
//!   `--listen` gets one (its default is 127.0.0.1:3260).
//! - Paths under `/srv/`, `/var/tmp/`, `/etc/ironlun/`,
//!   `/etc/bash_completion.d/` and `/usr/local/share/man/` are taken
//!   inside the scratch directory.
//! - `ironlun bench` runs each workload 100 ms with no ramp (`--time`,
//!   `--ramp` replaced or added), `sweep` 100 ms a cell and `tcpbench`
//!   100 ms a measurement.
//!
//! A command that still names another path, a non-loopback address or
//! host, a variable the document does not set or an upper-case
//! placeholder (`HOST`, `FILE`) after these, and is not excluded, fails
//! the test with its file and line: new docs cannot drift unseen. So
//! does an exclusion whose command no longer appears in any document.
//! Timing decides nothing: bounds only stop a hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod extract;
mod rewrite;
mod session;
use crate::support;

use std::path::Path;

use extract::Item;
use rewrite::{Place, SHARED_LUNS, SHARED_NAME};
use session::Session;
use support::Target;

/// Documented commands this test does not run: the command as the
/// document writes it (continuations joined, white space collapsed, no
/// comment) and why.
const EXCLUDED: &[(&str, &str)] = &[
    (
        "ironlun reproduce wan-tuning",
        "a reproduction runs for minutes (ironlun-lab's tests run its cells)",
    ),
    (
        "ironlun target --name iqn.2026-11.io.ironlun:lab --lun ram:1GiB --lun null:10GiB,bs=4096 \
         --lun file:/srv/disk.img,size=20GiB --lun block:/dev/sdb,direct \
         --listen 127.0.0.1:3260 --listen '[::1]:3260'",
        "serves a block device, /dev/sdb (tests/e2e/block.rs serves a loop device as root)",
    ),
    (
        "ironlun readcap iscsi://127.0.0.1:3260/iqn.2026-11.io.ironlun:default/0",
        "needs the installed package's service (tests/e2e/service.rs checks its configuration)",
    ),
    (
        "ironlun bench --agents hostA:7370,hostB:7370,hostC:7370 --token-file \
         /etc/ironlun/agents.token iscsi://10.0.0.5:3260/iqn.2026-11.io.ironlun:lab/0 \
         --bs 4k --read 70 --random 100 --qd 32 --time 30s --json run.json",
        "needs three load hosts and a remote target (tests/e2e/bench_agents.rs runs agents on loopback)",
    ),
    (
        "ironlun bench /dev/vdb --engine psync --bs 128k --random 0 --verify",
        "writes a block device, /dev/vdb",
    ),
    (
        "ironlun target --name iqn.2026-11.io.ironlun:rbd --lun rbd:rbd/lun0",
        "needs a Ceph cluster (tests/e2e/rbd.rs starts one)",
    ),
    (
        "ironlun target --lun \
         'rbd:pool1/vm7,conf=/etc/ceph/ceph.conf,id=iscsi,keyring=/etc/ceph/ceph.client.iscsi.keyring'",
        "needs a Ceph cluster (tests/e2e/rbd.rs starts one)",
    ),
    (
        "ironlun admin alua set iqn.2026-11.io.ironlun:ha 2 active/optimized",
        "needs a target with [target.alua] groups (tests/e2e/alua.rs sets states with it)",
    ),
    (
        "ironlun lab --rbd",
        "starts a Ceph cluster and runs the lab on an image there: a minute, and Ceph installed",
    ),
    (
        "CEPH_CONF=/etc/ceph/ceph.conf ironlun lab --rbd",
        "needs a running Ceph cluster and its configuration",
    ),
    (
        "ironlun bench iscsi://HOST/IQN/0 --verify --sessions 16 --profile verify-soak --time 1h",
        "an hour's soak against any target (tests/e2e/soak.rs runs it shortened)",
    ),
    (
        "ironlun sweep --set link_rate=155Mbit --set tcp_window=10MB --vary \
         op=read,solicited-write,unsolicited-write --vary bs=1KiB,8KiB,64KiB,256KiB --vary \
         rtt=0ms,2ms,10ms,50ms --vary qd=1,32 --rows bs --cols op,rtt,qd --html wan.html",
        "96 cells, a minute or more even at 100 ms a cell (README's sweep of the same kind runs)",
    ),
    (
        "ironlun sweep --set link_rate=155Mbit --set tcp_window=10MB --vary \
         op=read,solicited-write,unsolicited-write --vary bs=1KiB,8KiB,64KiB,256KiB --vary \
         qd=1,32 --vary rtt=0ms,2ms,10ms,50ms --rows bs --cols op,rtt,qd --json sweep.json \
         --html sweep.html",
        "96 cells, a minute or more even at 100 ms a cell (README's sweep of the same kind runs)",
    ),
];

/// Every excluded command is still in some document.
fn stale_exclusions(docs: &[(String, Vec<Item>)]) -> Vec<String> {
    let shown = |text: &str| {
        docs.iter()
            .flat_map(|(_, items)| items)
            .any(|i| matches!(i, Item::Command(c) if c.text == text))
    };
    EXCLUDED
        .iter()
        .filter(|(text, _)| !shown(text))
        .map(|(text, _)| format!("EXCLUDED lists `{text}`, which no document shows any more"))
        .collect()
}

/// The test's own target, its management socket at `socket`.
fn shared_target(socket: &Path) -> Target {
    let socket = socket.to_str().unwrap();
    let mut args = vec![
        "--name",
        SHARED_NAME,
        "--stats",
        "127.0.0.1:0",
        "--admin-socket",
        socket,
    ];
    for _ in 0..SHARED_LUNS {
        args.extend(["--lun", "ram:1GiB,thin"]);
    }
    Target::start(&args)
}

/// A bench result, for the documents' `ironlun report before.json
/// after.json`.
fn bench_result(shared: &Target, dir: &Path) -> std::path::PathBuf {
    let path = dir.join("result.json");
    let url = shared.url(SHARED_NAME, 0);
    let path_s = path.to_str().unwrap();
    support::ironlun_ok(&[
        "bench", &url, "--time", "100ms", "--ramp", "0s", "--json", path_s,
    ]);
    path
}

#[test]
fn every_documented_command_runs_as_documented() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = extract::documents(repo);
    let mut failures = stale_exclusions(&docs);
    let scratch = tempfile::tempdir().unwrap();
    let socket = scratch.path().join("admin.sock");
    let shared = shared_target(&socket);
    let place = Place {
        portal: shared.addr,
        stats: Some(shared.stats_addr()),
        pid: shared.child.id(),
    };
    let result = bench_result(&shared, scratch.path());
    let mut ran = 0;
    for (n, (_, items)) in docs.into_iter().enumerate() {
        let root = scratch.path().join(format!("doc{n}"));
        let mut s = Session::new(root, &place, &socket, EXCLUDED, &result);
        for item in items {
            s.item(item);
        }
        ran += s.ran;
        failures.extend(s.finish());
    }
    assert!(
        failures.is_empty(),
        "{} of the documents' commands do not run as documented:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(
        ran >= 30,
        "only {ran} documented commands ran: is extraction broken?"
    );
}
