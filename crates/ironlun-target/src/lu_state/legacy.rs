//! Finding a LU's state file under its former name (`state_name.rs`),
//! whatever the case of its letters: the former names were made from a
//! target's name as configured, case kept (`iqn.2026-11.Example:Disk`),
//! and names are now lower-cased before anything else, so the former
//! name computed today is the lower-cased one. A file whose name matches
//! ignoring ASCII case is the LU's; two or more that do are for a person
//! to sort out (`lu_state::migrate`).

use std::collections::HashMap;
use std::path::Path;

/// The state directory's file names, by their lower-cased form: read
/// once for every LU that opens together (the daemon's start, an applied
/// change), not once per LU.
#[derive(Debug, Default)]
pub struct LegacyNames {
    by_lower: HashMap<String, Vec<String>>,
}

impl LegacyNames {
    /// The names of `dir`'s files that could be state files of the former
    /// names (`KIND-STEM-lunN.txt`); none when it cannot be read (each LU
    /// then finds its own file, or not, by its exact name).
    pub fn read(dir: &Path) -> LegacyNames {
        let mut by_lower: HashMap<String, Vec<String>> = HashMap::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return LegacyNames::default();
        };
        for e in entries.flatten() {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let lower = name.to_ascii_lowercase();
            if lower.ends_with(".txt") && lower.contains("-lun") {
                by_lower.entry(lower).or_default().push(name);
            }
        }
        LegacyNames { by_lower }
    }

    /// The files named `want` ignoring ASCII case that are still there
    /// (one another LU's migration renamed is gone).
    pub fn matching(&self, dir: &Path, want: &str) -> Vec<String> {
        let mut found: Vec<String> = self
            .by_lower
            .get(&want.to_ascii_lowercase())
            .into_iter()
            .flatten()
            .filter(|n| std::fs::symlink_metadata(dir.join(n)).is_ok())
            .cloned()
            .collect();
        found.sort();
        found
    }
}
