//! `s3://bucket/prefix`: AWS S3 and S3-compatible stores. Configured from the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
//! `AWS_ENDPOINT_URL[_S3]`, ...); the `endpoint` overrides `AWS_ENDPOINT_URL`.

use super::error::SetupError;
use super::kind::{client_options, metadata_disabled, named, no_retries, writable, Stores};
use super::{StoreKind, StoreUrl};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};

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
            if !credentials_given(&builder) {
                // Nothing to sign with and no metadata server to ask: say so before any
                // request (the client would otherwise retry a closed port for seconds).
                return Err(SetupError::NoCredentials(
                    "no credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
                     AWS_WEB_IDENTITY_TOKEN_FILE, AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or \
                     _FULL_URI, or AWS_SKIP_SIGNATURE=true), and the instance-metadata server \
                     is not asked (IMGFEED_NO_METADATA or AWS_EC2_METADATA_DISABLED)",
                ));
            }
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

/// Whether the environment gives the client something to sign with (or says not to sign)
/// other than the instance-metadata server.
fn credentials_given(builder: &AmazonS3Builder) -> bool {
    let set = |k: AmazonS3ConfigKey| builder.get_config_value(&k).is_some_and(|v| !v.is_empty());
    let keys = set(AmazonS3ConfigKey::AccessKeyId) && set(AmazonS3ConfigKey::SecretAccessKey);
    let unsigned = builder
        .get_config_value(&AmazonS3ConfigKey::SkipSignature)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    keys || unsigned
        || set(AmazonS3ConfigKey::WebIdentityTokenFile)
        || set(AmazonS3ConfigKey::ContainerCredentialsRelativeUri)
        || set(AmazonS3ConfigKey::ContainerCredentialsFullUri)
}
