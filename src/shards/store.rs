//! The `[store]` table of a conversion pipeline: how `convert --format shards` stores each
//! sample.
//!
//! ```toml
//! [store]
//! mode = "jpeg"        # "jpeg", "raw" or "original"
//! quality = 90         # jpeg only, 1-100
//! shard_size = "1GB"   # bytes per shard file: a number, or with kB/MB/GB/KiB/MiB/GiB
//! ```

use super::format::Storage;
use super::writer::DEFAULT_SHARD_SIZE;
use serde::{Deserialize, Serialize};

fn ninety() -> u8 {
    90
}

/// The `[store]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct StoreConfig {
    /// `jpeg` (re-encoded after the ops), `raw` (RGB u8 HWC after the ops) or `original`
    /// (the source's file bytes; the pipeline must have no ops).
    #[serde(default)]
    pub mode: Storage,
    /// JPEG quality, 1 to 100 (default 90).
    #[serde(default = "ninety")]
    pub quality: u8,
    /// Bytes per shard file (default 1GB); a shard holds at least one sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_size: Option<String>,
    /// `(id, count)`: this conversion job writes the contiguous slice `id` of `count` of
    /// the source ([`crate::shards::slice_range`]) and its own manifest, which
    /// [`crate::shards::merge_index`] joins with the others' (the CLI's `--slice I/K`).
    /// `None`: the whole source. A job property, not a `[store]` key.
    #[serde(skip)]
    pub slice: Option<(usize, usize)>,
}

setters!(StoreConfig {
    mode: Storage,
    quality: u8,
} optional {
    shard_size: String,
    slice: (usize, usize),
});

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig {
            mode: Storage::Jpeg,
            quality: 90,
            shard_size: None,
            slice: None,
        }
    }
}

impl StoreConfig {
    /// Checks the parameters; returns the shard size in bytes.
    pub fn check(&self) -> Result<u64, StoreError> {
        if self.mode == Storage::Jpeg && !(1..=100).contains(&self.quality) {
            return Err(StoreError::Quality(self.quality));
        }
        match &self.shard_size {
            None => Ok(DEFAULT_SHARD_SIZE),
            Some(s) => parse_size(s),
        }
    }
}

/// Why a `[store]` table cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A JPEG quality outside 1..=100.
    #[error("store.quality {0} must be between 1 and 100")]
    Quality(u8),
    /// A shard size that is not a number with a unit.
    #[error("store.shard_size: {0:?} is not a size like 1GB or 500MB")]
    NotASize(String),
    /// A shard size with a unit that is not one of B, kB, MB, GB, TB, KiB, MiB, GiB, TiB.
    #[error("store.shard_size: unknown unit {unit:?} in {text:?}")]
    Unit {
        /// The unit.
        unit: String,
        /// The whole size.
        text: String,
    },
    /// A shard size below a byte or above an exabyte.
    #[error("store.shard_size: {0:?} is not a usable size")]
    OutOfRange(String),
}

impl From<StoreError> for crate::Error {
    fn from(e: StoreError) -> crate::Error {
        crate::Error::Invalid(e.into())
    }
}

/// `"1GB"`, `"512MiB"`, `"1000000"` → bytes (decimal kB/MB/GB/TB, binary KiB/MiB/GiB/TiB).
pub fn parse_size(text: &str) -> Result<u64, StoreError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| StoreError::NotASize(text.to_string()))?;
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
            return Err(StoreError::Unit {
                unit: u.to_string(),
                text: text.to_string(),
            })
        }
    };
    let bytes = n * mult;
    if !(1.0..=1e18).contains(&bytes) {
        return Err(StoreError::OutOfRange(text.to_string()));
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
