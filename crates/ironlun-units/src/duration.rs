//! Durations: `30s`, `500ms`, `4m`, `1h`, `250us`, bare seconds.

use std::time::Duration;

/// Parses a duration: `30s`, `500ms`, `250us`, `4m` (or `4min`), `1h`,
/// or bare seconds; fractions (`0.5s`, `1.5m`) are allowed.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, unit) = crate::split_number(t, true);
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
    use super::*;

    #[test]
    fn units_and_fractions() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("4m"), Ok(Duration::from_secs(240)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration(" 0ms "), Ok(Duration::ZERO));
    }

    #[test]
    fn bad_durations_say_why() {
        assert!(parse_duration("-1").unwrap_err().contains("not a duration"));
        assert!(parse_duration("ms").unwrap_err().contains("not a duration"));
        assert!(parse_duration("3d")
            .unwrap_err()
            .contains("unknown duration unit"));
        assert!(parse_duration("1e10").is_err());
        assert!(parse_duration("999999999999h")
            .unwrap_err()
            .contains("out of range"));
    }
}
