//! Peer sessions between the gateways of a group (docs/ha.md,
//! "Forwarding"): the iSCSI sessions one gateway opens to another with
//! ironlun's own initiator, to hand it the writes it cannot do itself.
//!
//! **Owns:** a peer's initiator name (`<target name>.gateway.<gateway>`,
//! lower-cased) and CHAP secret (hex HMAC-SHA256 of the group key over
//! `"ironlun forward " + gateway`), the login rule for such names
//! ([`peer_login`]: CHAP with that secret, whatever the target's own
//! CHAP, and refused without a group key, so that no login can claim to
//! be a peer), and the sessions themselves ([`Peers`]: opened lazily,
//! reused, opened again once lost).
//!
//! **Must not know:** which commands are forwarded (ironlun-scsi's
//! `forward` table) or who owns a LUN (`state`).

use std::time::Duration;

use hmac::{Hmac, Mac};
use ironlun_initiator::{Session, SessionLimits, SessionOptions};
use ironlun_initiator_core::ReconnectPolicy;
use ironlun_proto::chap::{ChapPolicy, Credentials, InitiatorAuth, Secret};
use sha2::Sha256;
use tokio::sync::Mutex as AsyncMutex;

use crate::config::GroupConfig;

/// What a peer's secret is derived with, before the gateway's name.
const SECRET_LABEL: &str = "ironlun forward ";

/// How long opening a peer session may take.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The ISID of every peer session (one per gateway pair: a second login
/// reinstates the first, RFC 7143 §6.3.5, which is what a reconnect
/// wants).
const PEER_ISID: [u8; 6] = [0x80, 0x1e, 0x0a, 0x1f, 0x00, 0x01];

/// The initiator name gateway `gateway` logs in to its peers with.
pub fn peer_name(target: &str, gateway: &str) -> String {
    format!("{target}.gateway.{gateway}").to_ascii_lowercase()
}

/// What every peer name of `target` starts with.
fn peer_prefix(target: &str) -> String {
    format!("{target}.gateway.").to_ascii_lowercase()
}

/// Whether `initiator` (a name, or an initiator port `<name>,i,0x<ISID>`)
/// is a peer name of `target`: a login under such a name got in only
/// with the peer CHAP ([`peer_login`]).
pub fn is_peer_name(target: &str, initiator: &str) -> bool {
    let name = initiator.split(',').next().unwrap_or(initiator);
    name.to_ascii_lowercase().starts_with(&peer_prefix(target))
}

/// Gateway `gateway`'s CHAP secret: hex HMAC-SHA256(`key`, "ironlun
/// forward " + gateway), 64 characters.
pub fn peer_secret(key: &[u8], gateway: &str) -> String {
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    m.update(SECRET_LABEL.as_bytes());
    m.update(gateway.as_bytes());
    m.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How a login under some initiator name meets the peer rule.
#[derive(Debug, PartialEq, Eq)]
pub enum PeerLogin {
    /// Not a peer name: the target's own rules apply.
    NotPeer,
    /// A peer name: it must pass this CHAP.
    Chap(ChapPolicy),
    /// A peer name this target cannot authenticate (no group, no key, no
    /// such gateway): refused, whatever the target's own CHAP.
    Refused(String),
}

/// The rule for a login of `initiator` to `target`, whose group is
/// `group` (if any) with key `key` (if any).
pub fn peer_login(
    target: &str,
    group: Option<&GroupConfig>,
    key: Option<&[u8]>,
    initiator: &str,
) -> PeerLogin {
    if !is_peer_name(target, initiator) {
        return PeerLogin::NotPeer;
    }
    let Some(group) = group else {
        return PeerLogin::Refused(format!(
            "{initiator} is a gateway's name and target {target} has no gateway group"
        ));
    };
    let Some(key) = key else {
        return PeerLogin::Refused(format!(
            "{initiator} is a gateway's name and group {} has no key_file to authenticate it",
            group.name
        ));
    };
    let lower = initiator.to_ascii_lowercase();
    let Some(g) = group
        .gateways
        .iter()
        .find(|g| peer_name(target, &g.name) == lower)
    else {
        return PeerLogin::Refused(format!(
            "{initiator} names no gateway of group {}",
            group.name
        ));
    };
    match credentials(&lower, key, &g.name) {
        Some(initiator) => PeerLogin::Chap(ChapPolicy {
            initiator,
            target: None,
        }),
        None => PeerLogin::Refused("the group key gives no CHAP secret".into()),
    }
}

fn credentials(user: &str, key: &[u8], gateway: &str) -> Option<Credentials> {
    Some(Credentials {
        user: user.to_owned(),
        secret: Secret::new(peer_secret(key, gateway).as_bytes()).ok()?,
    })
}

/// This gateway's sessions to its peers, one per gateway (by index in
/// the group's list), each opened when first needed and again after it
/// was lost.
pub struct Peers {
    target: String,
    /// Where each gateway listens (`None` for this one).
    portals: Vec<Option<String>>,
    options: Option<SessionOptions>,
    sessions: Vec<AsyncMutex<Option<Session>>>,
}

impl Peers {
    /// The peers of gateway `cfg.local` of `target`'s group; without a
    /// key there are none to open.
    pub fn new(target: &str, cfg: &GroupConfig, key: Option<&[u8]>) -> Peers {
        let me = &cfg.local().name;
        let options = key.and_then(|k| {
            let name = peer_name(target, me);
            let credentials = credentials(&name, k, me)?;
            Some(SessionOptions {
                initiator_name: name,
                login_timeout: LOGIN_TIMEOUT,
                // A lost session is opened again by the next command
                // (`session`), not behind its back.
                reconnect: ReconnectPolicy {
                    attempts: 0,
                    ..ReconnectPolicy::default()
                },
                // The peer nexus sees no unit attention; one that comes
                // anyway is passed on, not hidden.
                limits: SessionLimits {
                    unit_attention_retries: 0,
                    ..SessionLimits::default()
                },
                isid: PEER_ISID,
                auth: Some(InitiatorAuth {
                    credentials,
                    mutual: None,
                }),
                ..SessionOptions::default()
            })
        });
        let portals = cfg
            .gateways
            .iter()
            .enumerate()
            .map(|(i, g)| (i != cfg.local).then(|| g.portal.to_string()))
            .collect();
        Peers {
            target: target.to_owned(),
            portals,
            options,
            sessions: cfg.gateways.iter().map(|_| AsyncMutex::new(None)).collect(),
        }
    }

    /// Whether there is a key to open sessions with.
    pub fn enabled(&self) -> bool {
        self.options.is_some()
    }

    /// The session to gateway `i`: the open one, else a new one.
    pub async fn session(&self, i: usize) -> Result<Session, String> {
        let (Some(Some(portal)), Some(slot), Some(opts)) =
            (self.portals.get(i), self.sessions.get(i), &self.options)
        else {
            return Err(format!("no peer session to gateway {i}"));
        };
        let mut slot = slot.lock().await;
        if let Some(s) = slot.as_ref().filter(|s| s.is_connected()) {
            return Ok(s.clone());
        }
        *slot = None;
        let s = tokio::time::timeout(
            LOGIN_TIMEOUT,
            Session::connect(portal, Some(&self.target), opts),
        )
        .await
        .map_err(|_| format!("login to {portal} timed out"))?
        .map_err(|e| format!("login to {portal}: {e}"))?;
        *slot = Some(s.clone());
        Ok(s)
    }

    /// Every peer session open now.
    pub async fn open(&self) -> Vec<Session> {
        let mut out = Vec::new();
        for slot in &self.sessions {
            if let Some(s) = slot.lock().await.as_ref().filter(|s| s.is_connected()) {
                out.push(s.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GatewayConfig;
    use ironlun_scsi::AccessState;

    const T: &str = "iqn.2026-11.test:t";

    fn group() -> GroupConfig {
        let gw = |name: &str, n: u8| GatewayConfig {
            name: name.into(),
            portal: format!("127.0.0.{n}:3260").parse().unwrap(),
            tpg: u16::from(n),
            heartbeat: format!("127.0.0.{n}:3270").parse().unwrap(),
        };
        GroupConfig {
            name: "ha1".into(),
            gateways: vec![gw("gw1", 1), gw("gw2", 2)],
            local: 0,
            this: gw("gw1", 1),
            preferred: None,
            others: AccessState::ActiveNonOptimized,
            interval: Duration::from_millis(500),
            dead_after: Duration::from_secs(3),
            failback: true,
            key_file: Some("/k".into()),
            transition_time: 10,
        }
    }

    #[test]
    fn names_and_secrets_derive_from_the_target_gateway_and_key() {
        assert_eq!(
            peer_name("IQN.2026-11.test:T", "GW1"),
            "iqn.2026-11.test:t.gateway.gw1"
        );
        let s = peer_secret(b"group key", "gw1");
        assert_eq!(s.len(), 64);
        assert!(s.bytes().all(|b| b.is_ascii_hexdigit()));
        // HMAC-SHA256(key = "group key", "ironlun forward gw1"), as
        // `printf 'ironlun forward gw1' | openssl dgst -sha256 -hmac 'group key'`
        // prints it.
        assert_eq!(
            s,
            "d4115e7d7a564ffa177568c77d805d29a8f2d11ae86a57e26856f1552120b5db"
        );
        assert_ne!(s, peer_secret(b"group key", "gw2"));
        assert_ne!(s, peer_secret(b"other key", "gw1"));
        assert_eq!(s, peer_secret(b"group key", "gw1"));
    }

    #[test]
    fn a_peer_name_logs_in_only_with_the_peer_chap() {
        let g = group();
        let key: &[u8] = b"group key";
        assert_eq!(
            peer_login(T, Some(&g), Some(key), "iqn.2026-11.test:init"),
            PeerLogin::NotPeer
        );
        let name = peer_name(T, "gw2");
        let PeerLogin::Chap(p) = peer_login(T, Some(&g), Some(key), &name) else {
            panic!("a peer name with a key gets the peer CHAP");
        };
        assert_eq!(p.initiator.user, name);
        assert_eq!(p.target, None);
        let want = Secret::new(peer_secret(key, "gw2").as_bytes()).unwrap();
        assert_eq!(p.initiator.secret, want);
        // Upper case is the same name (RFC 3722 folds case).
        assert!(matches!(
            peer_login(T, Some(&g), Some(key), &name.to_ascii_uppercase()),
            PeerLogin::Chap(_)
        ));
        for (group, key, who) in [
            (Some(&g), None, name.clone()),
            (None, Some(key), name.clone()),
            (Some(&g), Some(key), peer_name(T, "gw9")),
        ] {
            assert!(
                matches!(peer_login(T, group, key, &who), PeerLogin::Refused(_)),
                "{who} with group {} key {}",
                group.is_some(),
                key.is_some()
            );
        }
        assert!(is_peer_name(T, &format!("{name},i,0x801e0a1f0001")));
        assert!(!is_peer_name(T, "iqn.2026-11.test:init,i,0x801e0a1f0001"));
        assert!(!is_peer_name("iqn.2026-11.test:other", &name));
    }
}
