//! `ironlun discover`: the targets a portal reports (SendTargets).

use ironlun_initiator::url::{format_portal, parse_portal};
use ironlun_initiator::{discover, DiscoveredTarget};
use ironlun_proto::names::loggable;
use serde_json::{json, Value};

use crate::args::InitiatorArgs;
use crate::runtime::{usage, Failure};

#[derive(clap::Args)]
pub struct DiscoverArgs {
    /// Portal to ask, HOST[:PORT] (IPv6 as [::1]:3260).
    pub portal: String,
    /// Print one JSON object instead of the list:
    /// {"portal", "targets": [{"name", "portals": [{"address",
    /// "portal_group_tag"}]}]} (docs/cli.md).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub initiator: InitiatorArgs,
}

pub async fn run(a: DiscoverArgs) -> Result<(), Failure> {
    let portal = match parse_portal(&a.portal) {
        Some((h, p)) => format_portal(&h, p),
        None => return Err(usage(format!("bad portal '{}' (HOST[:PORT])", a.portal))),
    };
    let options = a.initiator.options().map_err(usage)?;
    let targets = discover(&portal, &options)
        .await
        .map_err(|e| e.to_string())?;
    if a.json {
        let targets: Vec<Value> = targets
            .iter()
            .map(|t| {
                let portals: Vec<Value> = t.addresses.iter().map(|a| address(a)).collect();
                json!({ "name": t.name, "portals": portals })
            })
            .collect();
        outln!("{}", json!({ "portal": portal, "targets": targets }));
        return Ok(());
    }
    for line in listing(&targets) {
        outln!("{line}");
    }
    Ok(())
}

/// The lines of the list: each target's name, then its addresses
/// indented. What the target sent is printed with control characters
/// escaped (`ironlun_proto::names::loggable`): a hostile target's name
/// cannot move the cursor, clear the screen or forge a line.
fn listing(targets: &[DiscoveredTarget]) -> Vec<String> {
    let mut out = Vec::new();
    for t in targets {
        out.push(loggable(&t.name).into_owned());
        for addr in &t.addresses {
            out.push(format!("  {}", loggable(addr)));
        }
    }
    out
}

/// A TargetAddress value, `ADDRESS[:PORT],TAG` (RFC 7143 §13.9), as
/// {"address", "portal_group_tag"} (null when the value has no tag).
fn address(value: &str) -> Value {
    let (address, tag) = match value.rsplit_once(',') {
        Some((a, t)) => match t.parse::<u16>() {
            Ok(t) => (a, Some(t)),
            Err(_) => (value, None),
        },
        None => (value, None),
    };
    json!({ "address": address, "portal_group_tag": tag })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn what_a_target_sends_is_printed_escaped() {
        let t = DiscoveredTarget {
            name: "iqn.2026-11.test:t\u{1b}[2J\nforged".into(),
            addresses: vec!["127.0.0.1:3260,1\r".into()],
        };
        let lines = listing(&[t]);
        assert_eq!(lines.len(), 2);
        assert!(!lines.concat().chars().any(char::is_control), "{lines:?}");
        assert!(
            lines[0].starts_with("iqn.2026-11.test:t\\u{1b}[2J"),
            "{lines:?}"
        );
        assert_eq!(lines[1], "  127.0.0.1:3260,1\\r");
    }
}
