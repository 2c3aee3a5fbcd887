//! `az://container/prefix` and `abfs[s]://container@account.dfs.core.windows.net/prefix`:
//! Azure Blob Storage. Configured from the environment (`AZURE_STORAGE_ACCOUNT_NAME`,
//! `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_TOKEN`, `AZURE_STORAGE_TOKEN`, the
//! `AZURE_CLIENT_ID`/`AZURE_CLIENT_SECRET`/`AZURE_TENANT_ID` service principal,
//! `AZURE_STORAGE_USE_EMULATOR` for Azurite at `AZURITE_BLOB_STORAGE_URL`); the account from
//! the URL or `AZURE_STORAGE_ACCOUNT_NAME`; the `endpoint` is the blob service URL
//! (path-style for Azurite: `http://127.0.0.1:10000/devstoreaccount1`).

use super::error::SetupError;
use super::kind::{client_options, metadata_disabled, named, no_retries, writable, Stores};
use super::{StoreKind, StoreUrl};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};

/// Azure Blob Storage (see the module).
#[derive(Debug)]
pub struct Azure;

impl StoreKind for Azure {
    fn schemes(&self) -> &'static [&'static str] {
        &["az", "abfs", "abfss"]
    }

    fn name(&self) -> &'static str {
        "Azure Blob Storage"
    }

    fn authority(&self, authority: &str) -> Result<(String, Option<String>), &'static str> {
        let (container, account) = match authority.split_once('@') {
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
                    .ok_or(
                        "an Azure location is az://container/prefix or \
                         abfs[s]://container@account.dfs.core.windows.net/prefix",
                    )?;
                (container, Some(account.to_string()))
            }
        };
        let (container, _) = named(
            container,
            "no container name",
            |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-',
            "a container name holds lowercase letters, digits and '-' only",
        )?;
        Ok((container, account))
    }

    fn credentials_hint(&self) -> &'static str {
        "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or a SAS token, a \
         service principal) and the container's access"
    }

    fn build(&self, url: &StoreUrl, endpoint: Option<&str>) -> Result<Stores, SetupError> {
        let mut builder = MicrosoftAzureBuilder::from_env().with_container_name(&url.bucket);
        if let Some(account) = &url.account {
            builder = builder.with_account(account);
        }
        if let Some(ep) = endpoint {
            builder = builder
                .with_endpoint(ep.to_string())
                .with_use_emulator(false);
        }
        let emulator = builder
            .get_config_value(&AzureConfigKey::UseEmulator)
            .is_some_and(|v| v == "true");
        let at = builder.get_config_value(&AzureConfigKey::Endpoint);
        let options = client_options(
            "AZURE_ALLOW_HTTP",
            if emulator { None } else { at.as_deref() },
        )?;
        if !emulator && metadata_disabled(None) {
            let set =
                |k: AzureConfigKey| builder.get_config_value(&k).is_some_and(|v| !v.is_empty());
            let flag =
                |k: AzureConfigKey| builder.get_config_value(&k).is_some_and(|v| v == "true");
            let found = set(AzureConfigKey::AccessKey)
                || set(AzureConfigKey::SasKey)
                || set(AzureConfigKey::Token)
                || set(AzureConfigKey::ClientSecret)
                || set(AzureConfigKey::FederatedTokenFile)
                || flag(AzureConfigKey::UseAzureCli)
                || flag(AzureConfigKey::SkipSignature);
            if !found {
                return Err(SetupError::NoCredentials(
                    "no credentials (AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN, \
                     AZURE_STORAGE_TOKEN, a service principal, or \
                     AZURE_STORAGE_USE_EMULATOR=true), and the managed-identity endpoint is \
                     not asked (IMGFEED_NO_METADATA)",
                ));
            }
        }
        writable(
            builder
                .with_client_options(options)
                .with_retry(no_retries())
                .build(),
        )
    }
}
