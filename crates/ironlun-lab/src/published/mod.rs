//! What the studies published, and ironlun's rows beside it.
//!
//! **Owns:** the published values as data (`testdata/published/<study>.toml`,
//! compiled into the binary so a fresh clone has them), their schema and
//! checks (`data`), matching them to measured rows with the ratio, the
//! ±25 % flag and the share within it (`compare`), and their text table and
//! HTML chart (`render`).
//!
//! **Must not know:** how a reproduction runs or what its rows are called
//! (`reproduce::observe` turns its results into [`Observation`]s).
//!
//! Units: every comparison is in one unit per metric, MB/s (10^6 bytes
//! per second) for throughput, IOPS, µs for response and access times,
//! s for job times, % for CPU and gains. A published value printed in
//! MiB/s (2^20) is multiplied by 1.048576, one in ms by 1000; each file's
//! `convention` says how its text's units were read.

pub mod compare;
pub mod data;
pub mod render;

pub use compare::{compare, Compared, Comparison, Observation, Status, TOLERANCE};
pub use data::{FitDecl, Metric, PublishedCell, StudyFile, Unit, Where};

/// Each study's file, as `ironlun reproduce` names the study.
pub const FILES: [(&str, &str); 4] = [
    (
        "wan-tuning",
        include_str!("../../../../testdata/published/wan-tuning.toml"),
    ),
    (
        "target-backends",
        include_str!("../../../../testdata/published/target-backends.toml"),
    ),
    (
        "ramdisk-target",
        include_str!("../../../../testdata/published/ramdisk-target.toml"),
    ),
    (
        "app-profiles",
        include_str!("../../../../testdata/published/app-profiles.toml"),
    ),
];

/// The published values of `study`, checked.
pub fn load(study: &str) -> Result<StudyFile, String> {
    let (_, text) = FILES
        .iter()
        .find(|(n, _)| *n == study)
        .ok_or_else(|| format!("no published values for '{study}'"))?;
    let f = StudyFile::parse(text).map_err(|e| format!("testdata/published/{study}.toml: {e}"))?;
    if f.study != study {
        return Err(format!(
            "testdata/published/{study}.toml names study '{}'",
            f.study
        ));
    }
    Ok(f)
}

#[cfg(test)]
mod tests;
