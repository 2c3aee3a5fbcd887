//! Byte sizes as people write them: `"1GB"`, `"512MiB"`, `"1000000"` (the `[store]` table's
//! `shard_size`, `[source]`'s `cache_size`).

/// Why a text is not a size. The setting it was given for is the caller's to name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SizeError {
    /// Not a number with a unit.
    #[error("{0:?} is not a size like 1GB or 500MB")]
    NotASize(String),
    /// A unit that is not one of B, kB, MB, GB, TB, KiB, MiB, GiB, TiB.
    #[error("unknown unit {unit:?} in {text:?}")]
    Unit {
        /// The unit.
        unit: String,
        /// The whole size.
        text: String,
    },
    /// Below a byte or above an exabyte.
    #[error("{0:?} is not a usable size")]
    OutOfRange(String),
}

/// `"1GB"`, `"512MiB"`, `"1000000"` → bytes (decimal kB/MB/GB/TB, binary KiB/MiB/GiB/TiB).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| SizeError::NotASize(text.to_string()))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0f64.powi(4),
        u => {
            return Err(SizeError::Unit {
                unit: u.to_string(),
                text: text.to_string(),
            })
        }
    };
    let bytes = n * mult;
    if !(1.0..=1e18).contains(&bytes) {
        return Err(SizeError::OutOfRange(text.to_string()));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1.5 kB"), Ok(1500));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("GB").is_err());
        assert!(parse_size("3 parsecs").is_err());
    }
}
