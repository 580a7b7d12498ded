//! The AWS Glue Data Catalog (`type: glue`), configured with pyiceberg's and Java's property
//! names: `glue.region` (else `client.region`, `AWS_REGION`, the profile's region), `glue.id`
//! (the catalog id, an account number; default the caller's), `glue.endpoint` (else
//! `AWS_ENDPOINT_URL_GLUE`, `AWS_ENDPOINT_URL`, AWS's), `glue.profile-name`,
//! `glue.access-key-id`/`glue.secret-access-key`/`glue.session-token` (else `client.*`, else the
//! credential chain). Requests are Glue's JSON API, SigV4-signed ([`super::sigv4`]).
//!
//! A table is read through `GetTable`: its `metadata_location` parameter (the table must have
//! `table_type` `ICEBERG`). A commit is Java's `GlueTableOperations` commit: the new metadata file
//! is written first (by [`crate::table::iceberg::commit`]), then the table is read again — a
//! `metadata_location` other than the base is a conflict — and `UpdateTable` moves the pointer
//! under `VersionId`, Glue's optimistic lock (`ConcurrentModificationException` is a conflict), with
//! `previous_metadata_location` set and every other field of the table kept as it was. An answer
//! that never came (5xx, a timeout, a dropped connection) leaves the outcome unknown: the caller
//! reads the table again to settle it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::config::CatalogConfig;
use super::pointer::Swap;
use super::sigv4::{Signer, first};
use crate::error::{Error, ErrorKind, Result};

/// The registry's entry: `type: glue` (found without a `uri`).
pub const KIND: super::Kind = super::Kind { name: "glue", describes: "AWS Glue", needs_uri: false, open };

fn open(config: &CatalogConfig) -> Result<std::sync::Arc<dyn super::Catalog>> {
    Ok(std::sync::Arc::new(GlueCatalog::connect(config)?))
}

/// A Glue catalog session.
pub struct GlueCatalog {
    /// The catalog's name (for messages).
    pub name: String,
    endpoint: String,
    catalog_id: Option<String>,
    skip_archive: bool,
    signer: Signer,
    client: reqwest::Client,
    /// The catalog's properties (`s3.*` apply to its tables' files).
    pub properties: BTreeMap<String, String>,
}

/// Shows where the catalog is, never what authenticates to it: keys are redacted (the signer's and
/// the properties', [`crate::catalog::config::RedactedProperties`]).
impl std::fmt::Debug for GlueCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlueCatalog")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("catalog_id", &self.catalog_id)
            .field("skip_archive", &self.skip_archive)
            .field("signer", &self.signer)
            .field("properties", &crate::catalog::config::RedactedProperties(&self.properties))
            .finish()
    }
}

impl PartialEq for GlueCatalog {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.endpoint == other.endpoint && self.catalog_id == other.catalog_id
    }
}

/// A Glue table as `GetTable` returns it.
#[derive(Debug, Clone)]
pub struct GlueTable {
    /// The `metadata_location` parameter.
    pub metadata_location: String,
    /// Glue's version of the table entry (the optimistic lock).
    pub version_id: Option<String>,
    raw: Value,
}

/// The fields of a Glue `Table` that `TableInput` takes (the others are Glue's own).
const TABLE_INPUT_FIELDS: &[&str] = &[
    "Name",
    "Description",
    "Owner",
    "LastAccessTime",
    "LastAnalyzedTime",
    "Retention",
    "StorageDescriptor",
    "PartitionKeys",
    "ViewOriginalText",
    "ViewExpandedText",
    "TableType",
    "Parameters",
    "TargetTable",
];

impl GlueCatalog {
    /// A session on the Glue catalog `config` describes (no request is sent yet).
    pub fn connect(config: &CatalogConfig) -> Result<Self> {
        let name = config.name.clone();
        let props = &config.properties;
        let what = format!("Glue catalog '{name}'");
        let signer = Signer::from_properties(props, "glue", "glue", None, &what)?;
        let endpoint = first(props, &["glue.endpoint"])
            .cloned()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL_GLUE").ok().filter(|v| !v.is_empty()))
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok().filter(|v| !v.is_empty()))
            .unwrap_or_else(|| format!("https://glue.{}.amazonaws.com", signer.region));
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(Error::new(ErrorKind::Catalog, format!("{what}: glue.endpoint must be an http(s) URL")));
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::new(ErrorKind::Catalog, format!("{what}: {e}")))?;
        Ok(GlueCatalog {
            name,
            endpoint: endpoint.trim_end_matches('/').to_string() + "/",
            catalog_id: first(props, &["glue.id", "glue.catalog-id"]).cloned(),
            skip_archive: first(props, &["glue.skip-archive"]).is_none_or(|v| !v.eq_ignore_ascii_case("false")),
            signer,
            client,
            properties: props.clone(),
        })
    }

    fn what(&self) -> String {
        format!("Glue catalog '{}'", self.name)
    }

    /// One JSON API call; `Ok(Err((status, error type, message)))` when Glue refused it.
    async fn call(&self, operation: &str, mut body: Value) -> Result<std::result::Result<Value, Refusal>> {
        if let (Some(id), Some(object)) = (&self.catalog_id, body.as_object_mut()) {
            object.insert("CatalogId".into(), json!(id));
        }
        let mut request = self
            .client
            .post(&self.endpoint)
            .header("Content-Type", "application/x-amz-json-1.1")
            .header("X-Amz-Target", format!("AWSGlue.{operation}"))
            .body(body.to_string())
            .build()
            .map_err(|e| Error::new(ErrorKind::Catalog, format!("{}: {e}", self.what())))?;
        self.signer.sign(&mut request).await?;
        let response = self.client.execute(request).await.map_err(|e| {
            let why = if e.is_timeout() {
                "timed out".to_string()
            } else if e.is_connect() {
                "cannot connect".to_string()
            } else {
                e.to_string()
            };
            Error::new(ErrorKind::CommitUnknown, format!("{}: {operation}: {why}", self.what()))
        })?;
        let status = response.status();
        let header_type = response
            .headers()
            .get("x-amzn-errortype")
            .and_then(|v| v.to_str().ok())
            .map(|t| t.split(':').next().unwrap_or(t).to_string());
        let text = response.text().await.unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(Ok(value));
        }
        // JSON (`__type`, `message`), else the XML an authentication failure may come as.
        let kind = value
            .get("__type")
            .and_then(Value::as_str)
            .map(|t| t.rsplit('#').next().unwrap_or(t).to_string())
            .or(header_type)
            .or_else(|| xml_element(&text, "Code"))
            .unwrap_or_default();
        let message = ["Message", "message"]
            .iter()
            .find_map(|k| value.get(*k).and_then(Value::as_str).map(str::to_string))
            .or_else(|| xml_element(&text, "Message"))
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect();
        Ok(Err(Refusal { status: status.as_u16(), kind, message }))
    }

    /// `GetTable` for `database.table`: its metadata location and version.
    pub async fn get_table(&self, database: &str, table: &str) -> Result<GlueTable> {
        let answer = self.call("GetTable", json!({ "DatabaseName": database, "Name": table })).await.map_err(|e| {
            // Nothing was changed by a read that was not answered.
            if e.kind() == ErrorKind::CommitUnknown {
                Error::new(ErrorKind::Catalog, e.message().to_string())
            } else {
                e
            }
        })?;
        let body = answer.map_err(|refusal| {
            let kind = if refusal.kind == "EntityNotFoundException" { ErrorKind::NotFound } else { ErrorKind::Catalog };
            Error::new(kind, format!("{}: cannot read table '{database}.{table}': {refusal}", self.what()))
        })?;
        let raw = body.get("Table").cloned().unwrap_or(Value::Null);
        let parameter = |key: &str| raw.pointer(&format!("/Parameters/{key}")).and_then(Value::as_str);
        let table_type = parameter("table_type").unwrap_or("");
        if !table_type.eq_ignore_ascii_case("ICEBERG") {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{}: table '{database}.{table}' is not an Iceberg table (table_type '{table_type}'); Iceberg tables \
                     are read through Glue, Delta tables by their location",
                    self.what()
                ),
            ));
        }
        let metadata_location = parameter("metadata_location")
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Catalog,
                    format!("{}: table '{database}.{table}' has no metadata_location", self.what()),
                )
            })?
            .to_string();
        let version_id = raw.get("VersionId").and_then(Value::as_str).map(str::to_string);
        Ok(GlueTable { metadata_location, version_id, raw })
    }

    /// Moves `database.table`'s pointer from `base` to `new_location` (see the module doc).
    pub async fn swap_pointer(&self, database: &str, table: &str, base: &str, new_location: &str) -> Result<Swap> {
        let current = self.get_table(database, table).await?;
        if current.metadata_location != base {
            return Ok(Swap::Conflict);
        }
        let mut input = serde_json::Map::new();
        for field in TABLE_INPUT_FIELDS {
            if let Some(value) = current.raw.get(*field) {
                input.insert(field.to_string(), value.clone());
            }
        }
        let mut parameters = current.raw.get("Parameters").and_then(Value::as_object).cloned().unwrap_or_default();
        parameters.insert("metadata_location".into(), json!(new_location));
        parameters.insert("previous_metadata_location".into(), json!(base));
        parameters.insert("table_type".into(), json!("ICEBERG"));
        input.insert("Parameters".into(), Value::Object(parameters));
        input.insert("Name".into(), json!(table));
        let mut body = json!({ "DatabaseName": database, "TableInput": input, "SkipArchive": self.skip_archive });
        if let Some(version) = &current.version_id {
            body["VersionId"] = json!(version);
        }
        let answer = match self.call("UpdateTable", body).await {
            Ok(answer) => answer,
            Err(e) if e.kind() == ErrorKind::CommitUnknown => return Ok(Swap::Unknown(e.message().to_string())),
            Err(e) => return Err(e),
        };
        match answer {
            Ok(_) => Ok(Swap::Moved),
            Err(refusal) if refusal.kind == "ConcurrentModificationException" => Ok(Swap::Conflict),
            Err(refusal) if refusal.status >= 500 => {
                Ok(Swap::Unknown(format!("{}: UpdateTable was not answered: {refusal}", self.what())))
            }
            Err(refusal) => Err(Error::new(
                ErrorKind::Catalog,
                format!("{}: cannot update table '{database}.{table}': {refusal}", self.what()),
            )),
        }
    }
}

/// Glue's pointer is moved by us ([`GlueCatalog::swap_pointer`]); the catalog's storage
/// properties apply to its tables' files.
impl super::Catalog for GlueCatalog {
    fn name(&self) -> &str {
        &self.name
    }

    fn load(&self, namespace: &str, table: &str) -> Result<String> {
        let found = crate::runtime::block_on(self.get_table(namespace, table))??;
        super::register_table_settings(&found.metadata_location, &self.properties);
        Ok(found.metadata_location)
    }

    fn reload(&self, namespace: &str, table: &str) -> Result<String> {
        Ok(crate::runtime::block_on(self.get_table(namespace, table))??.metadata_location)
    }

    fn swap<'a>(&'a self, to: super::Move<'a>) -> futures::future::BoxFuture<'a, Result<Swap>> {
        Box::pin(self.swap_pointer(to.namespace, to.table, to.base, to.new_location))
    }
}

/// The text of the first `<name>` element of an XML error body (CDATA unwrapped).
fn xml_element(text: &str, name: &str) -> Option<String> {
    let start = text.find(&format!("<{name}>"))? + name.len() + 2;
    let end = start + text[start..].find(&format!("</{name}>"))?;
    let inner = text[start..end].trim();
    let inner = inner.strip_prefix("<![CDATA[").and_then(|i| i.strip_suffix("]]>")).unwrap_or(inner);
    (!inner.is_empty()).then(|| inner.to_string())
}

/// Glue's refusal of a call: HTTP status, error type and message (Glue's messages name the
/// resource, never a credential).
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    status: u16,
    kind: String,
    message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.kind.is_empty() { "error" } else { self.kind.as_str() };
        write!(f, "{kind} (HTTP {})", self.status)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_shows_no_secret() {
        let properties: BTreeMap<String, String> = [
            ("glue.region", "eu-west-1"),
            ("glue.access-key-id", "AKIDGLUESECRET1"),
            ("glue.secret-access-key", "glue-secret-2"),
            ("s3.secret-access-key", "s3-secret-3"),
            ("glue.endpoint", "http://127.0.0.1:5000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let glue = GlueCatalog::connect(&CatalogConfig { name: "prod".into(), properties }).unwrap();
        let shown = format!("{glue:?}");
        for secret in ["AKIDGLUESECRET1", "glue-secret-2", "s3-secret-3"] {
            assert!(!shown.contains(secret), "{secret} leaked: {shown}");
        }
        assert!(shown.contains("127.0.0.1:5000") && shown.contains("eu-west-1"), "{shown}");
        let xml = "<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code><Message><![CDATA[bad]]></Message></Error>";
        assert_eq!(xml_element(xml, "Code").as_deref(), Some("SignatureDoesNotMatch"));
        assert_eq!(xml_element(xml, "Message").as_deref(), Some("bad"));
    }
}
