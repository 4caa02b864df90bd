//! CHAP credentials: the keys of `[discovery]` and `[[target]]` in the
//! file, `--chap` and `--mutual-chap`, and the permission check on a file
//! that holds secrets. No error quotes a secret.

use std::path::Path;

use ironlun_proto::chap::{ChapPolicy, Credentials};
use serde::Deserialize;

use super::ConfigError;
use crate::access::{chap_policy, credentials_from_env};

/// The keys whose values are secrets, wherever they appear (`[discovery]`,
/// `[[target]]`, `[[target.initiator]]`, as tables, inline tables or
/// arrays of them): what `GET /v1/config` hides. Their `_env` twins name
/// a variable, not a secret, and are shown as they are.
pub const SECRET_KEYS: [&str; 2] = ["chap", "mutual_chap"];

/// What a hidden secret is shown as (`USER:<hidden>`): too short for a
/// CHAP secret, and refused by name where credentials are read, so a
/// configuration copied from `config show` cannot set it as a secret;
/// `ironlun admin apply` first puts the running secrets back in its place
/// (live/hidden.rs).
pub const HIDDEN_SECRET: &str = "<hidden>";

/// CHAP credentials in the file: `USER:SECRET` literally (the file must
/// then not be world-readable) or the name of an environment variable
/// that holds it.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileAuth {
    chap: Option<String>,
    chap_env: Option<String>,
    mutual_chap: Option<String>,
    mutual_chap_env: Option<String>,
}

/// `USER:SECRET` given at `key`.
fn credentials(key: String, s: &str) -> Result<Credentials, ConfigError> {
    if s.split_once(':').map(|(_, secret)| secret) == Some(HIDDEN_SECRET) {
        return Err(ConfigError::invalid(
            key,
            format!("{HIDDEN_SECRET} is what `config show` prints for a secret; applied with `ironlun admin apply` it stands for the running secret of the same user at the same place, and there is none here: put the secret itself here, or use the _env key"),
        ));
    }
    Credentials::parse(s).map_err(|source| ConfigError::Chap { key, source })
}

/// The policy of one-way and (optionally) mutual credentials, for
/// `scope` (`discovery`, `target NAME`, `--chap/--mutual-chap`).
pub(super) fn policy(
    scope: &str,
    chap: Option<Credentials>,
    mutual: Option<Credentials>,
) -> Result<Option<ChapPolicy>, ConfigError> {
    chap_policy(chap, mutual, scope).map_err(|problem| ConfigError::ChapPolicy {
        scope: scope.to_owned(),
        problem,
    })
}

impl FileAuth {
    pub(super) fn has_literal_secret(&self) -> bool {
        self.chap.is_some() || self.mutual_chap.is_some()
    }

    /// The policy these keys give, for `scope` (`discovery`, `target
    /// NAME`).
    pub(super) fn policy(&self, scope: &str) -> Result<Option<ChapPolicy>, ConfigError> {
        let one = |lit: &Option<String>, env: &Option<String>, key: &'static str| match (lit, env) {
            (Some(_), Some(_)) => Err(ConfigError::ChapTwice {
                scope: scope.to_owned(),
                key,
            }),
            (Some(v), None) => credentials(format!("{scope}.{key}"), v).map(Some),
            (None, Some(var)) => credentials_from_env(var)
                .map(Some)
                .map_err(|e| ConfigError::invalid(format!("{scope}.{key}_env"), e)),
            (None, None) => Ok(None),
        };
        policy(
            scope,
            one(&self.chap, &self.chap_env, "chap")?,
            one(&self.mutual_chap, &self.mutual_chap_env, "mutual_chap")?,
        )
    }
}

/// The policy of `--chap` and `--mutual-chap`.
pub(super) fn flags_policy(
    chap: Option<&str>,
    mutual: Option<&str>,
) -> Result<Option<ChapPolicy>, ConfigError> {
    let parse =
        |v: Option<&str>, flag: &str| v.map(|s| credentials(flag.to_owned(), s)).transpose();
    policy(
        "--chap/--mutual-chap",
        parse(chap, "--chap")?,
        parse(mutual, "--mutual-chap")?,
    )
}

/// A file holding CHAP secrets must not be readable by every user.
pub(super) fn refuse_world_readable(path: &Path) -> Result<(), ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|source| ConfigError::Permissions { source })?
        .permissions()
        .mode();
    if mode & 0o004 != 0 {
        return Err(ConfigError::WorldReadable { mode: mode & 0o777 });
    }
    Ok(())
}
