//! Flags that put an emulated link (ironlun-netem's relay) between the
//! initiator and the target, shared by `bench`, `tcpbench` and `netem`.

use std::net::SocketAddr;
use std::time::Duration;

use ironlun_netem::{LinkSpec, Relay};
use ironlun_units::{parse_duration, parse_rate, parse_size};

#[derive(clap::Args, Clone, Debug)]
pub struct LinkArgs {
    /// Emulated round-trip time, split evenly between the directions
    /// (2ms, 10ms, 50ms).
    #[arg(long, value_name = "DURATION")]
    pub rtt: Option<String>,
    /// One-way delay initiator → target (instead of --rtt).
    #[arg(long, value_name = "DURATION")]
    pub delay_up: Option<String>,
    /// One-way delay target → initiator (instead of --rtt).
    #[arg(long, value_name = "DURATION")]
    pub delay_down: Option<String>,
    /// Emulated link rate per direction: 155Mbit, 100Mbit, 1Gbit, 50MB/s.
    #[arg(long, value_name = "RATE")]
    pub link_rate: Option<String>,
    /// Extra delay per chunk, uniform in [0, JITTER]; order is kept.
    #[arg(long, value_name = "DURATION")]
    pub jitter: Option<String>,
    /// TCP window carried over the emulated link (bytes per round trip;
    /// default: --tcp-window when given, else none, and the relay never
    /// limits).
    #[arg(long, value_name = "SIZE")]
    pub link_window: Option<String>,
    /// Keep the CPUs out of idle with lowest-priority spinners while the
    /// link runs (some virtual machines wake sleeping threads late; host
    /// CPU figures leave the spinners out). Costs the VM's CPU quota
    /// where the host caps it.
    #[arg(long)]
    pub keep_awake: bool,
}

fn duration(flag: &str, v: &Option<String>) -> Result<Option<Duration>, String> {
    v.as_deref()
        .map(|s| parse_duration(s).map_err(|e| format!("--{flag}: {e}")))
        .transpose()
}

impl LinkArgs {
    /// The link these flags describe; `None` when none was given (no
    /// relay). `rate` and `window` stand in for unset --link-rate and
    /// --link-window (netem's own --rate, the session's --tcp-window).
    pub fn spec(
        &self,
        rate: Option<&str>,
        window: Option<&str>,
    ) -> Result<Option<LinkSpec>, String> {
        let rtt = duration("rtt", &self.rtt)?;
        let up = duration("delay-up", &self.delay_up)?;
        let down = duration("delay-down", &self.delay_down)?;
        let jitter = duration("jitter", &self.jitter)?;
        let rate_text = self.link_rate.as_deref().or(rate);
        let window_text = self.link_window.as_deref().or(window);
        if rtt.is_none()
            && up.is_none()
            && down.is_none()
            && jitter.is_none()
            && rate_text.is_none()
            && self.link_window.is_none()
        {
            return Ok(None);
        }
        if rtt.is_some() && (up.is_some() || down.is_some()) {
            return Err("--rtt and --delay-up/--delay-down: give one or the other".into());
        }
        let mut spec = match rtt {
            Some(r) => LinkSpec::with_rtt(r),
            None => LinkSpec {
                delay_up: up.unwrap_or_default(),
                delay_down: down.unwrap_or_default(),
                ..LinkSpec::default()
            },
        };
        if spec.rtt() > Duration::from_secs(10) {
            return Err("the emulated round trip is limited to 10 s".into());
        }
        spec.jitter = jitter.unwrap_or_default();
        spec.rate_bps = match rate_text {
            Some(r) => parse_rate(r).map_err(|e| format!("link rate: {e}"))?,
            None => None,
        };
        spec.window = match window_text {
            Some(w) => {
                let n = parse_size(w).map_err(|e| format!("link window: {e}"))?;
                Some(
                    u32::try_from(n)
                        .ok()
                        .filter(|n| (1024..=(256 << 20)).contains(n))
                        .ok_or_else(|| format!("link window {w}: must be 1KiB..256MiB"))?,
                )
            }
            None => None,
        };
        spec.keep_awake = self.keep_awake && !spec.is_transparent();
        Ok(Some(spec))
    }
}

/// Starts a relay on a loopback port in front of `portal`.
pub fn relay_to(portal: &str, spec: &LinkSpec) -> Result<Relay, String> {
    let upstream: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(portal)
        .map_err(|e| format!("{portal}: {e}"))?
        .next()
        .ok_or_else(|| format!("{portal}: no address"))?;
    Relay::start_on_loopback(upstream, spec.clone()).map_err(|e| format!("netem relay: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        link: LinkArgs,
    }

    fn spec(
        flags: &[&str],
        rate: Option<&str>,
        window: Option<&str>,
    ) -> Result<Option<LinkSpec>, String> {
        let f = Flags::try_parse_from(std::iter::once("t").chain(flags.iter().copied())).unwrap();
        f.link.spec(rate, window)
    }

    #[test]
    fn no_flags_no_relay() {
        assert_eq!(spec(&[], None, None), Ok(None));
        // The session's TCP window alone asks for no relay.
        assert_eq!(spec(&[], None, Some("64KiB")), Ok(None));
    }

    #[test]
    fn flags_become_the_link() {
        let s = spec(
            &["--rtt", "10ms", "--link-rate", "100Mbit"],
            None,
            Some("64KiB"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.rtt(), Duration::from_millis(10));
        assert_eq!(s.rate_bps, Some(100_000_000));
        // --tcp-window stands in for --link-window.
        assert_eq!(s.window, Some(65536));
        let s = spec(
            &["--delay-up", "1ms", "--link-window", "1MiB"],
            Some("1Gbit"),
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (s.delay_up, s.delay_down),
            (Duration::from_millis(1), Duration::ZERO)
        );
        assert_eq!((s.rate_bps, s.window), (Some(1_000_000_000), Some(1 << 20)));
        assert!(!s.keep_awake);
    }

    #[test]
    fn bad_links_name_the_flag() {
        let e = spec(&["--rtt", "2ms", "--delay-up", "1ms"], None, None).unwrap_err();
        assert!(e.contains("--rtt and --delay-up"), "{e}");
        let e = spec(&["--rtt", "11s"], None, None).unwrap_err();
        assert!(e.contains("10 s"), "{e}");
        let e = spec(&["--jitter", "soon"], None, None).unwrap_err();
        assert!(e.starts_with("--jitter: "), "{e}");
        let e = spec(&["--link-rate", "fast"], None, None).unwrap_err();
        assert!(e.starts_with("link rate: "), "{e}");
        let e = spec(&["--link-window", "512"], None, None).unwrap_err();
        assert!(e.contains("1KiB..256MiB"), "{e}");
    }
}
