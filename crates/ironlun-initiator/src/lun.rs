//! Opening one LUN: log in, then wait out the unit attention a new I_T
//! nexus starts with (SAM-5 §5.14), through one portal or through several
//! (multipath), so that the first command a caller sends meets a ready
//! LUN.

use crate::error::Result;
use crate::multipath::{Multipath, PathPolicy};
use crate::session::{Session, SessionOptions};

/// Logs in to `target` through `portal` and clears `lun`'s unit attention.
/// A LUN that still reports one after a few tries is left to the caller's
/// first command (which the session retries, see
/// `SessionLimits::unit_attention_retries`).
pub async fn open_lun(
    portal: &str,
    target: &str,
    lun: u16,
    opts: &SessionOptions,
) -> Result<Session> {
    let s = Session::connect(portal, Some(target), opts).await?;
    let _ = s.clear_unit_attention(lun).await;
    Ok(s)
}

/// Logs in to `target` through each of `portals` ([`Multipath::connect_lun`]:
/// path `i` with its own ISID), clears `lun`'s unit attention on every
/// path and reads its asymmetric access (ALUA) through each.
pub async fn open_lun_paths(
    portals: &[String],
    target: &str,
    lun: u16,
    opts: &SessionOptions,
    policy: PathPolicy,
) -> Result<Multipath> {
    Multipath::connect_lun(portals, target, lun, opts, policy.chooser()).await
}
