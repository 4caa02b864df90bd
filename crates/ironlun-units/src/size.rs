//! Sizes in bytes: `4k`, `512KiB`, `1G`, `10MB`, `4096`.

/// Parses a size: a number with an optional unit. `K`, `M`, `G`, `T`
/// (or lower case) and `KiB`..`TiB` are powers of 1024; `KB`..`TB` powers
/// of 1000; `B` or no unit means bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, unit) = crate::split_number(s, false);
    if num.is_empty() {
        return Err(format!("size '{s}' has no number"));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("size '{s}' is too large"))?;
    let mult: u64 = match unit {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" | "m" => 1 << 20,
        "G" | "GiB" | "g" => 1 << 30,
        "T" | "TiB" | "t" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => return Err(format!("size '{s}': unknown unit '{other}' (use B, KiB, MiB, GiB, TiB, K, M, G, T, KB, MB, GB, TB)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// The shortest exact form of `n` bytes that [`parse_size`] reads back:
/// `512KiB`, `10MB`, `1000`.
pub fn format_size(n: u64) -> String {
    for (unit, div) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= div && n % div == 0 {
            return format!("{}{unit}", n / div);
        }
    }
    for (unit, div) in [("GB", 1_000_000_000u64), ("MB", 1_000_000), ("kB", 1000)] {
        if n >= div && n % div == 0 {
            return format!("{}{unit}", n / div);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_units() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("64kB"), Ok(64_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size(" 8B "), Ok(8));
    }

    #[test]
    fn bad_sizes_say_why() {
        assert!(parse_size("GiB").unwrap_err().contains("no number"));
        assert!(parse_size("1XB").unwrap_err().contains("unknown unit"));
        assert!(parse_size("4q").is_err());
        assert!(parse_size("1.5G").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999T")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_size("99999999999999999999")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn formatted_sizes_read_back() {
        assert_eq!(format_size(524_288), "512KiB");
        assert_eq!(format_size(10_000_000), "10MB");
        assert_eq!(format_size(2 << 30), "2GiB");
        assert_eq!(format_size(1000), "1kB");
        assert_eq!(format_size(1500), "1500");
        assert_eq!(format_size(0), "0");
        for n in [0, 1, 512, 4096, 65536, 1000, 8192, 10_000_000, 3 << 30] {
            assert_eq!(parse_size(&format_size(n)), Ok(n));
        }
    }
}
