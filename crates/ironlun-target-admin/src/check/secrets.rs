//! CHAP secrets across the configuration. The parser checks each set of
//! credentials alone (lengths, one-way and mutual different); across
//! them, a secret that authenticates initiators must not authenticate
//! the target too, anywhere: "any CHAP secret used for initiator
//! authentication MUST NOT be configured for authentication of any
//! target" (RFC 7143 §9.2.1), since an initiator that knows it could
//! then answer the target's own challenge in its name.

use std::collections::HashMap;

use ironlun_proto::chap::{ChapPolicy, Secret};

use super::Finding;
use ironlun_target_config::Config;

/// Where a secret is configured: `target NAME chap` and the like.
type Scope = String;

pub(super) fn check(cfg: &Config, out: &mut Vec<Finding>) {
    let mut policies: Vec<(Scope, &ChapPolicy)> = Vec::new();
    if let Some(p) = &cfg.discovery_chap {
        policies.push(("discovery".to_owned(), p));
    }
    for t in &cfg.targets {
        if let Some(p) = &t.chap {
            policies.push((format!("target {}", t.name), p));
        }
        for e in &t.initiators {
            if let Some(p) = &e.chap {
                policies.push((format!("target {} initiator {}", t.name, e.name), p));
            }
        }
    }
    // The target's own secrets, by secret: a set, so that the check is
    // linear in the number of credentials.
    let mut proving: HashMap<&Secret, &Scope> = HashMap::new();
    for (scope, p) in &policies {
        if let Some(m) = &p.target {
            proving.entry(&m.secret).or_insert(scope);
        }
    }
    for (scope, p) in &policies {
        if let Some(other) = proving.get(&p.initiator.secret) {
            out.push(Finding::error(
                format!("{scope} chap"),
                format!("its secret is also {other} mutual_chap's: a secret that authenticates initiators must not authenticate the target (RFC 7143 §9.2.1)"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Config {
        Config::from_toml(text, None).unwrap()
    }

    #[test]
    fn a_secret_used_in_both_directions_is_found_across_scopes() {
        let cfg = load(
            r#"
[discovery]
chap = "d:discovery-secret-1"
[[target]]
name = "iqn.2026-11.test:a"
chap = "a:target-a-secret-1"
mutual_chap = "ta:discovery-secret-1"
allow = ["iqn.2026-11.test:init"]
lun = [{ spec = "ram:1M" }]
[[target.initiator]]
name = "iqn.2026-11.test:init"
chap = "i:shared-mutual-secret"
[[target]]
name = "iqn.2026-11.test:b"
chap = "b:target-b-secret-1"
mutual_chap = "tb:shared-mutual-secret"
lun = [{ spec = "ram:1M" }]
"#,
        );
        let mut out = Vec::new();
        check(&cfg, &mut out);
        let said: Vec<String> = out.iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                "error: discovery chap: its secret is also target iqn.2026-11.test:a mutual_chap's: a secret that authenticates initiators must not authenticate the target (RFC 7143 §9.2.1)",
                "error: target iqn.2026-11.test:a initiator iqn.2026-11.test:init chap: its secret is also target iqn.2026-11.test:b mutual_chap's: a secret that authenticates initiators must not authenticate the target (RFC 7143 §9.2.1)",
            ]
        );
    }

    #[test]
    fn secrets_kept_apart_are_fine() {
        let cfg = load(
            r#"
[discovery]
chap = "d:discovery-secret-1"
[[target]]
name = "iqn.2026-11.test:a"
chap = "a:discovery-secret-1"
mutual_chap = "ta:target-mutual-1"
lun = [{ spec = "ram:1M" }]
"#,
        );
        let mut out = Vec::new();
        check(&cfg, &mut out);
        assert_eq!(out, []);
    }
}
