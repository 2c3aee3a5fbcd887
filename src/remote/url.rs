//! Object-storage locations: `s3://bucket/prefix` (or a plain HTTP server's
//! `http(s)://host/path`, read-only) as a dataset root.
//!
//! A root is remote when it starts with a scheme this build reads (`s3://`); it stays a
//! [`Path`] everywhere else in the library (configs, `--data`), so a local path and a URL
//! travel the same way and only opening the dataset tells them apart.

use super::RemoteError;
use std::path::Path;

/// Schemes read from object storage.
pub const SCHEMES: &[&str] = &["s3://", "http://", "https://"];

/// Schemes of stores that a later version may read (named in errors).
const LATER: &[&str] = &["gs://", "az://", "abfs://"];

/// `s3://bucket/prefix`: a bucket and a key prefix (no leading or trailing `/`); or
/// `http(s)://host[:port]/path`: the server in `bucket`, the path in `prefix`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteUrl {
    /// `s3`, `http` or `https`.
    pub scheme: String,
    /// The bucket (for HTTP, the server's host and port).
    pub bucket: String,
    /// The key prefix of the dataset's objects, without a trailing `/` (may be empty).
    pub prefix: String,
}

/// True when `root` names an object-storage location (any URL scheme this build knows of,
/// read or not: opening one it cannot read is an error saying so).
pub fn is_remote(root: &Path) -> bool {
    root.to_str()
        .is_some_and(|s| SCHEMES.iter().chain(LATER).any(|p| s.starts_with(p)))
}

impl RemoteUrl {
    /// Parse `s3://bucket[/prefix]`.
    pub fn parse(text: &str) -> Result<RemoteUrl, RemoteError> {
        let bad = |why: &str| RemoteError::Url {
            url: text.to_string(),
            reason: why.to_string(),
        };
        let (scheme, rest) = match text.split_once("://") {
            Some((s @ ("s3" | "http" | "https"), rest)) => (s, rest),
            _ => {
                return Err(bad(
                    "only s3:// (and S3-compatible stores through AWS_ENDPOINT_URL) and \
                     http(s):// (read-only) are read so far",
                ))
            }
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad(if scheme == "s3" {
                "no bucket name"
            } else {
                "no host"
            }));
        }
        if scheme != "s3" {
            if bucket.contains(['@', '?', '#']) {
                return Err(bad("a host[:port] without user, query or fragment"));
            }
        } else if !bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        {
            return Err(bad(
                "a bucket name holds lowercase letters, digits, '-' and '.' only",
            ));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == "." || p == "..") {
            return Err(bad("'.' and '..' are not key segments"));
        }
        Ok(RemoteUrl {
            scheme: scheme.to_string(),
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
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

    /// `s3://bucket/key` of `file`, for messages.
    pub fn object(&self, file: &str) -> String {
        format!("{}://{}/{}", self.scheme, self.bucket, self.key(file))
    }

    /// Whether this is an S3 location (the stores written to).
    pub fn is_s3(&self) -> bool {
        self.scheme == "s3"
    }
}

impl std::fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "{}://{}", self.scheme, self.bucket)
        } else {
            write!(f, "{}://{}/{}", self.scheme, self.bucket, self.prefix)
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
            "gs://b/x",
            "s3://b/../x",
            "http:///x",
        ] {
            assert!(RemoteUrl::parse(bad).is_err(), "{bad}");
        }
        assert!(is_remote(Path::new("s3://b/x")) && is_remote(Path::new("gs://b")));
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
