//! Who may log in to a target: access lists of initiator names and
//! source networks, and where CHAP credentials come from (a flag, an
//! environment variable or the configuration file; never the log).
//!
//! An access list with no entries lets everyone in. Names and networks
//! are separate conditions: with names listed, the InitiatorName must be
//! one of them; with networks listed, the connection must come from one
//! of them; with both, both must hold ("this initiator, from there").

use std::net::IpAddr;

use ipnet::IpNet;
use ironlun_proto::chap::{ChapPolicy, Credentials};

use crate::config::normalize_iscsi_name;

/// Initiators allowed to log in to one target (and to see it in
/// SendTargets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acl {
    initiators: Vec<String>,
    networks: Vec<IpNet>,
}

/// Entries per access list: a bound on configuration size, far above
/// any hand-written list.
pub const MAX_ACL_ENTRIES: usize = 4096;

impl Acl {
    /// Adds one `--allow` entry: an iSCSI name (`iqn.`, `eui.`, `naa.`),
    /// a network in CIDR form (`10.0.0.0/8`, `fd00::/8`) or one address.
    pub fn allow(&mut self, entry: &str) -> Result<(), String> {
        if self.initiators.len() + self.networks.len() >= MAX_ACL_ENTRIES {
            return Err(format!("more than {MAX_ACL_ENTRIES} access entries"));
        }
        let entry = entry.trim();
        if let Ok(net) = entry.parse::<IpNet>() {
            self.networks.push(net.trunc());
            return Ok(());
        }
        if let Ok(ip) = entry.parse::<IpAddr>() {
            self.networks.push(IpNet::from(ip));
            return Ok(());
        }
        let name = normalize_iscsi_name(entry).map_err(|e| {
            format!("allow entry is neither an address, a network (CIDR) nor an iSCSI name: {e}")
        })?;
        // Kept in the names' normal form (RFC 7143 §4.2.7.1, RFC 3722).
        self.initiators.push(name);
        Ok(())
    }

    /// Whether the name condition lets `initiator` in (no names listed,
    /// or it is one of them); networks are checked at login.
    pub fn admits_name(&self, initiator: &str) -> bool {
        self.initiators.is_empty() || self.initiators.contains(&initiator.to_ascii_lowercase())
    }

    pub fn is_open(&self) -> bool {
        self.initiators.is_empty() && self.networks.is_empty()
    }

    /// Whether `initiator` connecting from `peer` may log in; the error
    /// says which condition failed (for the log, not the wire).
    pub fn check(&self, initiator: &str, peer: IpAddr) -> Result<(), String> {
        let name = initiator.to_ascii_lowercase();
        if !self.initiators.is_empty() && !self.initiators.contains(&name) {
            return Err(format!("initiator {initiator} is not on the access list"));
        }
        // An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
        let peer = peer.to_canonical();
        if !self.networks.is_empty() && !self.networks.iter().any(|n| n.contains(&peer)) {
            return Err(format!("address {peer} is not in an allowed network"));
        }
        Ok(())
    }

    /// The entries in a form [`Acl::allow`] takes back: names (in their
    /// normal form), then networks (an address as a /32 or /128).
    pub fn entries(&self) -> Vec<String> {
        let mut parts: Vec<String> = self.initiators.clone();
        parts.extend(self.networks.iter().map(ToString::to_string));
        parts
    }

    /// Entries as written, for the startup log.
    pub fn describe(&self) -> String {
        if self.is_open() {
            return "everyone".to_owned();
        }
        self.entries().join(", ")
    }
}

/// Reads `USER:SECRET` from an environment variable.
pub fn credentials_from_env(var: &str) -> Result<Credentials, String> {
    let v = std::env::var(var).map_err(|_| format!("environment variable {var} is not set"))?;
    Credentials::parse(&v).map_err(|e| format!("environment variable {var}: {e}"))
}

/// Builds a CHAP policy from `USER:SECRET` strings (`mutual` needs
/// `chap`: a target proves itself only to initiators it authenticates).
pub fn chap_policy(
    chap: Option<Credentials>,
    mutual: Option<Credentials>,
    what: &str,
) -> Result<Option<ChapPolicy>, String> {
    match (chap, mutual) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(format!(
            "{what}: mutual CHAP credentials without CHAP credentials for initiators"
        )),
        (Some(initiator), target) => {
            if target
                .as_ref()
                .is_some_and(|t| t.secret == initiator.secret)
            {
                return Err(format!(
                    "{what}: the initiator and target CHAP secrets must differ (RFC 7143 §12.1.3)"
                ));
            }
            Ok(Some(ChapPolicy { initiator, target }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn empty_list_allows_everyone() {
        let a = Acl::default();
        assert!(a.is_open());
        assert!(a.check("iqn.x:any", ip("192.0.2.1")).is_ok());
    }

    #[test]
    fn names_and_networks_are_both_required() {
        let mut a = Acl::default();
        a.allow("iqn.2026-11.org.example:Host1").unwrap();
        a.allow("10.1.0.0/16").unwrap();
        a.allow("::1").unwrap();
        assert!(a
            .check("iqn.2026-11.org.example:host1", ip("10.1.2.3"))
            .is_ok());
        assert!(a.check("iqn.2026-11.org.example:host1", ip("::1")).is_ok());
        // Mapped IPv4 from a dual-stack listener.
        assert!(a
            .check("iqn.2026-11.org.example:host1", ip("::ffff:10.1.9.9"))
            .is_ok());
        assert!(a
            .check("iqn.2026-11.org.example:host2", ip("10.1.2.3"))
            .unwrap_err()
            .contains("access list"));
        assert!(a
            .check("iqn.2026-11.org.example:host1", ip("10.2.0.1"))
            .unwrap_err()
            .contains("network"));
    }

    #[test]
    fn networks_alone_and_bad_entries() {
        let mut a = Acl::default();
        a.allow("127.0.0.0/8").unwrap();
        assert!(a.check("iqn.anything:x", ip("127.0.0.2")).is_ok());
        assert!(a.check("iqn.anything:x", ip("192.0.2.1")).is_err());
        for bad in ["", "host1", "10.0.0.0/33", "iqn.has space"] {
            assert!(Acl::default().allow(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn policies_need_one_way_credentials_and_distinct_secrets() {
        let c = |s: &str| Some(Credentials::parse(s).unwrap());
        assert_eq!(chap_policy(None, None, "x"), Ok(None));
        assert!(chap_policy(None, c("t:target-secret"), "x").is_err());
        assert!(chap_policy(c("i:same-secret1"), c("t:same-secret1"), "x").is_err());
        let p = chap_policy(c("i:initiator-sec"), c("t:target-secret"), "x")
            .unwrap()
            .unwrap();
        assert_eq!(p.initiator.user, "i");
        assert_eq!(p.target.unwrap().user, "t");
    }
}
