//! Link rates: bits per second (`155Mbit`, `1Gbit/s`, `1.5Gbps`) or
//! bytes per second (`50MB/s`, `1MiB/s`).

/// Parses a rate into bits per second: `155Mbit`, `1Gbit`, `100Mbit/s`,
/// `1.5Gbps`, `500kbit` or a plain number of bits; bytes per second as
/// `10MB/s`, `1MiB/s`, `1GB/s` (upper-case B). `0`, `none` or `unlimited`
/// mean no cap (`None`).
pub fn parse_rate(s: &str) -> Result<Option<u64>, String> {
    let t = s.trim();
    if matches!(t.to_ascii_lowercase().as_str(), "0" | "none" | "unlimited") {
        return Ok(None);
    }
    let (num, unit) = crate::split_number(t, true);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("rate '{t}': expected a number and a unit such as 155Mbit"))?;
    let unit = unit.trim();
    let unit = unit.strip_suffix("/s").unwrap_or(unit);
    let bps = if unit.is_empty() {
        Some(value)
    } else {
        bits_per_unit(unit).map(|m| m * value)
    }
    .ok_or_else(|| format!("rate '{t}': unknown unit (use kbit, Mbit, Gbit, MB/s, MiB/s)"))?;
    if !(1000.0..=1e12).contains(&bps) {
        return Err(format!("rate '{t}': must be between 1 kbit/s and 1 Tbit/s"));
    }
    Ok(Some(bps as u64))
}

/// Bits per second in one `unit` (without `/s`): `kbit`/`Mbps` (any
/// case), `MB`, `KiB` (a byte is eight bits).
fn bits_per_unit(unit: &str) -> Option<f64> {
    let lower = unit.to_ascii_lowercase();
    if let Some(p) = lower
        .strip_suffix("bit")
        .or_else(|| lower.strip_suffix("bps"))
    {
        return match p {
            "" => Some(1.0),
            "k" => Some(1e3),
            "m" => Some(1e6),
            "g" => Some(1e9),
            _ => None,
        };
    }
    let bytes = match unit.strip_suffix('B')? {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(8.0 * bytes)
}

/// `155 Mbit/s`, `1 Gbit/s`, `500 kbit/s`.
pub fn format_rate(bps: u64) -> String {
    let b = bps as f64;
    if b >= 1e9 {
        format!("{} Gbit/s", trim(b / 1e9))
    } else if b >= 1e6 {
        format!("{} Mbit/s", trim(b / 1e6))
    } else {
        format!("{} kbit/s", trim(b / 1e3))
    }
}

/// At most three decimals, without trailing zeros.
fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_and_bytes_per_second() {
        assert_eq!(parse_rate("155Mbit"), Ok(Some(155_000_000)));
        assert_eq!(parse_rate("155Mbit/s"), Ok(Some(155_000_000)));
        assert_eq!(parse_rate("1Gbit"), Ok(Some(1_000_000_000)));
        assert_eq!(parse_rate("1.5Gbps"), Ok(Some(1_500_000_000)));
        assert_eq!(parse_rate("100mbit"), Ok(Some(100_000_000)));
        assert_eq!(parse_rate("500kbit"), Ok(Some(500_000)));
        assert_eq!(parse_rate("10MB/s"), Ok(Some(80_000_000)));
        assert_eq!(parse_rate("1MiB/s"), Ok(Some(8 * 1024 * 1024)));
        assert_eq!(parse_rate("2000"), Ok(Some(2000)));
    }

    #[test]
    fn no_cap_and_bad_rates() {
        assert_eq!(parse_rate("none"), Ok(None));
        assert_eq!(parse_rate("Unlimited"), Ok(None));
        assert_eq!(parse_rate("0"), Ok(None));
        assert!(parse_rate("fast")
            .unwrap_err()
            .contains("expected a number"));
        assert!(parse_rate("10furlongs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_rate("10mB/s").unwrap_err().contains("unknown unit"));
        assert!(parse_rate("1bit").unwrap_err().contains("between"));
        assert!(parse_rate("2Tbit").is_err());
    }

    #[test]
    fn formatted_rates() {
        assert_eq!(format_rate(155_000_000), "155 Mbit/s");
        assert_eq!(format_rate(1_000_000_000), "1 Gbit/s");
        assert_eq!(format_rate(1_500_000_000), "1.5 Gbit/s");
        assert_eq!(format_rate(500_000), "500 kbit/s");
    }
}
