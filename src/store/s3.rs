//! `s3://bucket/prefix`: AWS S3 and S3-compatible stores. Configured from the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
//! `AWS_ENDPOINT_URL[_S3]`, ...); the `endpoint` overrides `AWS_ENDPOINT_URL`.

use super::error::SetupError;
use super::kind::{client_options, metadata_disabled, named, no_retries, writable, Stores};
use super::{StoreKind, StoreUrl};
use object_store::aws::AmazonS3Builder;

/// Amazon S3 (see the module).
#[derive(Debug)]
pub struct S3;

impl StoreKind for S3 {
    fn schemes(&self) -> &'static [&'static str] {
        &["s3"]
    }

    fn name(&self) -> &'static str {
        "S3"
    }

    fn authority(&self, authority: &str) -> Result<(String, Option<String>), &'static str> {
        named(
            authority,
            "no bucket name",
            |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.',
            "a bucket name holds lowercase letters, digits, '-' and '.' only",
        )
    }

    fn credentials_hint(&self) -> &'static str {
        "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or the profile) and the bucket policy"
    }

    fn build(&self, url: &StoreUrl, endpoint: Option<&str>) -> Result<Stores, SetupError> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(&url.bucket);
        let endpoint = endpoint
            .map(str::to_string)
            .or_else(|| std::env::var("AWS_ENDPOINT_URL_S3").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        let options = client_options("AWS_ALLOW_HTTP", endpoint.as_deref())?;
        if let Some(ep) = &endpoint {
            builder = builder.with_endpoint(ep);
            if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err()
            {
                builder = builder.with_region("us-east-1");
            }
        }
        if metadata_disabled(Some("AWS_EC2_METADATA_DISABLED")) {
            // No instance-metadata lookup: point it at a closed loopback port.
            builder = builder.with_metadata_endpoint("http://127.0.0.1:9");
        }
        writable(
            builder
                .with_client_options(options)
                .with_retry(no_retries())
                .build(),
        )
    }
}
