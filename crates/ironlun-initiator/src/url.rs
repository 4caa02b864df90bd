//! iSCSI URLs in libiscsi's form:
//! `iscsi://[user[%password]@]host[:port]/target-iqn/lun`. IPv6 hosts go
//! in brackets (`iscsi://[::1]:3260/iqn.../0`).

use std::fmt;
use std::str::FromStr;

/// The well-known iSCSI port, used when a portal names none (RFC 7143 §13.8).
pub const DEFAULT_PORT: u16 = 3260;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IscsiUrl {
    pub user: Option<String>,
    pub password: Option<String>,
    /// Host name or address; IPv6 without brackets.
    pub host: String,
    pub port: u16,
    pub target: String,
    pub lun: u16,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad iSCSI URL '{url}': {why} (expected iscsi://[user[%password]@]host[:port]/target-iqn/lun)"
)]
pub struct UrlError {
    pub url: String,
    pub why: &'static str,
}

impl IscsiUrl {
    /// `host:port`, with brackets around an IPv6 address.
    pub fn portal(&self) -> String {
        format_portal(&self.host, self.port)
    }
}

/// `host:port`, bracketing IPv6 addresses.
pub fn format_portal(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Splits `host[:port]` (IPv6 in brackets) into host and port.
pub fn parse_portal(s: &str) -> Option<(String, u16)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => DEFAULT_PORT,
            None => return None,
        };
        return Some((host.to_owned(), port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h.to_owned(), p.parse().ok()?)),
        Some(_) => None,
        None if !s.is_empty() => Some((s.to_owned(), DEFAULT_PORT)),
        None => None,
    }
}

impl FromStr for IscsiUrl {
    type Err = UrlError;

    fn from_str(url: &str) -> Result<Self, UrlError> {
        let err = |why| UrlError {
            url: url.to_owned(),
            why,
        };
        let rest = url
            .strip_prefix("iscsi://")
            .ok_or_else(|| err("it must start with iscsi://"))?;
        let (authority, path) = rest
            .split_once('/')
            .ok_or_else(|| err("no /target-iqn/lun after the host"))?;
        let (creds, hostport) = match authority.rsplit_once('@') {
            Some((c, h)) => (Some(c), h),
            None => (None, authority),
        };
        let (user, password) = match creds {
            Some(c) => match c.split_once('%') {
                Some((u, p)) => (Some(u.to_owned()), Some(p.to_owned())),
                None => (Some(c.to_owned()), None),
            },
            None => (None, None),
        };
        let (host, port) = parse_portal(hostport).ok_or_else(|| err("bad host or port"))?;
        let (target, lun) = path
            .rsplit_once('/')
            .ok_or_else(|| err("no /lun after the target name"))?;
        if target.is_empty() {
            return Err(err("empty target name"));
        }
        let lun = lun
            .parse()
            .map_err(|_| err("the LUN must be a number from 0 to 65535"))?;
        Ok(IscsiUrl {
            user,
            password,
            host,
            port,
            target: target.to_owned(),
            lun,
        })
    }
}

impl fmt::Display for IscsiUrl {
    /// The URL without its password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "iscsi://")?;
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        write!(f, "{}/{}/{}", self.portal(), self.target, self.lun)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_libiscsi_urls() {
        let u: IscsiUrl = "iscsi://127.0.0.1:3261/iqn.2026-11.x:disk/3"
            .parse()
            .unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.target.as_str(), u.lun),
            ("127.0.0.1", 3261, "iqn.2026-11.x:disk", 3)
        );
        let u: IscsiUrl = "iscsi://bob%s3cret@[::1]/iqn.x:y/0".parse().unwrap();
        assert_eq!(u.user.as_deref(), Some("bob"));
        assert_eq!(u.password.as_deref(), Some("s3cret"));
        assert_eq!((u.host.as_str(), u.port), ("::1", 3260));
        assert_eq!(u.to_string(), "iscsi://bob@[::1]:3260/iqn.x:y/0");
        for bad in [
            "http://h/t/0",
            "iscsi://h/t",
            "iscsi://h//0",
            "iscsi://h/t/x",
            "iscsi://h:99999/t/0",
            "iscsi://[::1/t/0",
        ] {
            assert!(bad.parse::<IscsiUrl>().is_err(), "{bad}");
        }
    }
}
