//! Object-storage locations as dataset roots: `s3://bucket/prefix` (AWS S3 and
//! S3-compatible stores), `gs://bucket/prefix` (Google Cloud Storage),
//! `az://container/prefix` and `abfs[s]://container@account.dfs.core.windows.net/prefix`
//! (Azure Blob Storage), or a plain HTTP server's `http(s)://host/path` (read-only).
//!
//! A location is in a store when its scheme is one of a store's in [`STORES`]; which
//! store serves it, its naming rules and its credentials are that store's file.

use super::{StoreError, StoreKind, STORES};
use std::path::Path;

/// A bucket (container) and a key prefix (no leading or trailing `/`); for HTTP, the
/// server's `host[:port]` in `bucket` and the path in `prefix`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreUrl {
    /// `s3`, `gs`, `az`, `abfs`, `abfss`, `http` or `https`.
    pub scheme: String,
    /// The bucket or container (for HTTP, the server's host and port).
    pub bucket: String,
    /// The key prefix of the dataset's objects, without a trailing `/` (may be empty).
    pub prefix: String,
    /// The Azure storage account named in an `abfs[s]://container@account...` URL (`None`:
    /// `AZURE_STORAGE_ACCOUNT_NAME`).
    pub account: Option<String>,
    /// What stands between `://` and the prefix, as given (`container@account.dfs...`).
    authority: String,
}

/// The store serving `scheme`.
fn store_of(scheme: &str) -> Option<&'static dyn StoreKind> {
    STORES
        .iter()
        .copied()
        .find(|s| s.schemes().contains(&scheme))
}

/// True when `text` names an object-storage location (a scheme of [`STORES`]).
pub fn is_store_url(text: &str) -> bool {
    text.split_once("://")
        .is_some_and(|(scheme, _)| store_of(scheme).is_some())
}

/// True when `root` names an object-storage location.
pub fn is_remote(root: &Path) -> bool {
    root.to_str().is_some_and(is_store_url)
}

impl StoreUrl {
    /// Parse a location (see the module for the forms).
    pub fn parse(text: &str) -> Result<StoreUrl, StoreError> {
        let bad = |why: &str| StoreError::Url {
            url: text.to_string(),
            reason: why.to_string(),
        };
        let Some((scheme, rest, store)) = text
            .split_once("://")
            .and_then(|(s, rest)| Some((s, rest, store_of(s)?)))
        else {
            return Err(bad(
                "not an object-storage URL: s3://, gs://, az://, abfs[s]:// and http(s):// \
                 (read-only) are read",
            ));
        };
        let (authority, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let (bucket, account) = store.authority(authority).map_err(bad)?;
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == "." || p == "..") {
            return Err(bad("'.' and '..' are not key segments"));
        }
        Ok(StoreUrl {
            scheme: scheme.to_string(),
            bucket,
            prefix: prefix.to_string(),
            account,
            authority: authority.to_string(),
        })
    }

    /// The key of `file` under the prefix.
    pub fn key(&self, file: &str) -> String {
        if self.prefix.is_empty() {
            file.to_string()
        } else {
            format!("{}/{file}", self.prefix)
        }
    }

    /// `scheme://bucket/key` of `file`, for messages.
    pub fn object(&self, file: &str) -> String {
        format!("{}://{}/{}", self.scheme, self.authority, self.key(file))
    }

    /// The kind of store.
    pub fn store(&self) -> &'static dyn StoreKind {
        // A parsed location's scheme is one of the table's.
        store_of(&self.scheme).unwrap_or(STORES[0])
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "{}://{}", self.scheme, self.authority)
        } else {
            write!(f, "{}://{}/{}", self.scheme, self.authority, self.prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_into_bucket_and_prefix() {
        let u = StoreUrl::parse("s3://data/imagenet/jpeg256/").expect("parses");
        assert_eq!(
            (u.bucket.as_str(), u.prefix.as_str()),
            ("data", "imagenet/jpeg256")
        );
        assert_eq!(u.key("manifest.json"), "imagenet/jpeg256/manifest.json");
        assert_eq!(
            u.object("index.bin"),
            "s3://data/imagenet/jpeg256/index.bin"
        );
        let top = StoreUrl::parse("s3://data").expect("parses");
        assert_eq!(top.key("manifest.json"), "manifest.json");
        assert_eq!(top.to_string(), "s3://data");
        let web = StoreUrl::parse("http://127.0.0.1:8000/data/ds").expect("parses");
        assert_eq!(
            web.object("manifest.json"),
            "http://127.0.0.1:8000/data/ds/manifest.json"
        );
        for bad in [
            "s3://",
            "s3:///x",
            "s3://Big/x",
            "gs://B/x",
            "az://con.tainer/x",
            "abfs://c@acct.example.com/x",
            "ftp://b/x",
            "s3://b/../x",
            "http:///x",
        ] {
            assert!(StoreUrl::parse(bad).is_err(), "{bad}");
        }
        let gs = StoreUrl::parse("gs://my_bucket/a/b").expect("parses");
        assert_eq!(
            (gs.store().name(), gs.object("m.json").as_str()),
            ("Google Cloud Storage", "gs://my_bucket/a/b/m.json")
        );
        let az = StoreUrl::parse("az://data/ds").expect("parses");
        assert_eq!(
            (az.store().name(), az.bucket.as_str(), az.account.as_deref()),
            ("Azure Blob Storage", "data", None)
        );
        let abfs = StoreUrl::parse("abfss://data@acct1.dfs.core.windows.net/ds/").expect("parses");
        assert_eq!(
            (
                abfs.bucket.as_str(),
                abfs.account.as_deref(),
                abfs.prefix.as_str()
            ),
            ("data", Some("acct1"), "ds")
        );
        assert_eq!(
            abfs.object("x.bin"),
            "abfss://data@acct1.dfs.core.windows.net/ds/x.bin"
        );
        assert_eq!(
            abfs.to_string(),
            "abfss://data@acct1.dfs.core.windows.net/ds"
        );
        assert!(is_remote(Path::new("s3://b/x")) && is_remote(Path::new("gs://b")));
        assert!(is_store_url("https://h/x") && !is_store_url("ftp://h/x"));
        assert!(
            is_remote(Path::new("az://c/x"))
                && is_remote(Path::new("abfs://c@a.dfs.core.windows.net"))
        );
        assert!(!is_remote(Path::new("data/s3:/x")));
    }
}
