//! What the operator hands the daemon: the TOML configuration
//! (`ironlun-target` `Config::from_toml`, as read at start and by SIGHUP)
//! and the management API's JSON operations (`admin::ops::Request`, then
//! the operation itself on a running configuration, planned only).
//!
//! Input: one byte that picks what the rest is, by its low bit: 0, a
//! configuration file; 1, the body of a `POST /v1/ops`.
//!
//! Checked beyond "does not panic":
//! - a configuration that checks also parses as the document SIGHUP,
//!   `admin apply` and every API operation edit (toml_edit), and that
//!   document, written out, checks to the same configuration: the daemon
//!   never starts from a file it would read differently when changing it;
//! - a request that deserialises serialises to JSON that deserialises to
//!   the same request;
//! - the operation, run as a dry run on a running daemon (RAM LUNs, no
//!   portals), answers or refuses and changes nothing: the running
//!   document and configuration are as before. (`save-config` writes a
//!   file whatever `dry_run` says, so it is only deserialised.)

use std::sync::OnceLock;

use ironlun_target::live::{edit, Live};
use ironlun_target::registry::Registry;
use ironlun_target_admin::ops::{self, Op, Request};
use ironlun_target_config::IoEngine;
use ironlun_target_config::{Config, Overrides};

/// What one input exercised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigFilesRun {
    /// `config` or `op`.
    pub kind: &'static str,
    /// The configuration checked, or the request deserialised.
    pub parsed: bool,
    /// The operation was run (dry) and answered without an error.
    pub answered: bool,
}

pub fn config_files(data: &[u8]) -> ConfigFilesRun {
    let (which, rest) = data.split_first().unwrap_or((&0, &[]));
    if which & 1 == 0 {
        config_file(rest)
    } else {
        operation(rest)
    }
}

fn config_file(bytes: &[u8]) -> ConfigFilesRun {
    let mut run = ConfigFilesRun {
        kind: "config",
        ..ConfigFilesRun::default()
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return run;
    };
    let Ok(cfg) = Config::from_toml(text, None) else {
        return run;
    };
    let doc = match edit::parse(text) {
        Ok(d) => d,
        Err(e) => panic!("a configuration that checks is not a document the daemon can edit: {e}"),
    };
    match Config::from_toml(&doc.to_string(), None) {
        Ok(again) => assert_eq!(
            again, cfg,
            "written out, the document checks to another configuration"
        ),
        Err(e) => panic!("written out, the document no longer checks: {e}"),
    }
    run.parsed = true;
    run
}

fn operation(bytes: &[u8]) -> ConfigFilesRun {
    let mut run = ConfigFilesRun {
        kind: "op",
        ..ConfigFilesRun::default()
    };
    let Ok(mut req) = serde_json::from_slice::<Request>(bytes) else {
        return run;
    };
    run.parsed = true;
    let json =
        serde_json::to_value(&req).unwrap_or_else(|e| panic!("a request does not serialise: {e}"));
    let again: Request = serde_json::from_value(json.clone())
        .unwrap_or_else(|e| panic!("a serialised request does not deserialise: {e}: {json}"));
    assert_eq!(
        serde_json::to_value(&again).ok(),
        Some(json),
        "a request changed on the way"
    );
    if matches!(req.op, Op::SaveConfig { .. }) {
        return run;
    }
    req.dry_run = true;
    let live = daemon();
    let (doc, cfg) = (live.document(), live.config());
    run.answered = ops::run(live, req).is_ok();
    assert_eq!(
        live.document(),
        doc,
        "a dry run changed the running document"
    );
    assert!(
        live.config() == cfg,
        "a dry run changed the running configuration"
    );
    run
}

/// A running daemon of one target with two LUNs (RAM, null), built
/// once: every operation
/// is a dry run and changes nothing.
fn daemon() -> &'static Live {
    static LIVE: OnceLock<Live> = OnceLock::new();
    LIVE.get_or_init(|| {
        let o = Overrides {
            name: Some("iqn.2026-11.test:fuzz".into()),
            luns: vec!["ram:64KiB".into(), "null:1GiB".into()],
            listen: vec!["127.0.0.1:3260".into()],
            ..Overrides::default()
        };
        let cfg = Config::load(&o).unwrap_or_else(|e| panic!("the harness's configuration: {e}"));
        let targets = ironlun_target::server::build_targets(&cfg)
            .unwrap_or_else(|e| panic!("the harness's targets: {e}"));
        let registry = Registry::new(
            targets,
            cfg.limits.clone(),
            cfg.tcp.clone(),
            Vec::new(),
            None,
            IoEngine::Pool,
        );
        Live::new(registry, cfg, &o, Vec::new())
            .unwrap_or_else(|e| panic!("the harness's daemon: {e}"))
    })
}
