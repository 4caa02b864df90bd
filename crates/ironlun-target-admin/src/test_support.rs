//! What the tests of the management API share: a registry of the
//! configuration's targets, as the daemon builds them.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use ironlun_target::registry::Registry;
use ironlun_target::server::build_targets;
use ironlun_target_config::Config;

/// A registry of `cfg`'s targets with no portal bound, and `cfg`'s I/O
/// engine as written (not probed).
pub(crate) fn test_registry(cfg: &Config) -> Arc<Registry> {
    Registry::new(
        build_targets(cfg).unwrap(),
        cfg.limits.clone(),
        cfg.tcp.clone(),
        Vec::new(),
        None,
        cfg.io_engine,
    )
}
