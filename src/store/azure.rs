//! Azure Blob Storage and ADLS Gen2: object_store's Azure client, its account and credentials
//! from the environment as object_store reads them (`AZURE_STORAGE_ACCOUNT_NAME`,
//! `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_TOKEN`, a service principal's
//! `AZURE_CLIENT_ID`/`AZURE_CLIENT_SECRET`/`AZURE_TENANT_ID`, managed identity;
//! `AZURE_STORAGE_USE_EMULATOR=true` for Azurite), the container and account from the location
//! (`abfss://container@account.dfs.core.windows.net/…`, `az://container/…`).
//! DuckDB reads the data with a secret made from the same environment ([`super::duckdb`]).
//! Not yet (issue 33): catalog properties (`adls.*`), a client cache per container.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::azure::MicrosoftAzureBuilder;

use super::location::ObjectLocation;
use super::redact::scrub;
use crate::error::{Error, ErrorKind, Result};

/// The client of the container `object` is in.
pub fn client(object: &ObjectLocation) -> Result<Arc<dyn ObjectStore>> {
    let url = object.with_key("").to_uri();
    let store = MicrosoftAzureBuilder::from_env().with_url(url.trim_end_matches('/')).build().map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("cannot reach Azure storage for '{}': {}", object.to_uri(), scrub(&e)),
        )
    })?;
    Ok(Arc::new(store))
}
