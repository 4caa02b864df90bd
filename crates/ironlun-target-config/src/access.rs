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

use crate::normalize_iscsi_name;

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
    /// Which one is decided by the entry's shape, and a bad entry gets
    /// the error of that kind: `10.0.0.0/33` is a bad network, not a bad
    /// name.
    pub fn allow(&mut self, entry: &str) -> Result<(), String> {
        if self.initiators.len() + self.networks.len() >= MAX_ACL_ENTRIES {
            return Err(format!("more than {MAX_ACL_ENTRIES} access entries"));
        }
        let entry = entry.trim();
        match EntryShape::of(entry) {
            EntryShape::Network => {
                let net = entry.parse::<IpNet>().map_err(|e| {
                    format!("allow entry '{entry}' is not a network: {e} (CIDR such as 10.0.0.0/8 or fd00::/8)")
                })?;
                self.networks.push(net.trunc());
            }
            EntryShape::Address => {
                let ip = entry
                    .parse::<IpAddr>()
                    .map_err(|e| format!("allow entry '{entry}' is not an IP address: {e}"))?;
                self.networks.push(IpNet::from(ip));
            }
            EntryShape::Name => {
                let name = normalize_iscsi_name(entry).map_err(|e| {
                    format!("allow entry is neither an address, a network (CIDR) nor an iSCSI name: {e}")
                })?;
                // Kept in the names' normal form (RFC 7143 §4.2.7.1, RFC 3722).
                self.initiators.push(name);
            }
        }
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

/// What an access entry is meant to be, by its shape alone.
enum EntryShape {
    /// Has a `/`: a network in CIDR form.
    Network,
    /// Digits and dots, or hex digits and colons: one IPv4 or IPv6
    /// address (an iSCSI name starts with a letter and has a `.` before
    /// any `:`).
    Address,
    /// Anything else: an iSCSI name, checked as one.
    Name,
}

impl EntryShape {
    fn of(entry: &str) -> EntryShape {
        let lower = entry.to_ascii_lowercase();
        if ["iqn.", "eui.", "naa."]
            .iter()
            .any(|p| lower.starts_with(p))
        {
            return EntryShape::Name;
        }
        if entry.contains('/') {
            return EntryShape::Network;
        }
        let v4 = !entry.is_empty() && entry.chars().all(|c| c.is_ascii_digit() || c == '.');
        let v6 = entry.contains(':')
            && entry
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
        if v4 || v6 {
            EntryShape::Address
        } else {
            EntryShape::Name
        }
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

    /// A bad entry gets the error of what it looks like.
    #[test]
    fn a_bad_entry_is_named_by_its_shape() {
        let err = |e: &str| Acl::default().allow(e).unwrap_err();
        for net in ["10.0.0.0/33", "fd00::/129", "10.0.0/8", "host/8"] {
            let e = err(net);
            assert!(e.contains("is not a network"), "{net}: {e}");
            assert!(!e.contains("iSCSI name"), "{net}: {e}");
        }
        for addr in ["10.0.0.256", "1.2.3", "fe80::1::2"] {
            let e = err(addr);
            assert!(e.contains("is not an IP address"), "{addr}: {e}");
        }
        for name in ["host1", "iqn.has space", "iqn.2026-11.test:a/b c"] {
            let e = err(name);
            assert!(e.contains("iSCSI name"), "{name}: {e}");
        }
        let mut a = Acl::default();
        for ok in [
            "10.0.0.0/8",
            "::1",
            "fd00::/8",
            "192.0.2.7",
            "iqn.2026-11.test:init",
        ] {
            a.allow(ok).unwrap();
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
