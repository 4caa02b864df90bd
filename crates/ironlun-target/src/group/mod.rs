//! The gateway group (issue 37; docs/ha.md, "The gateway group"): several
//! `ironlun target` processes serving one target on the same RBD images,
//! one owner per LUN, failover with fencing, orderly failback.
//!
//! **Owns:** which gateway this process is (`--gateway`,
//! [`set_local_gateway`]), the group's decisions ([`state`]), the
//! heartbeat datagrams ([`wire`]), the task that runs one target's group
//! (`driver`: heartbeats over UDP, the lock calls on the blocking
//! pool, the ALUA states on the LUs) and what `ironlun admin` shows of it
//! ([`GroupView`]).
//!
//! **Must not know:** how the lock is kept (ironlun-backend's
//! `ImageLock`, librbd's exclusive lock in ironlun-rbd) or what an ALUA
//! state serves (ironlun-scsi).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

mod driver;
pub mod forward;
pub mod peer;
pub mod state;
pub mod wire;

pub use driver::{start, Running};

/// Which gateway this process is: kept with the configuration, which
/// reads it when it checks a `[target.group]`.
pub use ironlun_target_config::{local_gateway, set_local_gateway};

/// The groups running in this process, by target name.
fn running() -> &'static Mutex<BTreeMap<String, Arc<Running>>> {
    static RUNNING: OnceLock<Mutex<BTreeMap<String, Arc<Running>>>> = OnceLock::new();
    RUNNING.get_or_init(Default::default)
}

fn lock_running() -> std::sync::MutexGuard<'static, BTreeMap<String, Arc<Running>>> {
    running().lock().unwrap_or_else(|p| p.into_inner())
}

/// What `ironlun admin state` and `admin group` show of one target's
/// group.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GroupView {
    pub target: String,
    pub group: String,
    pub gateway: String,
    pub gateways: Vec<GatewayView>,
    pub luns: Vec<LunView>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GatewayView {
    pub name: String,
    pub tpg: u16,
    pub local: bool,
    pub health: String,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LunView {
    pub lun: u16,
    /// The owning gateway as this one knows it.
    pub owner: Option<String>,
    /// This gateway's role for the LUN (owner, standby, fenced, ...).
    pub role: String,
}

/// Every running group's view.
pub fn views() -> Vec<GroupView> {
    let list: Vec<Arc<Running>> = lock_running().values().cloned().collect();
    list.iter().map(|r| r.view()).collect()
}

/// The view of `target`'s group, if it has one here.
pub fn view(target: &str) -> Option<GroupView> {
    let r = lock_running().get(target).cloned()?;
    Some(r.view())
}

/// An orderly stop of every group running here (`Running::leave`):
/// owned LUNs released and the peers told, before the sessions are asked
/// to log out.
pub async fn leave_all() {
    let list: Vec<Arc<Running>> = lock_running().values().cloned().collect();
    for r in list {
        r.leave().await;
    }
}

/// How a login of `initiator` to target `target` (with group `group`,
/// if it has one) meets the peer rule ([`peer::peer_login`]), with the
/// key of the target's running group.
pub fn peer_login(
    target: &str,
    group: Option<&crate::config::GroupConfig>,
    initiator: &str,
) -> peer::PeerLogin {
    if !peer::is_peer_name(target, initiator) {
        return peer::PeerLogin::NotPeer;
    }
    let running = lock_running().get(target).cloned();
    let key = running.as_ref().and_then(|r| r.key());
    peer::peer_login(target, group, key.as_deref().map(Vec::as_slice), initiator)
}

/// `ironlun admin group rejoin TARGET`: every fenced LUN of the target
/// opens a fresh client and comes back as a standby. The LUNs it
/// started a rejoin for; `None` without a group for `target`.
pub fn rejoin(target: &str) -> Option<Vec<u16>> {
    let r = lock_running().get(target).cloned()?;
    Some(r.rejoin())
}
