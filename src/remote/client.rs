//! The S3 client: `object_store`'s Amazon S3 store driven by a small Tokio runtime that
//! this client owns (two threads), so the engine stays thread-based and blocks on each
//! call. Its own retries are off: every request goes through [`RetryPolicy`], which counts
//! them.
//!
//! Configuration comes from the environment, as the AWS SDKs read it
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
//! `AWS_ENDPOINT_URL`, ...; instance metadata when no key is set, unless
//! `AWS_EC2_METADATA_DISABLED=true`); an endpoint given in the pipeline (`endpoint`)
//! overrides `AWS_ENDPOINT_URL`. Plain `http://` is accepted for a loopback endpoint
//! (elsewhere only with `AWS_ALLOW_HTTP=true`). Secrets are never printed: errors carry the
//! store's answer, which holds none.

use super::retry::{Failure, RetryPolicy};
use super::{stats, RemoteError, RemoteUrl};
use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt, RetryConfig};
use std::io::Write;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// Timeout of one request (headers and body), and of connecting.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a download found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Bytes of the object.
    pub size: u64,
    /// Its ETag, when the store gives one.
    pub e_tag: Option<String>,
}

/// An S3 bucket and prefix (or a plain HTTP server's folder, read-only), with the runtime
/// that drives the requests.
pub struct S3Client {
    url: RemoteUrl,
    pub(super) store: Arc<dyn ObjectStore>,
    /// The S3 store, for multipart uploads (`None` for HTTP).
    pub(super) s3: Option<AmazonS3>,
    pub(super) runtime: tokio::runtime::Runtime,
    pub(super) retry: RetryPolicy,
}

impl std::fmt::Debug for S3Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Client").field("url", &self.url).finish()
    }
}

fn is_loopback(endpoint: &str) -> bool {
    let rest = endpoint.strip_prefix("http://").unwrap_or("");
    let host = rest.split(['/', '?']).next().unwrap_or("");
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn env_true(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"))
}

impl S3Client {
    /// A client for `url`; `endpoint` overrides `AWS_ENDPOINT_URL`.
    pub fn new(url: &RemoteUrl, endpoint: Option<&str>) -> Result<S3Client, RemoteError> {
        let setup = |reason: String| RemoteError::Setup {
            url: url.to_string(),
            reason,
        };
        if !url.is_s3() {
            return S3Client::http(url);
        }
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(&url.bucket);
        let endpoint = endpoint
            .map(str::to_string)
            .or_else(|| std::env::var("AWS_ENDPOINT_URL_S3").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        let mut options = ClientOptions::new()
            .with_timeout(REQUEST_TIMEOUT)
            .with_connect_timeout(CONNECT_TIMEOUT);
        if let Some(ep) = &endpoint {
            if ep.starts_with("http://") {
                if !is_loopback(ep) && !env_true("AWS_ALLOW_HTTP") {
                    return Err(setup(format!(
                        "endpoint {ep}: plain http:// is accepted for a loopback endpoint only \
                         (set AWS_ALLOW_HTTP=true to allow it elsewhere)"
                    )));
                }
                options = options.with_allow_http(true);
            } else if !ep.starts_with("https://") {
                return Err(setup(format!(
                    "endpoint {ep:?} is not an http:// or https:// URL"
                )));
            }
            builder = builder.with_endpoint(ep);
            if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err()
            {
                builder = builder.with_region("us-east-1");
            }
        }
        if env_true("AWS_EC2_METADATA_DISABLED") {
            // No instance-metadata lookup: point it at a closed loopback port.
            builder = builder.with_metadata_endpoint("http://127.0.0.1:9");
        }
        let store = builder
            .with_client_options(options)
            .with_retry(RetryConfig {
                max_retries: 0,
                ..RetryConfig::default()
            })
            .build()
            .map_err(|e| setup(e.to_string()))?;
        Ok(S3Client {
            url: url.clone(),
            store: Arc::new(store.clone()),
            s3: Some(store),
            runtime: runtime(url)?,
            retry: RetryPolicy::default(),
        })
    }

    /// A client for a plain HTTP(S) server (`url.bucket` is its host and port): GET and
    /// HEAD only. Plain `http://` for a loopback server only (elsewhere with
    /// `AWS_ALLOW_HTTP=true`, as for S3 endpoints).
    fn http(url: &RemoteUrl) -> Result<S3Client, RemoteError> {
        let server = format!("{}://{}", url.scheme, url.bucket);
        let mut options = ClientOptions::new()
            .with_timeout(REQUEST_TIMEOUT)
            .with_connect_timeout(CONNECT_TIMEOUT);
        if url.scheme == "http" {
            if !is_loopback(&server) && !env_true("AWS_ALLOW_HTTP") {
                return Err(RemoteError::Setup {
                    url: url.to_string(),
                    reason: "plain http:// is accepted for a loopback server only (set \
                             AWS_ALLOW_HTTP=true to allow it elsewhere)"
                        .into(),
                });
            }
            options = options.with_allow_http(true);
        }
        let store = HttpBuilder::new()
            .with_url(server)
            .with_client_options(options)
            .with_retry(RetryConfig {
                max_retries: 0,
                ..RetryConfig::default()
            })
            .build()
            .map_err(|e| RemoteError::Setup {
                url: url.to_string(),
                reason: e.to_string(),
            })?;
        Ok(S3Client {
            url: url.clone(),
            store: Arc::new(store),
            s3: None,
            runtime: runtime(url)?,
            retry: RetryPolicy::default(),
        })
    }

    /// With another retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> S3Client {
        self.retry = retry;
        self
    }

    /// The dataset's location.
    pub fn url(&self) -> &RemoteUrl {
        &self.url
    }

    pub(super) fn classify(&self, file: &str, e: object_store::Error) -> Failure {
        let object = self.url.object(file);
        match e {
            object_store::Error::NotFound { .. } => Failure::Fatal(RemoteError::NotFound {
                object,
                hint: String::new(),
            }),
            object_store::Error::PermissionDenied { source, .. }
            | object_store::Error::Unauthenticated { source, .. } => {
                Failure::Fatal(RemoteError::Denied {
                    object,
                    reason: short(&source.to_string()),
                })
            }
            object_store::Error::Precondition { .. } => Failure::Fatal(RemoteError::Changed {
                object,
                reason: "the object changed on the store during the download (its ETag \
                         differs): the dataset was rewritten while being read"
                    .into(),
            }),
            e => {
                let text = e.to_string();
                match status_of(&text) {
                    Some(s) if (400..500).contains(&s) && s != 408 && s != 429 => {
                        Failure::Fatal(RemoteError::Request {
                            object,
                            reason: short(&text),
                        })
                    }
                    _ => Failure::Transient(short(&text)),
                }
            }
        }
    }

    /// Download `file` whole into `out` (retrying; a retry after part of the body resumes
    /// where it stopped, asking for the same ETag). Checks the size against `expect`.
    pub fn download(
        &self,
        file: &str,
        expect: Option<u64>,
        out: &mut std::fs::File,
    ) -> Result<ObjectInfo, RemoteError> {
        let object = self.url.object(file);
        let location = ObjectPath::from(self.url.key(file));
        let mut written: u64 = 0;
        let mut info: Option<ObjectInfo> = None;
        self.retry.run(&object, |_| {
            let opts = GetOptions {
                range: (written > 0).then_some(GetRange::Offset(written)),
                if_match: info.as_ref().and_then(|i| i.e_tag.clone()),
                ..GetOptions::default()
            };
            stats::request();
            self.runtime.block_on(async {
                let got = self
                    .store
                    .get_opts(&location, opts)
                    .await
                    .map_err(|e| self.classify(file, e))?;
                let found = ObjectInfo {
                    size: got.meta.size,
                    e_tag: got.meta.e_tag.clone(),
                };
                if let Some(want) = expect {
                    if found.size != want {
                        return Err(Failure::Fatal(RemoteError::Changed {
                            object: object.clone(),
                            reason: format!(
                                "{} bytes on the store, but the manifest says {want}: the \
                                 object was replaced or truncated",
                                found.size
                            ),
                        }));
                    }
                }
                if let Some(first) = &info {
                    if first.e_tag.is_some() && first.e_tag != found.e_tag {
                        return Err(Failure::Fatal(RemoteError::Changed {
                            object: object.clone(),
                            reason: "the object changed on the store during the download".into(),
                        }));
                    }
                } else {
                    info = Some(found.clone());
                }
                let mut stream = got.into_stream();
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(|e| self.classify(file, e))?;
                    stats::bytes(chunk.len() as u64);
                    out.write_all(&chunk).map_err(|e| {
                        Failure::Fatal(RemoteError::Cache {
                            path: "download".into(),
                            reason: format!("writing {object}: {e}"),
                        })
                    })?;
                    written += chunk.len() as u64;
                }
                if written != found.size {
                    return Err(Failure::Transient(format!(
                        "body ended after {written} of {} bytes",
                        found.size
                    )));
                }
                Ok(found)
            })
        })
    }

    /// The whole of a small object (the manifest), at most `limit` bytes.
    pub fn get(&self, file: &str, limit: u64) -> Result<(Vec<u8>, ObjectInfo), RemoteError> {
        let object = self.url.object(file);
        let location = ObjectPath::from(self.url.key(file));
        self.retry.run(&object, |_| {
            stats::request();
            self.runtime.block_on(async {
                let got = self
                    .store
                    .get_opts(&location, GetOptions::default())
                    .await
                    .map_err(|e| self.classify(file, e))?;
                let info = ObjectInfo {
                    size: got.meta.size,
                    e_tag: got.meta.e_tag.clone(),
                };
                if info.size > limit {
                    return Err(Failure::Fatal(RemoteError::Request {
                        object: object.clone(),
                        reason: format!("{} bytes, more than the {limit} expected", info.size),
                    }));
                }
                let bytes = got.bytes().await.map_err(|e| self.classify(file, e))?;
                stats::bytes(bytes.len() as u64);
                if bytes.len() as u64 != info.size {
                    return Err(Failure::Transient(format!(
                        "body of {} bytes, expected {}",
                        bytes.len(),
                        info.size
                    )));
                }
                Ok((bytes.to_vec(), info))
            })
        })
    }

    /// Bytes `range` of `file` (one ranged GET, retried).
    pub fn get_range(&self, file: &str, range: Range<u64>) -> Result<Vec<u8>, RemoteError> {
        let object = self.url.object(file);
        let location = ObjectPath::from(self.url.key(file));
        let want = range.end.saturating_sub(range.start);
        self.retry.run(&object, |_| {
            stats::request();
            self.runtime.block_on(async {
                let bytes = self
                    .store
                    .get_range(&location, range.clone())
                    .await
                    .map_err(|e| self.classify(file, e))?;
                stats::bytes(bytes.len() as u64);
                if bytes.len() as u64 != want {
                    return Err(Failure::Transient(format!(
                        "{} bytes of the {want} asked for",
                        bytes.len()
                    )));
                }
                Ok(bytes.to_vec())
            })
        })
    }
}

/// The client's own small Tokio runtime (two threads).
fn runtime(url: &RemoteUrl) -> Result<tokio::runtime::Runtime, RemoteError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("imgfeed-s3")
        .enable_all()
        .build()
        .map_err(|e| RemoteError::Setup {
            url: url.to_string(),
            reason: format!("cannot start the I/O runtime: {e}"),
        })
}

/// The HTTP status in an `object_store` message (`... status code: 503 ...`).
fn status_of(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

/// The first line of a store's message, at most 300 characters.
fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    line.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_endpoints_are_recognised() {
        for ep in [
            "http://127.0.0.1:9000",
            "http://localhost:5000/",
            "http://[::1]:9000",
            "http://127.0.0.2",
        ] {
            assert!(is_loopback(ep), "{ep}");
        }
        for ep in [
            "http://10.0.0.1:9000",
            "https://127.0.0.1",
            "http://s3.example.com",
        ] {
            assert!(!is_loopback(ep), "{ep}");
        }
    }

    #[test]
    fn status_codes_are_found_in_store_messages() {
        assert_eq!(
            status_of("Generic S3 error: Error performing GET http://x in 1ms - Server returned non-2xx status code: 503 Service Unavailable: "),
            Some(503)
        );
        assert_eq!(status_of("connection reset"), None);
    }
}
