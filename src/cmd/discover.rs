//! `ironlun discover`: the targets a portal reports (SendTargets).

use ironlun_initiator::discover;
use ironlun_initiator::url::{format_portal, parse_portal};
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
    for t in targets {
        outln!("{}", t.name);
        for addr in t.addresses {
            outln!("  {addr}");
        }
    }
    Ok(())
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
