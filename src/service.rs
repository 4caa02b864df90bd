//! Running under systemd as a `Type=notify` service (sd_notify(3),
//! dist/ironlun.service): READY=1 once the portals listen, WATCHDOG=1
//! while the serving loop runs, STOPPING=1 when shutdown begins, each
//! with a STATUS= line for `systemctl status`. Without NOTIFY_SOCKET in
//! the environment (started by hand, by a test, by another supervisor)
//! nothing is sent and no timer runs.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sd_notify::NotifyState;

/// How often the STATUS= line is brought up to date when no watchdog
/// ping comes sooner.
const STATUS_EVERY: Duration = Duration::from_secs(5);

/// Wraps the future that stops the daemon (SIGTERM or SIGINT) so that
/// systemd hears about the daemon's life from the serving loop itself.
///
/// `Server::run` polls its stop future for the first time in its serving
/// loop: after every portal listens (`Server::bind` did that) and after
/// SIGHUP has its handler, so a `systemctl reload` right after start
/// cannot end the process by SIGHUP's default action. That first poll is
/// when READY=1 goes out. While the loop runs it polls this future on
/// every wakeup, so the watchdog timer lives in it: if the loop stops
/// turning, WATCHDOG=1 stops and systemd restarts the service. On each
/// tick `status` gives the STATUS= line, sent when it changed (portals,
/// targets and sessions come and go). When the stop signal arrives
/// STOPPING=1 goes out before the loop ends.
pub async fn supervise(stop: impl Future<Output = ()>, status: impl Fn() -> String) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return stop.await;
    }
    let mut last = status();
    notify(&[NotifyState::Ready, NotifyState::Status(&last)]);
    let watchdog = watchdog_interval();
    let mut ticks = tokio::time::interval(watchdog.map_or(STATUS_EVERY, |w| w.min(STATUS_EVERY)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            _ = ticks.tick() => {
                if watchdog.is_some() {
                    notify(&[NotifyState::Watchdog]);
                }
                let now = status();
                if now != last {
                    notify(&[NotifyState::Status(&now)]);
                    last = now;
                }
            }
        }
    }
    notify(&[
        NotifyState::Stopping,
        NotifyState::Status("stopping: initiators are asked to log out"),
    ]);
}

/// The STATUS= line while serving: the portals first, then what is
/// served and to how many sessions.
pub fn serving(portals: &[SocketAddr], targets: usize, sessions: usize) -> String {
    let list: Vec<String> = portals.iter().map(SocketAddr::to_string).collect();
    format!(
        "serving on {}; {targets} target(s), {sessions} session(s)",
        list.join(" ")
    )
}

/// How often to ping: half the interval systemd gives in WATCHDOG_USEC
/// (sd_watchdog_enabled(3) recommends pinging at half of it), when
/// WATCHDOG_PID names this process; `None` when no watchdog is set.
fn watchdog_interval() -> Option<Duration> {
    let mut usec = 0;
    if !sd_notify::watchdog_enabled(false, &mut usec) {
        return None;
    }
    ping_every(usec)
}

/// Half of a watchdog interval of `usec` microseconds; none for 0.
fn ping_every(usec: u64) -> Option<Duration> {
    (usec > 0).then(|| Duration::from_micros(usec / 2).max(Duration::from_micros(1)))
}

/// One notification. A failure (NOTIFY_SOCKET names a socket that is not
/// there) is logged once, not fatal: the daemon serves either way, and
/// systemd, if it is waiting, times the start out on its own.
fn notify(states: &[NotifyState]) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if let Err(e) = sd_notify::notify(false, states) {
        if !WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!("cannot notify the service manager (NOTIFY_SOCKET): {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_is_pinged_at_half_its_interval() {
        assert_eq!(ping_every(30_000_000), Some(Duration::from_secs(15)));
        assert_eq!(ping_every(400_000), Some(Duration::from_millis(200)));
        assert_eq!(ping_every(1), Some(Duration::from_micros(1)));
        assert_eq!(ping_every(0), None);
    }

    #[test]
    fn the_status_names_every_portal() {
        let portals = [
            SocketAddr::from(([127, 0, 0, 1], 3260)),
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 3260)),
        ];
        assert_eq!(
            serving(&portals, 2, 5),
            "serving on 127.0.0.1:3260 [::1]:3260; 2 target(s), 5 session(s)"
        );
    }
}
