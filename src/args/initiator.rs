//! Flags shared by every command that logs in to a target: the initiator
//! name, the operational keys to offer (RFC 7143 §13) and socket options.

use std::time::Duration;

use ironlun_initiator::{DigestKind, IscsiUrl, Offers, SessionOptions, TcpOptions};
use ironlun_proto::chap::{Credentials, InitiatorAuth};
use ironlun_units::parse_size;

use super::offers::OfferFlags;

#[derive(clap::Args, Clone, Debug)]
pub struct InitiatorArgs {
    /// Initiator name (IQN) to log in as.
    #[arg(long, value_name = "IQN", env = "IRONLUN_INITIATOR_NAME")]
    pub initiator_name: Option<String>,
    /// The operational keys to offer: a flag per row of the key table
    /// that has one (--header-digest, --max-burst ...).
    #[command(flatten)]
    pub offers: OfferFlags,
    /// Socket send and receive buffer size (the TCP window), e.g. 10MiB.
    #[arg(long, value_name = "SIZE")]
    pub tcp_window: Option<String>,
    /// Disable TCP_NODELAY (let Nagle batch small segments).
    #[arg(long)]
    pub tcp_nagle: bool,
    /// Re-arm TCP_QUICKACK after every read (no delayed ACKs).
    #[arg(long)]
    pub tcp_quickack: bool,
    /// Login timeout in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub login_timeout: u64,
    /// Reconnection attempts after a dropped connection (exponential
    /// back-off from 100 ms, at most 2 s apart); unfinished commands are
    /// re-issued on the reinstated session. 0 disables.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub reconnect: u32,
    /// CHAP credentials to log in with, USER:SECRET (RFC 7143 §12.1.3).
    /// A URL's user%password takes precedence. Prefer the environment
    /// variable: a flag shows in `ps`.
    #[arg(
        long,
        value_name = "USER:SECRET",
        env = "IRONLUN_INITIATOR_CHAP",
        hide_env_values = true
    )]
    pub chap: Option<String>,
    /// Mutual CHAP: the credentials the target must prove it has,
    /// USER:SECRET (needs CHAP credentials of our own).
    #[arg(
        long,
        value_name = "USER:SECRET",
        env = "IRONLUN_INITIATOR_MUTUAL_CHAP",
        hide_env_values = true
    )]
    pub mutual_chap: Option<String>,
}

fn size32(flag: &str, s: &str) -> Result<u32, String> {
    let n = parse_size(s).map_err(|e| format!("--{flag}: {e}"))?;
    u32::try_from(n).map_err(|_| format!("--{flag}: {s} is too large"))
}

impl InitiatorArgs {
    /// The session options for a login to `url`: the flags, with the
    /// URL's `user%password` as CHAP credentials when it has them (they
    /// take precedence over --chap).
    pub fn options_for(&self, url: &IscsiUrl) -> Result<SessionOptions, String> {
        let from_url = match &url.user {
            None => None,
            Some(user) => {
                let password = url.password.as_deref().ok_or_else(|| {
                    format!("{url}: a user without a password (write user%password)")
                })?;
                Some(
                    Credentials::parse(&format!("{user}:{password}"))
                        .map_err(|e| format!("{url}: {e}"))?,
                )
            }
        };
        let mut o = self.base_options()?;
        o.auth = self.auth(from_url)?;
        Ok(o)
    }

    /// The session options these flags describe.
    pub fn options(&self) -> Result<SessionOptions, String> {
        let mut o = self.base_options()?;
        o.auth = self.auth(None)?;
        Ok(o)
    }

    /// CHAP credentials: the URL's, else --chap; --mutual-chap adds the
    /// target's.
    fn auth(&self, from_url: Option<Credentials>) -> Result<Option<InitiatorAuth>, String> {
        let parse = |v: &Option<String>, flag: &str| {
            v.as_deref()
                .map(|s| Credentials::parse(s).map_err(|e| format!("{flag}: {e}")))
                .transpose()
        };
        let chap = match from_url {
            Some(c) => Some(c),
            None => parse(&self.chap, "--chap")?,
        };
        let mutual = parse(&self.mutual_chap, "--mutual-chap")?;
        match (chap, mutual) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(
                "--mutual-chap needs our own CHAP credentials too (--chap or user%password@ in the URL)"
                    .into(),
            ),
            (Some(credentials), mutual) => Ok(Some(InitiatorAuth {
                credentials,
                mutual,
            })),
        }
    }

    /// Everything but authentication.
    fn base_options(&self) -> Result<SessionOptions, String> {
        let mut o = SessionOptions::default();
        if let Some(n) = &self.initiator_name {
            // The rule every target applies at login (RFC 7143 §4.2.7):
            // a name it would refuse is refused here, before connecting.
            o.initiator_name =
                ironlun_proto::names::normalize(n).map_err(|e| format!("--initiator-name: {e}"))?;
        }
        // No digests unless asked for: the initiator's own default.
        let mut offers = Offers {
            header_digest: vec![DigestKind::None],
            data_digest: vec![DigestKind::None],
            ..Offers::default()
        };
        self.offers.apply(&mut offers)?;
        offers.validate()?;
        o.offers = offers;
        let window = match &self.tcp_window {
            Some(s) => Some(size32("tcp-window", s)?),
            None => None,
        };
        o.tcp = TcpOptions {
            nodelay: !self.tcp_nagle,
            send_buffer: window,
            recv_buffer: window,
            quickack: self.tcp_quickack,
        };
        o.login_timeout = Duration::from_secs(self.login_timeout.max(1));
        o.reconnect.attempts = self.reconnect;
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        initiator: InitiatorArgs,
    }

    fn args(flags: &[&str]) -> InitiatorArgs {
        Flags::try_parse_from(std::iter::once("t").chain(flags.iter().copied()))
            .unwrap()
            .initiator
    }

    const SECRET: &str = "twelve-bytes!";

    #[test]
    fn flags_become_offers_and_socket_options() {
        let o = args(&[]).options().unwrap();
        assert_eq!(o.offers.header_digest, vec![DigestKind::None]);
        assert!(o.tcp.nodelay && o.auth.is_none());
        let o = args(&[
            "--header-digest",
            "CRC32C,None",
            "--max-burst",
            "256KiB",
            "--first-burst",
            "64k",
            "--tcp-window",
            "1MiB",
            "--tcp-nagle",
            "--login-timeout",
            "0",
        ])
        .options()
        .unwrap();
        assert_eq!(
            o.offers.header_digest,
            vec![DigestKind::Crc32c, DigestKind::None]
        );
        assert_eq!(o.offers.max_burst_length, 256 << 10);
        assert_eq!(o.offers.first_burst_length, 64 << 10);
        assert_eq!((o.tcp.send_buffer, o.tcp.nodelay), (Some(1 << 20), false));
        assert_eq!(o.login_timeout, Duration::from_secs(1));
        let e = args(&["--max-burst", "8GiB"]).options().unwrap_err();
        assert!(e.starts_with("--max-burst: "), "{e}");
    }

    /// Each offer flag the key table makes: its value reaches the row's
    /// offer, and a bad value is refused naming the flag.
    #[test]
    fn every_offer_flag_sets_its_key() {
        use ironlun_proto::keys::{KeyId, Value};
        use ironlun_proto::offers::{OfferKind, OFFER_KEYS};
        let plain = args(&[]).options().unwrap().offers;
        let mut seen = 0;
        for (k, f) in OFFER_KEYS.iter().filter_map(|k| Some((k, k.flag?))) {
            let (text, want) = match k.kind {
                OfferKind::Digests => ("CRC32C,None", Value::Text("CRC32C,None".into())),
                OfferKind::Bool if (k.get)(&plain) == Value::Bool(true) => {
                    ("no", Value::Bool(false))
                }
                OfferKind::Bool => ("yes", Value::Bool(true)),
                OfferKind::U16 => ("3", Value::Number(3)),
                // Above the default FirstBurstLength, which must not exceed it.
                OfferKind::Bytes if k.id == KeyId::MAX_BURST_LENGTH => {
                    ("2MiB", Value::Number(2 << 20))
                }
                OfferKind::Bytes => ("64KiB", Value::Number(64 << 10)),
            };
            let flag = format!("--{}", f.long);
            let o = args(&[&flag, text]).options().unwrap().offers;
            assert_eq!((k.get)(&o), want, "{flag}");
            assert_ne!(o, plain, "{flag}");
            let e = match Flags::try_parse_from(["t", &flag, "bogus"]) {
                Ok(f) => f.initiator.options().unwrap_err(),
                Err(e) => e.to_string(),
            };
            assert!(e.contains(&flag), "{flag}: {e}");
            seen += 1;
        }
        assert_eq!(seen, 8);
    }

    #[test]
    fn a_urls_credentials_come_before_the_flags() {
        let chap = format!("flag:{SECRET}");
        let a = args(&["--chap", &chap]);
        let url: IscsiUrl = format!("iscsi://u%{SECRET}@127.0.0.1/iqn.2026-11.x:t/0")
            .parse()
            .unwrap();
        let auth = a.options_for(&url).unwrap().auth.unwrap();
        assert_eq!(auth.credentials.user, "u");
        let plain: IscsiUrl = "iscsi://127.0.0.1/iqn.2026-11.x:t/0".parse().unwrap();
        let auth = a.options_for(&plain).unwrap().auth.unwrap();
        assert_eq!(auth.credentials.user, "flag");
        let e = args(&["--mutual-chap", &chap]).options().unwrap_err();
        assert!(e.contains("needs our own CHAP credentials"), "{e}");
    }
}
