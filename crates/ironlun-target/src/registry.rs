//! Targets and sessions: what the login state machine asks of the daemon
//! (target lookup, discovery, TSIH assignment, session reinstatement) and
//! what SendTargets reports.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ironlun_proto::login::{LoginContext, LoginStatus, NewSession, TargetInfo};
use ironlun_proto::params::Offers;
use ironlun_proto::target::{Directory, SendTargetsQuery, TargetListing};
use ironlun_scsi::{LunMap, NexusId};
use tokio::sync::Notify;

use crate::config::{Limits, TargetConfig};

/// A configured target and its logical units.
pub struct Target {
    pub cfg: TargetConfig,
    pub luns: LunMap,
}

struct SessionEntry {
    initiator: String,
    isid: [u8; 6],
    target: Option<String>,
    nexus: NexusId,
    /// Wakes the session's connection when a reinstatement replaces it.
    kill: Arc<Notify>,
}

#[derive(Default)]
struct SessionTable {
    by_tsih: HashMap<u16, SessionEntry>,
    next_tsih: u16,
}

/// Everything connections share.
pub struct Registry {
    pub targets: Vec<Arc<Target>>,
    pub limits: Limits,
    pub portals: Vec<SocketAddr>,
    sessions: Mutex<SessionTable>,
    next_nexus: AtomicU64,
}

/// A session created by a login; dropping it removes the session and its
/// I_T nexus from the logical units.
pub struct SessionHandle {
    registry: Arc<Registry>,
    pub tsih: u16,
    pub nexus: NexusId,
    pub target: Option<Arc<Target>>,
    pub kill: Arc<Notify>,
    /// This session replaced an older one with the same ISID.
    pub reinstated: bool,
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        let mut t = self.registry.table();
        if t.by_tsih
            .get(&self.tsih)
            .is_some_and(|e| e.nexus == self.nexus)
        {
            t.by_tsih.remove(&self.tsih);
        }
        drop(t);
        if let Some(target) = &self.target {
            target.luns.detach_nexus(self.nexus);
        }
    }
}

impl Registry {
    pub fn new(
        targets: Vec<Arc<Target>>,
        limits: Limits,
        portals: Vec<SocketAddr>,
    ) -> Arc<Registry> {
        Arc::new(Registry {
            targets,
            limits,
            portals,
            sessions: Mutex::new(SessionTable {
                by_tsih: HashMap::new(),
                next_tsih: 1,
            }),
            next_nexus: AtomicU64::new(1),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, SessionTable> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// iSCSI names compare case-insensitively (RFC 7143 §4.2.7.1, names
    /// are normalised to lower case).
    pub fn find(&self, name: &str) -> Option<&Arc<Target>> {
        self.targets
            .iter()
            .find(|t| t.cfg.name.eq_ignore_ascii_case(name))
    }

    fn info(t: &Target) -> TargetInfo {
        TargetInfo {
            name: t.cfg.name.clone(),
            alias: t.cfg.alias.clone(),
            portal_group_tag: t.cfg.portal_group_tag,
            offers: t.cfg.offers.clone(),
            queue_depth: t.cfg.queue_depth,
        }
    }
}

/// One login's view of the registry.
pub struct LoginCtx {
    pub registry: Arc<Registry>,
    /// Set when the login created a session.
    pub created: Option<SessionHandle>,
}

impl LoginContext for LoginCtx {
    fn find_target(
        &self,
        target_name: &str,
        _initiator_name: &str,
    ) -> Result<TargetInfo, LoginStatus> {
        self.registry
            .find(target_name)
            .map(|t| Registry::info(t))
            .ok_or(LoginStatus::NOT_FOUND)
    }

    fn discovery_offers(&self) -> Result<Offers, LoginStatus> {
        Ok(Offers::default())
    }

    fn create_session(&mut self, s: &NewSession) -> Result<u16, LoginStatus> {
        let target = match &s.target_name {
            Some(n) => Some(
                self.registry
                    .find(n)
                    .cloned()
                    .ok_or(LoginStatus::NOT_FOUND)?,
            ),
            None => None,
        };
        let target_name = target.as_ref().map(|t| t.cfg.name.clone());
        let mut table = self.registry.table();
        // Session reinstatement (RFC 7143 §6.3.5): a leading login with
        // TSIH 0 and the ISID of a live session to the same target
        // replaces that session.
        let old = table
            .by_tsih
            .iter()
            .find(|(_, e)| {
                e.initiator == s.initiator_name && e.isid == s.isid && e.target == target_name
            })
            .map(|(tsih, _)| *tsih);
        let reinstated = old.is_some();
        if let Some(old) = old {
            if let Some(e) = table.by_tsih.remove(&old) {
                e.kill.notify_one();
            }
        }
        if table.by_tsih.len() >= self.registry.limits.max_sessions {
            return Err(LoginStatus::OUT_OF_RESOURCES);
        }
        // TSIH: non-zero and unused (RFC 7143 §11.12.6).
        let mut tsih = table.next_tsih;
        for _ in 0..=u16::MAX {
            if tsih != 0 && !table.by_tsih.contains_key(&tsih) {
                break;
            }
            tsih = tsih.wrapping_add(1);
        }
        table.next_tsih = tsih.wrapping_add(1);
        let nexus = NexusId(self.registry.next_nexus.fetch_add(1, Ordering::Relaxed));
        let kill = Arc::new(Notify::new());
        table.by_tsih.insert(
            tsih,
            SessionEntry {
                initiator: s.initiator_name.clone(),
                isid: s.isid,
                target: target_name,
                nexus,
                kill: kill.clone(),
            },
        );
        drop(table);
        self.created = Some(SessionHandle {
            registry: self.registry.clone(),
            tsih,
            nexus,
            target,
            kill,
            reinstated,
        });
        Ok(tsih)
    }
}

/// SendTargets answers for one connection: portals bound to a wildcard
/// address are reported with the address the initiator reached us on.
pub struct PortalDirectory {
    pub registry: Arc<Registry>,
    pub local: SocketAddr,
}

impl PortalDirectory {
    fn addresses(&self, tpgt: u16) -> Vec<String> {
        let mut out: Vec<String> = self
            .registry
            .portals
            .iter()
            .map(|p| {
                let addr = if p.ip().is_unspecified() {
                    SocketAddr::new(self.local.ip(), p.port())
                } else {
                    *p
                };
                // RFC 7143 §13.8: domainname[:port][,portal-group-tag],
                // IPv6 literals in brackets.
                format!("{addr},{tpgt}")
            })
            .collect();
        out.dedup();
        out
    }
}

impl Directory for PortalDirectory {
    fn send_targets(&self, _initiator: &str, query: SendTargetsQuery<'_>) -> Vec<TargetListing> {
        self.registry
            .targets
            .iter()
            .filter(|t| match query {
                SendTargetsQuery::All => true,
                SendTargetsQuery::Named(n) => t.cfg.name.eq_ignore_ascii_case(n),
            })
            .map(|t| TargetListing {
                name: t.cfg.name.clone(),
                addresses: self.addresses(t.cfg.portal_group_tag),
            })
            .collect()
    }
}
