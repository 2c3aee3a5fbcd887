//! `gs://bucket/prefix`: Google Cloud Storage. Configured from the environment
//! (`GOOGLE_APPLICATION_CREDENTIALS`, `GOOGLE_SERVICE_ACCOUNT` (a service-account JSON
//! file, which may hold `"gcs_base_url"` and `"disable_oauth": true` for an emulator),
//! `GOOGLE_SERVICE_ACCOUNT_KEY`, `GOOGLE_BEARER_TOKEN`, `GOOGLE_SKIP_SIGNATURE`); the
//! `endpoint` is the base URL (an emulator's).

use super::error::SetupError;
use super::kind::{client_options, metadata_disabled, named, no_retries, writable, Stores};
use super::{StoreKind, StoreUrl};
use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::StaticCredentialProvider;
use std::sync::Arc;

/// Google Cloud Storage (see the module).
#[derive(Debug)]
pub struct Gcs;

/// The default file of `gcloud auth application-default login`.
fn gcloud_adc_file() -> Option<std::path::PathBuf> {
    let home = std::env::var_os("HOME")?;
    let f = std::path::Path::new(&home).join(".config/gcloud/application_default_credentials.json");
    f.is_file().then_some(f)
}

/// The `gcs_base_url` of the service-account file (an emulator's), for the plain-`http://`
/// check: object_store reads it itself when it builds the store.
fn account_base_url(builder: &GoogleCloudStorageBuilder) -> Option<String> {
    let path = builder.get_config_value(&GoogleConfigKey::ServiceAccount)?;
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("gcs_base_url")?.as_str().map(str::to_string)
}

impl StoreKind for Gcs {
    fn schemes(&self) -> &'static [&'static str] {
        &["gs"]
    }

    fn name(&self) -> &'static str {
        "Google Cloud Storage"
    }

    fn authority(&self, authority: &str) -> Result<(String, Option<String>), &'static str> {
        named(
            authority,
            "no bucket name",
            |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' || c == '_',
            "a bucket name holds lowercase letters, digits, '-', '_' and '.' only",
        )
    }

    fn credentials_hint(&self) -> &'static str {
        "GOOGLE_APPLICATION_CREDENTIALS (or GOOGLE_SERVICE_ACCOUNT) and the bucket's IAM \
         permissions"
    }

    fn build(&self, url: &StoreUrl, endpoint: Option<&str>) -> Result<Stores, SetupError> {
        let mut builder = GoogleCloudStorageBuilder::from_env().with_bucket_name(&url.bucket);
        if let Some(ep) = endpoint {
            builder = builder.with_base_url(ep);
        }
        let base = builder
            .get_config_value(&GoogleConfigKey::BaseUrl)
            .or_else(|| account_base_url(&builder));
        let options = client_options("GOOGLE_ALLOW_HTTP", base.as_deref())?;
        let set = |k: GoogleConfigKey| builder.get_config_value(&k).is_some_and(|v| !v.is_empty());
        let skip = builder
            .get_config_value(&GoogleConfigKey::SkipSignature)
            .is_some_and(|v| v == "true");
        let given = set(GoogleConfigKey::ServiceAccount)
            || set(GoogleConfigKey::ServiceAccountKey)
            || set(GoogleConfigKey::ApplicationCredentials)
            || set(GoogleConfigKey::BearerToken)
            || std::env::var_os("SERVICE_ACCOUNT").is_some()
            || gcloud_adc_file().is_some();
        if skip && !given {
            // Unsigned (a public bucket, an emulator): object_store 0.14 still asks for a
            // token on writes (PUT, multipart), from the instance metadata server; give it
            // an empty one instead, so that nothing is asked of that server.
            builder =
                builder.with_credentials(Arc::new(StaticCredentialProvider::new(GcpCredential {
                    bearer: String::new(),
                })));
        } else if !given && metadata_disabled(Some("NO_GCE_CHECK")) {
            return Err(SetupError::NoCredentials(
                "no credentials (GOOGLE_APPLICATION_CREDENTIALS, GOOGLE_SERVICE_ACCOUNT, \
                 GOOGLE_SERVICE_ACCOUNT_KEY, GOOGLE_BEARER_TOKEN or \
                 GOOGLE_SKIP_SIGNATURE=true), and the instance-metadata server is not asked \
                 (IMGFEED_NO_METADATA or NO_GCE_CHECK)",
            ));
        }
        writable(
            builder
                .with_client_options(options)
                .with_retry(no_retries())
                .build(),
        )
    }
}
