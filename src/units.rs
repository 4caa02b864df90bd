//! Sizes and durations as people type them: `4k`, `512KiB`, `1G` (the
//! target's size syntax), `30s`, `500ms`, `4m`.

use std::time::Duration;

pub use ironlun_target::config::parse_size;

/// Parses a duration: `30s`, `500ms`, `4m`, `1h`, or bare seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (e.g. 30s, 500ms, 4m)"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "us" => n / 1e6,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("'{s}': unknown duration unit '{unit}'")),
    };
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("'{s}' is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

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
