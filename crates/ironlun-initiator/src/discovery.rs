//! SendTargets discovery (RFC 7143 §11.10, Appendix C).

use crate::error::Result;
use crate::session::{Session, SessionOptions};

/// One target a portal reported, with its addresses
/// (`host:port,portal-group-tag`, RFC 7143 §13.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredTarget {
    pub name: String,
    pub addresses: Vec<String>,
}

/// Groups SendTargets pairs: each TargetName starts a target, the
/// TargetAddress keys after it belong to it.
pub fn group_send_targets(pairs: &[(String, String)]) -> Vec<DiscoveredTarget> {
    let mut out: Vec<DiscoveredTarget> = Vec::new();
    for (k, v) in pairs {
        match k.as_str() {
            "TargetName" => out.push(DiscoveredTarget {
                name: v.clone(),
                addresses: Vec::new(),
            }),
            "TargetAddress" => {
                if let Some(t) = out.last_mut() {
                    t.addresses.push(v.clone());
                }
            }
            _ => {}
        }
    }
    out
}

/// Logs in to a discovery session, asks `SendTargets=All`, logs out.
pub async fn discover(portal: &str, opts: &SessionOptions) -> Result<Vec<DiscoveredTarget>> {
    let mut opts = opts.clone();
    opts.reconnect.attempts = 0;
    let s = Session::connect(portal, None, &opts).await?;
    let pairs = s.text(&[("SendTargets", "All")]).await;
    let _ = s.logout().await;
    Ok(group_send_targets(&pairs?))
}
