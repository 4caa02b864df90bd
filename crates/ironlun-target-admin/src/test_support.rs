//! What the tests of the management API share: a registry of the
//! configuration's targets, as the daemon builds them.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use ironlun_target::registry::Registry;
use ironlun_target::server::unbound_registry;
use ironlun_target_config::Config;

/// A registry of `cfg`'s targets as the daemon builds them, with no
/// portal bound ([`unbound_registry`]).
pub(crate) fn test_registry(cfg: &Config) -> Arc<Registry> {
    unbound_registry(cfg).unwrap()
}
