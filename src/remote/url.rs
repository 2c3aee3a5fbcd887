//! Object-storage locations as dataset roots: `s3://bucket/prefix` (AWS S3 and
//! S3-compatible stores), `gs://bucket/prefix` (Google Cloud Storage),
//! `az://container/prefix` and `abfs[s]://container@account.dfs.core.windows.net/prefix`
//! (Azure Blob Storage), or a plain HTTP server's `http(s)://host/path` (read-only).
//!
//! A root is remote when it starts with one of these schemes; it stays a [`Path`]
//! everywhere else in the library (configs, `--data`), so a local path and a URL travel
//! the same way and only opening the dataset tells them apart.

use super::RemoteError;
use std::path::Path;

/// Schemes read from object storage.
pub const SCHEMES: &[&str] = &[
    "s3://", "gs://", "az://", "abfs://", "abfss://", "http://", "https://",
];

/// The kind of store a location is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    /// `s3://`: AWS S3 or an S3-compatible store.
    S3,
    /// `gs://`: Google Cloud Storage.
    Gcs,
    /// `az://`, `abfs://`, `abfss://`: Azure Blob Storage.
    Azure,
    /// `http://`, `https://`: a plain web server (GET and HEAD only).
    Http,
}

impl Store {
    /// The store's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Store::S3 => "S3",
            Store::Gcs => "Google Cloud Storage",
            Store::Azure => "Azure Blob Storage",
            Store::Http => "HTTP server",
        }
    }
}

/// A bucket (container) and a key prefix (no leading or trailing `/`); for HTTP, the
/// server's `host[:port]` in `bucket` and the path in `prefix`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteUrl {
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

/// True when `root` names an object-storage location.
pub fn is_remote(root: &Path) -> bool {
    root.to_str()
        .is_some_and(|s| SCHEMES.iter().any(|p| s.starts_with(p)))
}

/// A bucket name of `store`: S3 and Azure take lowercase letters, digits, '-' (and '.' for
/// S3), GCS also '_'.
fn bucket_ok(store: Store, name: &str) -> Result<(), &'static str> {
    let ok = |c: char| match store {
        Store::S3 => c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.',
        Store::Gcs => {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' || c == '_'
        }
        Store::Azure => c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-',
        Store::Http => true,
    };
    if name.chars().all(ok) {
        return Ok(());
    }
    Err(match store {
        Store::S3 => "a bucket name holds lowercase letters, digits, '-' and '.' only",
        Store::Gcs => "a bucket name holds lowercase letters, digits, '-', '_' and '.' only",
        _ => "a container name holds lowercase letters, digits and '-' only",
    })
}

impl RemoteUrl {
    /// Parse a location (see the module for the forms).
    pub fn parse(text: &str) -> Result<RemoteUrl, RemoteError> {
        let bad = |why: &str| RemoteError::Url {
            url: text.to_string(),
            reason: why.to_string(),
        };
        let (scheme, rest) =
            match text.split_once("://") {
                Some((s @ ("s3" | "gs" | "az" | "abfs" | "abfss" | "http" | "https"), rest)) => {
                    (s, rest)
                }
                _ => return Err(bad(
                    "not an object-storage URL: s3://, gs://, az://, abfs[s]:// and http(s):// \
                     (read-only) are read",
                )),
            };
        let store = store_of(scheme);
        let (authority, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let (bucket, account) = match store {
            Store::Azure => match authority.split_once('@') {
                None => (authority, None),
                Some((container, host)) => {
                    let account = host
                        .strip_suffix(".dfs.core.windows.net")
                        .or_else(|| host.strip_suffix(".blob.core.windows.net"))
                        .filter(|a| {
                            !a.is_empty()
                                && a.chars()
                                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                        })
                        .ok_or_else(|| {
                            bad("an Azure location is az://container/prefix or \
                                 abfs[s]://container@account.dfs.core.windows.net/prefix")
                        })?;
                    (container, Some(account.to_string()))
                }
            },
            _ => (authority, None),
        };
        if bucket.is_empty() {
            return Err(bad(match store {
                Store::Http => "no host",
                Store::Azure => "no container name",
                _ => "no bucket name",
            }));
        }
        if store == Store::Http {
            if bucket.contains(['@', '?', '#']) {
                return Err(bad("a host[:port] without user, query or fragment"));
            }
        } else {
            bucket_ok(store, bucket).map_err(bad)?;
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == "." || p == "..") {
            return Err(bad("'.' and '..' are not key segments"));
        }
        Ok(RemoteUrl {
            scheme: scheme.to_string(),
            bucket: bucket.to_string(),
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
    pub fn store(&self) -> Store {
        store_of(&self.scheme)
    }

    /// Whether this is an S3 location.
    pub fn is_s3(&self) -> bool {
        self.store() == Store::S3
    }
}

fn store_of(scheme: &str) -> Store {
    match scheme {
        "s3" => Store::S3,
        "gs" => Store::Gcs,
        "az" | "abfs" | "abfss" => Store::Azure,
        _ => Store::Http,
    }
}

impl std::fmt::Display for RemoteUrl {
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
        let u = RemoteUrl::parse("s3://data/imagenet/jpeg256/").expect("parses");
        assert_eq!(
            (u.bucket.as_str(), u.prefix.as_str()),
            ("data", "imagenet/jpeg256")
        );
        assert_eq!(u.key("manifest.json"), "imagenet/jpeg256/manifest.json");
        assert_eq!(
            u.object("index.bin"),
            "s3://data/imagenet/jpeg256/index.bin"
        );
        let top = RemoteUrl::parse("s3://data").expect("parses");
        assert_eq!(top.key("manifest.json"), "manifest.json");
        assert_eq!(top.to_string(), "s3://data");
        let web = RemoteUrl::parse("http://127.0.0.1:8000/data/ds").expect("parses");
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
            assert!(RemoteUrl::parse(bad).is_err(), "{bad}");
        }
        let gs = RemoteUrl::parse("gs://my_bucket/a/b").expect("parses");
        assert_eq!(
            (gs.store(), gs.object("m.json").as_str()),
            (Store::Gcs, "gs://my_bucket/a/b/m.json")
        );
        let az = RemoteUrl::parse("az://data/ds").expect("parses");
        assert_eq!(
            (az.store(), az.bucket.as_str(), az.account.as_deref()),
            (Store::Azure, "data", None)
        );
        let abfs = RemoteUrl::parse("abfss://data@acct1.dfs.core.windows.net/ds/").expect("parses");
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
        assert!(
            is_remote(Path::new("az://c/x"))
                && is_remote(Path::new("abfs://c@a.dfs.core.windows.net"))
        );
        assert!(!is_remote(Path::new("data/s3:/x")));
    }

    #[test]
    fn a_url_root_in_a_pipeline_file_is_not_made_relative_to_the_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
        let text = std::fs::read_to_string(dir.join("resnet50_eval.toml")).expect("reads");
        let text: String = text
            .lines()
            .map(|l| {
                if l.starts_with("root") {
                    "root = \"s3://bucket/ds\""
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let cfg =
            crate::pipeline::PipelineConfig::parse(&text, &dir.join("x.toml")).expect("parses");
        assert_eq!(cfg.source.root(), Path::new("s3://bucket/ds"));
    }
}
