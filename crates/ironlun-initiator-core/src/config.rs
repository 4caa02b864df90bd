//! What a session core is opened with: the login, the limits of its
//! connections, and the policy for connections that end.

use std::time::Duration;

use ironlun_proto::initiator::{LoginConfig, SessionLimits};

/// How long a Logout may go unanswered before the connection is simply
/// closed (our own logouts and those the target asked for).
pub const LOGOUT_WAIT: Duration = Duration::from_secs(5);

/// Reconnection after a lost connection: attempts with exponential
/// back-off from `first_delay`, capped at `max_delay`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// 0 disables reconnection.
    pub attempts: u32,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            attempts: 5,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
        }
    }
}

impl ReconnectPolicy {
    /// The wait before attempt `n` (from 1): `first_delay` doubled per
    /// attempt, at most `max_delay`.
    pub fn delay(&self, n: u32) -> Duration {
        let doublings = n.saturating_sub(1).min(31);
        self.first_delay
            .checked_mul(1 << doublings)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }
}

/// Everything an [`InitiatorCore`](crate::InitiatorCore) is opened with.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// The login of every connection: the same ISID each time, so a
    /// login after a lost connection reinstates the session (RFC 7143
    /// §6.3.5).
    pub login: LoginConfig,
    pub limits: SessionLimits,
    /// From the request to connect to the end of the login.
    pub login_timeout: Duration,
    pub reconnect: ReconnectPolicy,
    /// When reconnection gives up, unfinished SCSI commands are handed
    /// back ([`InitiatorCore::poll_orphan`](crate::InitiatorCore::poll_orphan))
    /// for another path instead of failing.
    pub failover: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_up_to_its_cap() {
        let p = ReconnectPolicy {
            attempts: 40,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
        };
        let ms: Vec<u128> = (1..=7).map(|n| p.delay(n).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(p.delay(40), Duration::from_secs(2));
    }
}
