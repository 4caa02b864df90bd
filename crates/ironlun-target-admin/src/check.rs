//! `ironlun target --check`: a configuration opened and validated
//! without serving, as `nginx -t` does. What would stop the daemon from
//! starting, or stop a part of it from working once started, is found
//! without binding a port, without creating, growing or writing a file,
//! and without taking a store's lock: `--check` is often run beside the
//! daemon it checks the configuration of, which goes on undisturbed.
//!
//! Every problem found is reported, not only the first, each as a
//! [`Finding`]:
//! - `listeners`: two listeners on one address (portals, statistics,
//!   the HTTP management API), and an address something already
//!   listens on;
//! - `places`: the state directory, the management socket's directory,
//!   `admin_save_dir` and the management API's token file;
//! - `stores`: each LUN's file, device or RBD configuration files, as
//!   opening them would find them (`ironlun_backend::probe`);
//! - `secrets`: CHAP secrets used in both directions (RFC 7143 §9.2.1).
//!
//! What the configuration parser already refuses (syntax, values, CHAP
//! secrets' lengths, a world-readable file with secrets) never gets
//! here: [`ironlun_target_config::Config::load`] reports the first such mistake.

use std::fmt;

use ironlun_target_config::Config;

mod listeners;
mod places;
mod secrets;
mod stores;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The daemon would not start, or a part of what is configured
    /// would not work: `--check` fails.
    Error,
    /// Likely a mistake, or a start that may fail (a port in use).
    Warning,
    /// What starting would do (create a file, grow one) or find (a store
    /// a running daemon serves).
    Note,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        })
    }
}

/// One thing `--check` found: what it is about (`target NAME LUN 0`,
/// `state_dir /var/lib/ironlun`) and what is the matter with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub subject: String,
    pub message: String,
}

impl Finding {
    fn new(severity: Severity, subject: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            severity,
            subject: subject.into(),
            message: message.into(),
        }
    }

    pub(crate) fn error(subject: impl Into<String>, message: impl Into<String>) -> Self {
        Finding::new(Severity::Error, subject, message)
    }

    pub(crate) fn warning(subject: impl Into<String>, message: impl Into<String>) -> Self {
        Finding::new(Severity::Warning, subject, message)
    }

    pub(crate) fn note(subject: impl Into<String>, message: impl Into<String>) -> Self {
        Finding::new(Severity::Note, subject, message)
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.severity, self.subject, self.message)
    }
}

/// Everything found about `cfg`'s environment, errors first.
pub fn check(cfg: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    listeners::check(cfg, &mut out);
    places::check(cfg, &mut out);
    stores::check(cfg, &mut out);
    secrets::check(cfg, &mut out);
    // Stable: within a severity, in the order of the configuration.
    out.sort_by_key(|f| f.severity);
    out
}

#[cfg(test)]
mod tests;
