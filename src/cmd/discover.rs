//! `ironlun discover`: the targets a portal reports (SendTargets).

use ironlun_initiator::discover;
use ironlun_initiator::url::{format_portal, parse_portal};

use crate::args::InitiatorArgs;

#[derive(clap::Args)]
pub struct DiscoverArgs {
    /// Portal to ask, HOST[:PORT] (IPv6 as [::1]:3260).
    pub portal: String,
    #[command(flatten)]
    pub initiator: InitiatorArgs,
}

pub async fn run(a: DiscoverArgs) -> Result<(), String> {
    let portal = match parse_portal(&a.portal) {
        Some((h, p)) => format_portal(&h, p),
        None => return Err(format!("bad portal '{}' (HOST[:PORT])", a.portal)),
    };
    let targets = discover(&portal, &a.initiator.options()?)
        .await
        .map_err(|e| e.to_string())?;
    for t in targets {
        outln!("{}", t.name);
        for addr in t.addresses {
            outln!("  {addr}");
        }
    }
    Ok(())
}
