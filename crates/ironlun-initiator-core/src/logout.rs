//! Logouts (RFC 7143 §11.14, §11.15): the ones the target asks for with
//! an Asynchronous Message (§11.9.1, AsyncEvent 1), and when each ends
//! the connection. (The caller's own logout and the one of a session
//! being closed are sent from `core.rs`.)
//!
//! A logout the target asks for goes out once the tasks already sent
//! have ended, and at half of the target's Parameter3 at the latest
//! (the RFC's bound is Parameter3): the logout closes the session and
//! would end those tasks unfinished. No new request is taken meanwhile,
//! and none may follow the Logout on its connection (§11.14). After the
//! Logout Response the connection closes; the session then logs in again
//! (same ISID, as after a lost connection) unless it was closing.

use std::time::{Duration, Instant};

use crate::config::LOGOUT_WAIT;
use crate::core::{InitiatorCore, Link, Logout, Tok};
use crate::event::Event;
use ironlun_wire::{LogoutReason, LogoutResult};

impl<T> InitiatorCore<T> {
    /// The target asks for a logout within `secs` seconds.
    pub(crate) fn logout_requested(&mut self, secs: u16, now: Instant) {
        if self.logout != Logout::None || self.closing.is_some() {
            return; // one is on its way
        }
        self.logout = Logout::Requested {
            by: now + Duration::from_secs(u64::from(secs)) / 2,
        };
    }

    /// Sends the requested logout when it is due.
    pub(crate) fn send_requested_logout(&mut self, now: Instant) {
        let (Logout::Requested { by }, Link::Up(s)) = (self.logout, &mut self.link) else {
            return;
        };
        if s.tasks_in_use() > 0 && now < by {
            return;
        }
        // Close the session: the RFC lets either side close it.
        // A refusal means the session failed, and its Failed event has
        // already ended the connection.
        if s.submit_logout(LogoutReason::CLOSE_SESSION, 0, Tok::Logout)
            .is_ok()
        {
            self.logout = Logout::Sent {
                deadline: now + LOGOUT_WAIT,
            };
        }
    }

    /// A Logout Response arrived: the connection closes (the target
    /// closes its side, RFC 7143 §11.15).
    pub(crate) fn logged_out(&mut self, response: LogoutResult, now: Instant) {
        self.events.push_back(Event::LoggedOut { response });
        let why = if self.closing.is_some() {
            "the session logged out"
        } else {
            "logged out at the target's request"
        };
        self.drop_connection(why);
        self.lost_why = why.to_owned();
        self.after_connection(now);
    }

    /// A logout unanswered for [`LOGOUT_WAIT`]: the connection is closed
    /// without it.
    pub(crate) fn logout_overdue(&mut self, now: Instant) {
        if let (Logout::Sent { deadline }, Link::Up(_)) = (self.logout, &self.link) {
            if now >= deadline {
                let why = format!("no Logout Response within {} s", LOGOUT_WAIT.as_secs());
                self.lose(why, now);
            }
        }
    }
}
