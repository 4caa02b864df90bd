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
