//! Sizes and durations as people type them: `4k`, `512KiB`, `1G` (the
//! target's size syntax), `30s`, `500ms`, `4m`.

pub use ironlun_bench::units::parse_duration;
pub use ironlun_target::config::parse_size;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("512KiB").unwrap(), 524288);
        assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
        assert!(parse_size("4q").is_err());
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("4m").unwrap(), Duration::from_secs(240));
        assert!(parse_duration("-1").is_err());
    }
}
