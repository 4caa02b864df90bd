//! One named test per fuzz finding: the input that failed, replayed
//! through its harness (see fuzz/regressions/README.md).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;

/// Replays `fuzz/regressions/<target>/<name>` through its harness.
#[allow(dead_code)]
fn replay(target: &str, name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target)
        .join(name);
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ironlun_fuzz::run(target, &data).unwrap();
}
