//! What a store is: [`StoreKind`], one implementation per file ([`super::s3`], ...),
//! registered in [`super::STORES`]; and what setting up a client shares across stores
//! (timeouts, plain `http://` for loopback endpoints only, no retries of the store's own,
//! the environment switch that keeps instance-metadata servers out of it).

use super::error::SetupError;
use super::url::StoreUrl;
use object_store::multipart::MultipartStore;
use object_store::{ClientOptions, ObjectStore, RetryConfig};
use std::sync::Arc;
use std::time::Duration;

/// Timeout of one request (headers and body), and of connecting.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A store, and the same as multipart uploads (`None`: read-only).
pub type Stores = (Arc<dyn ObjectStore>, Option<Arc<dyn MultipartStore>>);

/// One kind of store: its schemes, its naming rules, its credentials and how its client is
/// built. A new store is a file implementing this plus one line of [`super::STORES`].
pub trait StoreKind: Sync + std::fmt::Debug {
    /// The URL schemes it serves, without `://` (`["s3"]`).
    fn schemes(&self) -> &'static [&'static str];
    /// Its name, for messages.
    fn name(&self) -> &'static str;
    /// Split a location's authority (what stands between `://` and the key prefix) into
    /// the bucket (container, host) and the account it names, checking the names; the
    /// error says why it is not usable.
    fn authority(&self, authority: &str) -> Result<(String, Option<String>), &'static str>;
    /// Where its credentials come from, for an access-denied message.
    fn credentials_hint(&self) -> &'static str;
    /// Whether it is read-only (GET and HEAD, no listing).
    fn read_only(&self) -> bool {
        false
    }
    /// Its client for `url`; `endpoint` says where it is reached (see [`super::client`]).
    fn build(&self, url: &StoreUrl, endpoint: Option<&str>) -> Result<Stores, SetupError>;
}

/// A bucket or container name: not empty (`empty` says what is missing) and of the
/// characters `ok` takes (`rule` says which).
pub(crate) fn named(
    authority: &str,
    empty: &'static str,
    ok: impl Fn(char) -> bool,
    rule: &'static str,
) -> Result<(String, Option<String>), &'static str> {
    if authority.is_empty() {
        return Err(empty);
    }
    if !authority.chars().all(ok) {
        return Err(rule);
    }
    Ok((authority.to_string(), None))
}

pub(crate) fn is_loopback(endpoint: &str) -> bool {
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

/// Whether the variable `name` says `1` or `true`.
pub(crate) fn env_true(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"))
}

/// Whether instance-metadata lookups are off: `IMGFEED_NO_METADATA`, or the store's own
/// variable `own` (`AWS_EC2_METADATA_DISABLED`, `NO_GCE_CHECK`).
pub(crate) fn metadata_disabled(own: Option<&str>) -> bool {
    env_true("IMGFEED_NO_METADATA") || own.is_some_and(env_true)
}

/// The client options for a store reached at `endpoint`: timeouts, and plain `http://`
/// for a loopback endpoint (elsewhere when the store's variable `allow_http` allows it).
pub(crate) fn client_options(
    allow_http: &'static str,
    endpoint: Option<&str>,
) -> Result<ClientOptions, SetupError> {
    let mut options = ClientOptions::new()
        .with_timeout(REQUEST_TIMEOUT)
        .with_connect_timeout(CONNECT_TIMEOUT);
    if env_true(allow_http) {
        options = options.with_allow_http(true);
    }
    if let Some(ep) = endpoint {
        if ep.starts_with("http://") {
            if !is_loopback(ep) && !env_true(allow_http) {
                return Err(SetupError::PlainHttp {
                    endpoint: ep.to_string(),
                    var: allow_http,
                });
            }
            options = options.with_allow_http(true);
        } else if !ep.starts_with("https://") {
            return Err(SetupError::NotHttp(ep.to_string()));
        }
    }
    Ok(options)
}

/// The stores' own retries are off: every request goes through [`super::RetryPolicy`].
pub(crate) fn no_retries() -> RetryConfig {
    RetryConfig {
        max_retries: 0,
        ..RetryConfig::default()
    }
}

/// What every writable store's builder ends with: the built store, for reads and for
/// multipart uploads.
pub(crate) fn writable<S: ObjectStore + MultipartStore>(
    built: object_store::Result<S>,
) -> Result<Stores, SetupError> {
    let store = Arc::new(built.map_err(SetupError::Builder)?);
    Ok((store.clone(), Some(store)))
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
}
