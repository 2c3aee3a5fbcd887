//! `http(s)://host[:port]/path`: a plain web server, read-only (GET and HEAD, no listing).
//! Plain `http://` for a loopback server only (elsewhere with `AWS_ALLOW_HTTP=true`, as for
//! S3 endpoints).

use super::error::SetupError;
use super::kind::{client_options, no_retries, Stores};
use super::{StoreKind, StoreUrl};
use object_store::http::HttpBuilder;
use std::sync::Arc;

/// A plain HTTP server (see the module).
#[derive(Debug)]
pub struct Http;

impl StoreKind for Http {
    fn schemes(&self) -> &'static [&'static str] {
        &["http", "https"]
    }

    fn name(&self) -> &'static str {
        "HTTP server"
    }

    fn authority(&self, authority: &str) -> Result<(String, Option<String>), &'static str> {
        if authority.is_empty() {
            return Err("no host");
        }
        if authority.contains(['@', '?', '#']) {
            return Err("a host[:port] without user, query or fragment");
        }
        Ok((authority.to_string(), None))
    }

    fn credentials_hint(&self) -> &'static str {
        "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or the profile) and the bucket policy"
    }

    fn read_only(&self) -> bool {
        true
    }

    /// `url.bucket` is the server's host and port.
    fn build(&self, url: &StoreUrl, _endpoint: Option<&str>) -> Result<Stores, SetupError> {
        let server = format!("{}://{}", url.scheme, url.bucket);
        let options = client_options("AWS_ALLOW_HTTP", Some(&server))
            .map_err(|_| SetupError::PlainHttpServer)?;
        let store = HttpBuilder::new()
            .with_url(server)
            .with_client_options(options)
            .with_retry(no_retries())
            .build()
            .map_err(SetupError::Builder)?;
        Ok((Arc::new(store), None))
    }
}
