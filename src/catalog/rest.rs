//! Iceberg REST catalogs (Polaris, Lakekeeper, Nessie, Unity, Apache Iceberg's REST server),
//! configured as pyiceberg users configure them: `type: rest`, `uri`, `warehouse`, `credential`
//! (`client_id:client_secret`, OAuth2 client credentials against `oauth2-server-uri`, default
//! `{uri}/v1/oauth/tokens`), `token`, `scope`, `prefix` (else the one `/v1/config` returns) and
//! `header.<name>`; with `rest.sigv4-enabled: true` every request is SigV4-signed
//! ([`super::sigv4`]) for `rest.signing-name` (default `execute-api`; `glue` for Glue's Iceberg
//! endpoint, `s3tables` for S3 Tables') in `rest.signing-region`, with the `client.*` keys, profile
//! or the AWS credential chain.
//!
//! Tables are loaded with `X-Iceberg-Access-Delegation: vended-credentials`; the S3 settings of
//! the table are, key by key, the vended credentials (the response's `config` or the longest
//! matching `storage-credentials` prefix), then the catalog's properties (with `/v1/config`'s
//! defaults and overrides), then the AWS environment ([`crate::store`]). They are registered for
//! the table's root only ([`LoadedTable::register`]), and an S3 endpoint other than the one the
//! catalog's configuration (or the AWS environment) names is refused unless the configuration
//! says `lakehouse.trust-catalog-endpoint: true`: a catalog's response cannot send this
//! extension's S3 requests, with their credentials, to a server of its choosing.
//!
//! Commits POST the changes (`add-snapshot`, `set-snapshot-ref`, `remove-snapshots`, …) with the
//! requirements `assert-table-uuid` and `assert-ref-snapshot-id` on `main`: the catalog is the
//! lock. 409 is a conflict (reload, re-plan, retry); a 5xx or a timeout leaves the outcome
//! unknown ([`Published::Unknown`]): the caller reloads and checks before retrying or cleaning
//! up. No token, secret or credential appears in an error.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::catalog::config::CatalogConfig;
use crate::catalog::pointer::Published;
use crate::error::{Error, ErrorKind, Result};
use crate::runtime;
use crate::store::S3Settings;

/// A REST catalog session: base URL, prefix, headers and the bearer token.
pub struct RestCatalog {
    /// The catalog's name (for messages).
    pub name: String,
    base: String,
    prefix: Option<String>,
    headers: Vec<(String, String)>,
    token: Option<String>,
    /// Properties after `/v1/config` (defaults < configured < overrides).
    pub properties: BTreeMap<String, String>,
    client: reqwest::Client,
    /// With `rest.sigv4-enabled`: every request SigV4-signed.
    signer: Option<crate::catalog::sigv4::Signer>,
    /// The S3 endpoint the user configured (the catalog's `s3.endpoint`, else the AWS
    /// environment's), the only one a response may name unless [`TRUST_ENDPOINT`] is set.
    configured_endpoint: Option<String>,
    /// [`TRUST_ENDPOINT`] is `true` in the catalog's configuration.
    trusts_endpoint: bool,
}

/// The catalog property that lets the catalog's responses (vended `config`, `/v1/config`'s
/// defaults and overrides) name an S3 endpoint other than the configured one.
pub const TRUST_ENDPOINT: &str = "lakehouse.trust-catalog-endpoint";

/// Shows where the catalog is, never what authenticates to it: the token, header values and
/// secret properties are redacted ([`crate::catalog::config::RedactedProperties`]).
impl std::fmt::Debug for RestCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::catalog::config::{RedactedProperties, redact_uri};
        let headers: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("RestCatalog")
            .field("name", &self.name)
            .field("base", &redact_uri(&self.base))
            .field("prefix", &self.prefix)
            .field("headers (values redacted)", &headers)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("properties", &RedactedProperties(&self.properties))
            .field("signer", &self.signer)
            .finish()
    }
}

impl PartialEq for RestCatalog {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.base == other.base && self.prefix == other.prefix
    }
}

/// A table as the catalog serves it.
#[derive(Debug, Clone)]
pub struct LoadedTable {
    /// `metadata-location`.
    pub metadata_location: String,
    /// The table's `location`.
    pub location: String,
    /// The table's S3 settings: vended, then the catalog's.
    pub s3: S3Settings,
}

impl LoadedTable {
    /// Registers the table's S3 settings ([`crate::store::register`]) for the files under its
    /// root — the directory of the metadata file the catalog points to
    /// ([`crate::store::TableRoot`]) — not under the `location` the response claims: they reach
    /// no other table's files, whatever the catalog says.
    pub fn register(&self) -> Result<()> {
        if crate::store::local_path(&self.metadata_location).is_none() {
            let root = crate::store::TableRoot::of_metadata_file(&self.metadata_location)?;
            crate::store::register(&root.location(), self.s3.clone());
        }
        Ok(())
    }
}

/// The registry's entry: `type: rest`, the default for an http(s) `uri`.
pub const KIND: crate::catalog::Kind =
    crate::catalog::Kind { name: "rest", describes: "REST catalogs", needs_uri: true, open };

fn open(config: &CatalogConfig) -> Result<std::sync::Arc<dyn crate::catalog::Catalog>> {
    Ok(std::sync::Arc::new(RestCatalog::connect(config)?))
}

/// A REST catalog takes changes under requirements and writes the metadata itself; its tables'
/// settings are the vended ones, registered on every load.
impl crate::catalog::Catalog for RestCatalog {
    fn name(&self) -> &str {
        &self.name
    }

    fn load(&self, namespace: &str, table: &str) -> Result<String> {
        let loaded = self.load_table(namespace, table)?;
        loaded.register()?;
        Ok(loaded.metadata_location)
    }

    fn takes_changes(&self) -> bool {
        true
    }

    fn publish(&self, namespace: &str, table: &str, requirements: Value, updates: Value) -> Result<Published> {
        self.commit(namespace, table, requirements, updates)
    }
}

const TIMEOUT: Duration = Duration::from_secs(60);

fn encode(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A namespace in a URL path: levels joined by the unit separator, percent-encoded.
fn namespace_path(namespace: &str) -> String {
    encode(&namespace.split('.').collect::<Vec<_>>().join("\u{1f}"))
}

impl RestCatalog {
    /// Opens a session on the catalog `config` describes: a token (given, or fetched with the
    /// client credentials), then `/v1/config`.
    pub fn connect(config: &CatalogConfig) -> Result<Self> {
        let name = config.name.clone();
        let props = &config.properties;
        let uri = props
            .get("uri")
            .ok_or_else(|| Error::new(ErrorKind::Catalog, format!("REST catalog '{name}' has no uri")))?;
        if !(uri.starts_with("http://") || uri.starts_with("https://")) {
            return Err(Error::new(ErrorKind::Catalog, format!("REST catalog '{name}': uri must be an http(s) URL")));
        }
        let base = uri.trim_end_matches('/').to_string();
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::new(ErrorKind::Catalog, format!("REST catalog '{name}': {e}")))?;
        let headers: Vec<(String, String)> =
            props.iter().filter_map(|(k, v)| k.strip_prefix("header.").map(|h| (h.to_string(), v.clone()))).collect();
        let signer = if props.get("rest.sigv4-enabled").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            let service = props.get("rest.signing-name").map_or("execute-api", String::as_str);
            let region = props.get("rest.signing-region").map(String::as_str);
            Some(crate::catalog::sigv4::Signer::from_properties(
                props,
                "rest",
                service,
                region,
                &format!("REST catalog '{name}'"),
            )?)
        } else {
            None
        };
        let configured_endpoint = props.get("s3.endpoint").cloned().or_else(|| S3Settings::from_environment().endpoint);
        let trusts_endpoint = props.get(TRUST_ENDPOINT).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let mut catalog = RestCatalog {
            name,
            base,
            prefix: None,
            headers,
            token: None,
            properties: props.clone(),
            client,
            signer,
            configured_endpoint,
            trusts_endpoint,
        };
        catalog.token = match (props.get("token"), props.get("credential")) {
            (Some(token), _) => Some(token.clone()),
            (None, Some(credential)) => Some(catalog.fetch_token(credential)?),
            (None, None) => None,
        };
        let mut query = Vec::new();
        if let Some(warehouse) = props.get("warehouse") {
            query.push(("warehouse".to_string(), warehouse.clone()));
        }
        let url = format!("{}/v1/config", catalog.base);
        let body = catalog.get(&url, &query, "read its configuration")?;
        let section = |key: &str| -> BTreeMap<String, String> {
            body.get(key)
                .and_then(Value::as_object)
                .map(|o| o.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect())
                .unwrap_or_default()
        };
        let mut merged = section("defaults");
        merged.extend(props.clone());
        merged.extend(section("overrides"));
        catalog.prefix = merged.get("prefix").filter(|p| !p.is_empty()).cloned();
        catalog.properties = merged;
        Ok(catalog)
    }

    fn fetch_token(&self, credential: &str) -> Result<String> {
        let (id, secret) = match credential.split_once(':') {
            Some((id, secret)) => (Some(id), secret),
            None => (None, credential),
        };
        let url = self
            .properties
            .get("oauth2-server-uri")
            .cloned()
            .unwrap_or_else(|| format!("{}/v1/oauth/tokens", self.base));
        let mut form = vec![("grant_type", "client_credentials".to_string()), ("client_secret", secret.to_string())];
        if let Some(id) = id {
            form.push(("client_id", id.to_string()));
        }
        form.push(("scope", self.properties.get("scope").cloned().unwrap_or_else(|| "catalog".into())));
        for key in ["audience", "resource"] {
            if let Some(v) = self.properties.get(key) {
                form.push((key, v.clone()));
            }
        }
        let request = self.with_headers(self.client.post(&url)).form(&form);
        let response = self.send(request)?.map_err(|e| self.transport("obtain a token", &e))?;
        let status = response.status();
        let body: Value = runtime::block_on(async move { response.json().await })?.unwrap_or(Value::Null);
        if !status.is_success() {
            return Err(Error::new(
                ErrorKind::Catalog,
                format!(
                    "REST catalog '{}': the OAuth2 token request was refused ({status}{}); check `credential`",
                    self.name,
                    error_type(&body).map(|t| format!(", {t}")).unwrap_or_default()
                ),
            ));
        }
        body.get("access_token").and_then(Value::as_str).map(str::to_string).ok_or_else(|| {
            Error::new(
                ErrorKind::Catalog,
                format!("REST catalog '{}': the token response has no access_token", self.name),
            )
        })
    }

    fn with_headers(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        for (k, v) in &self.headers {
            request = request.header(k, v);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        request
    }

    /// Sends `request`, SigV4-signed when the catalog asks for it (an `Authorization` header of
    /// its own, a bearer token, moves to `Original-Authorization`, as Java's signer does).
    fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Result<reqwest::Response>> {
        let client = self.client.clone();
        let signer = self.signer.as_ref();
        runtime::block_on(async move {
            let mut request = match request.build() {
                Ok(request) => request,
                Err(e) => return Ok(Err(e)),
            };
            if let Some(signer) = signer {
                if let Some(bearer) = request.headers_mut().remove(reqwest::header::AUTHORIZATION) {
                    request.headers_mut().insert("Original-Authorization", bearer);
                }
                signer.sign(&mut request).await?;
            }
            Ok(client.execute(request).await)
        })?
    }

    /// A transport error's message: reqwest's text names the URL, never a header.
    fn transport(&self, what: &str, e: &reqwest::Error) -> Error {
        let why = if e.is_timeout() {
            "timed out".to_string()
        } else if e.is_connect() {
            "cannot connect".to_string()
        } else {
            let text = e.to_string();
            match e.url() {
                Some(url) if url.password().is_some() => text.replace(url.as_str(), "<catalog uri>"),
                _ => text,
            }
        };
        Error::new(ErrorKind::Catalog, format!("REST catalog '{}': cannot {what}: {why}", self.name))
    }

    fn get(&self, url: &str, query: &[(String, String)], what: &str) -> Result<Value> {
        let request = self.with_headers(self.client.get(url).query(query));
        let response = self.send(request)?.map_err(|e| self.transport(what, &e))?;
        let status = response.status();
        let body: Value = runtime::block_on(async move { response.json().await })?.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let kind = if status == reqwest::StatusCode::NOT_FOUND { ErrorKind::NotFound } else { ErrorKind::Catalog };
        Err(Error::new(kind, format!("REST catalog '{}': cannot {what}: {}", self.name, describe(status, &body))))
    }

    fn table_url(&self, namespace: &str, table: &str) -> String {
        let prefix = self.prefix.as_deref().map(|p| format!("/{}", p.trim_matches('/'))).unwrap_or_default();
        format!("{}/v1{prefix}/namespaces/{}/tables/{}", self.base, namespace_path(namespace), encode(table))
    }

    /// Loads `namespace.table`, asking for vended credentials.
    pub fn load_table(&self, namespace: &str, table: &str) -> Result<LoadedTable> {
        let url = self.table_url(namespace, table);
        let request =
            self.with_headers(self.client.get(&url)).header("X-Iceberg-Access-Delegation", "vended-credentials");
        let what = format!("load table '{namespace}.{table}'");
        let response = self.send(request)?.map_err(|e| self.transport(&what, &e))?;
        let status = response.status();
        let body: Value = runtime::block_on(async move { response.json().await })?.unwrap_or(Value::Null);
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("table '{namespace}.{table}' not found in REST catalog '{}'", self.name),
            ));
        }
        if !status.is_success() {
            return Err(Error::new(
                ErrorKind::Catalog,
                format!("REST catalog '{}': cannot {what}: {}", self.name, describe(status, &body)),
            ));
        }
        let metadata_location = body.get("metadata-location").and_then(Value::as_str).ok_or_else(|| {
            Error::new(ErrorKind::Catalog, format!("REST catalog '{}': {what}: no metadata-location", self.name))
        })?;
        let location = body.pointer("/metadata/location").and_then(Value::as_str).unwrap_or_default().to_string();
        let s3 = self.table_settings(&body, &location);
        self.check_endpoint(&s3, &format!("{namespace}.{table}"))?;
        Ok(LoadedTable { metadata_location: metadata_location.to_string(), s3, location })
    }

    /// Refuses settings whose S3 endpoint is not the configured one (compared as host, port and
    /// TLS), unless the configuration trusts the catalog's ([`TRUST_ENDPOINT`]).
    fn check_endpoint(&self, settings: &S3Settings, table: &str) -> Result<()> {
        let configured = S3Settings { endpoint: self.configured_endpoint.clone(), ..Default::default() };
        // The endpoint the table's client will use: the settings', else the AWS environment's.
        let effective = S3Settings {
            endpoint: settings.endpoint.clone().or_else(|| S3Settings::from_environment().endpoint),
            ..Default::default()
        };
        let key = |s: &S3Settings| s.endpoint_host().map(|(host, tls)| (host.to_ascii_lowercase(), tls));
        if self.trusts_endpoint || key(&effective) == key(&configured) {
            return Ok(());
        }
        let shown = |s: &S3Settings| match s.endpoint_host() {
            // Only scheme, host and port: a URL's user part or path is not shown.
            Some((host, tls)) => {
                let host = host.rsplit('@').next().unwrap_or_default();
                let host = host.split('/').next().unwrap_or_default();
                format!("'{}://{host}'", if tls { "https" } else { "http" })
            }
            None => "none (AWS S3's own)".to_string(),
        };
        Err(Error::new(
            ErrorKind::Catalog,
            format!(
                "REST catalog '{}' names the S3 endpoint {} for table '{table}', but the catalog's configuration names \
                 {}: a catalog's response may not send this extension's S3 requests and credentials to another \
                 server; if you trust the catalog to choose it, set {TRUST_ENDPOINT}: true in the catalog's \
                 configuration (PYICEBERG_CATALOG__{}__LAKEHOUSE__TRUST_CATALOG_ENDPOINT=true)",
                self.name,
                shown(&effective),
                shown(&configured),
                self.name.to_uppercase().replace('-', "_")
            ),
        ))
    }

    /// The table's S3 settings: vended (longest matching `storage-credentials` prefix, else the
    /// response's `config`), then the catalog's properties.
    fn table_settings(&self, body: &Value, location: &str) -> S3Settings {
        let strings = |v: Option<&Value>| -> BTreeMap<String, String> {
            v.and_then(Value::as_object)
                .map(|o| o.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect())
                .unwrap_or_default()
        };
        let canonical = crate::store::canonical(location);
        let vended = body
            .get("storage-credentials")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| Some((crate::store::canonical(c.get("prefix")?.as_str()?), strings(c.get("config")))))
            .filter(|(prefix, _)| canonical.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, config)| config)
            .and_then(|c| S3Settings::from_properties(&c))
            .or_else(|| S3Settings::from_properties(&strings(body.get("config"))));
        let configured = S3Settings::from_properties(&self.properties).unwrap_or_default();
        match vended {
            Some(v) => v.or(&configured),
            None => configured,
        }
    }

    /// POSTs `updates` to `namespace.table` under `requirements`.
    pub fn commit(&self, namespace: &str, table: &str, requirements: Value, updates: Value) -> Result<Published> {
        let url = self.table_url(namespace, table);
        let identifier = json!({ "namespace": namespace.split('.').collect::<Vec<_>>(), "name": table });
        let body = json!({ "identifier": identifier, "requirements": requirements, "updates": updates });
        let request = self.with_headers(self.client.post(&url)).json(&body);
        let response = match self.send(request)? {
            Ok(r) => r,
            Err(e) if e.is_timeout() || e.is_request() || e.is_body() => {
                return Ok(Published::Unknown(self.transport("commit", &e).message().to_string()));
            }
            Err(e) => return Err(self.transport("commit", &e)),
        };
        let status = response.status();
        let body: Value = runtime::block_on(async move { response.json().await })?.unwrap_or(Value::Null);
        match status.as_u16() {
            200..=299 => body.get("metadata-location").and_then(Value::as_str).map_or_else(
                || Ok(Published::Unknown("the commit response has no metadata-location".into())),
                |l| Ok(Published::Committed(l.to_string())),
            ),
            409 => Ok(Published::Conflict),
            500..=599 => Ok(Published::Unknown(describe(status, &body))),
            _ => Err(Error::new(
                ErrorKind::Catalog,
                format!(
                    "REST catalog '{}': commit on '{namespace}.{table}' refused: {}",
                    self.name,
                    describe(status, &body)
                ),
            )),
        }
    }
}

fn error_type(body: &Value) -> Option<String> {
    body.pointer("/error/type").and_then(Value::as_str).map(str::to_string)
}

/// `403 Forbidden (NotAuthorizedException: …)` from a status and the spec's error body.
fn describe(status: reqwest::StatusCode, body: &Value) -> String {
    let message = body.pointer("/error/message").and_then(Value::as_str);
    match (error_type(body), message) {
        (Some(t), Some(m)) => format!("{status} ({t}: {})", m.chars().take(300).collect::<String>()),
        (Some(t), None) => format!("{status} ({t})"),
        _ => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_and_names_are_encoded_for_paths() {
        assert_eq!(namespace_path("analytics"), "analytics");
        assert_eq!(namespace_path("a.b"), "a%1Fb");
        assert_eq!(encode("my table"), "my%20table");
    }

    #[test]
    fn errors_describe_the_spec_body() {
        let body = json!({"error": {"message": "Requirement failed", "type": "CommitFailedException", "code": 409}});
        assert_eq!(
            describe(reqwest::StatusCode::CONFLICT, &body),
            "409 Conflict (CommitFailedException: Requirement failed)"
        );
        assert_eq!(describe(reqwest::StatusCode::BAD_GATEWAY, &Value::Null), "502 Bad Gateway");
    }

    /// A catalog session for the endpoint rule, not connected to anything.
    fn catalog_configured_with(endpoint: Option<&str>, trusts_endpoint: bool) -> RestCatalog {
        RestCatalog {
            name: "prod-eu".into(),
            base: "http://127.0.0.1:1".into(),
            prefix: None,
            headers: Vec::new(),
            token: None,
            properties: BTreeMap::new(),
            client: reqwest::Client::new(),
            signer: None,
            configured_endpoint: endpoint.map(str::to_string),
            trusts_endpoint,
        }
    }

    #[test]
    fn a_response_may_name_only_the_configured_endpoint_unless_the_configuration_trusts_it() {
        let vended = |endpoint: &str| S3Settings {
            endpoint: Some(endpoint.to_string()),
            access_key_id: Some("AKIA-vended-1".into()),
            secret_access_key: Some("vended-secret-2".into()),
            ..Default::default()
        };
        let catalog = catalog_configured_with(Some("http://127.0.0.1:9000"), false);
        for same in ["http://127.0.0.1:9000", "HTTP://127.0.0.1:9000/"] {
            assert!(catalog.check_endpoint(&vended(same), "ns.t").is_ok(), "{same}");
        }
        for other in ["http://127.0.0.1:9001", "https://127.0.0.1:9000", "http://user:pw@evil.example:9000/x"] {
            let err = catalog.check_endpoint(&vended(other), "ns.t").unwrap_err().to_string();
            assert!(err.contains("REST catalog 'prod-eu'") && err.contains("table 'ns.t'"), "{err}");
            assert!(err.contains("lakehouse.trust-catalog-endpoint: true"), "{err}");
            assert!(err.contains("PYICEBERG_CATALOG__PROD_EU__LAKEHOUSE__TRUST_CATALOG_ENDPOINT=true"), "{err}");
            assert!(err.contains("'http://127.0.0.1:9000'"), "names the configured endpoint: {err}");
            for secret in ["AKIA-vended-1", "vended-secret-2", "user:pw", "/x'"] {
                assert!(!err.contains(secret), "{secret} shown: {err}");
            }
        }
        if std::env::var_os("AWS_ENDPOINT_URL_S3").is_none() && std::env::var_os("AWS_ENDPOINT_URL").is_none() {
            let err = catalog_configured_with(None, false)
                .check_endpoint(&vended("http://127.0.0.1:9000"), "ns.t")
                .unwrap_err()
                .to_string();
            assert!(err.contains("configuration names none (AWS S3's own)"), "{err}");
        }
        assert!(catalog_configured_with(None, true).check_endpoint(&vended("http://evil:1"), "ns.t").is_ok());
        assert!(
            catalog_configured_with(Some("http://127.0.0.1:9000"), true)
                .check_endpoint(&vended("http://evil:1"), "ns.t")
                .is_ok()
        );
    }

    #[test]
    fn a_tables_settings_reach_only_its_root_whatever_location_the_catalog_claims() {
        let loaded = LoadedTable {
            metadata_location: "s3://unit-claims/wh/ns/t/metadata/00001-a.metadata.json".into(),
            location: "s3://unit-claims".into(),
            s3: S3Settings { endpoint: Some("http://127.0.0.1:1".into()), ..Default::default() },
        };
        loaded.register().unwrap();
        let (prefix, settings) = crate::store::registered("s3://unit-claims/wh/ns/t/data/a.parquet").unwrap();
        assert_eq!(
            (prefix.as_str(), settings.endpoint.as_deref()),
            ("s3://unit-claims/wh/ns/t", Some("http://127.0.0.1:1"))
        );
        for elsewhere in ["s3://unit-claims/wh/ns/other/data/a.parquet", "s3://unit-claims/a.parquet"] {
            assert!(crate::store::registered(elsewhere).is_none(), "{elsewhere}");
        }
    }

    /// Debug output (what a log line or a panic message shows) carries no secret: not the
    /// bearer token, not a header value, not a credential or key among the properties, not a
    /// password inside a URI.
    #[test]
    fn debug_output_shows_no_secret() {
        let properties: BTreeMap<String, String> = [
            ("uri", "https://user:uri-password-1@catalog.example/api"),
            ("credential", "client:credential-secret-2"),
            ("token", "token-secret-3"),
            ("s3.secret-access-key", "s3-secret-4"),
            ("s3.access-key-id", "AKIAKEYID5"),
            ("header.X-Api-Key", "header-secret-6"),
            ("warehouse", "s3://bucket/wh"),
            ("oauth2-server-uri", "https://auth.example/token?sig=query-secret-7"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let catalog = RestCatalog {
            name: "prod".into(),
            base: "https://user:uri-password-1@catalog.example/api".into(),
            prefix: Some("p".into()),
            headers: vec![("X-Api-Key".into(), "header-secret-6".into())],
            token: Some("token-secret-3".into()),
            properties: properties.clone(),
            client: reqwest::Client::new(),
            signer: Some(
                crate::catalog::sigv4::Signer::from_properties(
                    &[("client.access-key-id", "AKID-secret-7"), ("client.secret-access-key", "sigv4-secret-8")]
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    "rest",
                    "glue",
                    Some("eu-west-1"),
                    "REST catalog 'prod'",
                )
                .unwrap(),
            ),
            configured_endpoint: None,
            trusts_endpoint: false,
        };
        let config = CatalogConfig { name: "prod".into(), properties };
        let options = crate::catalog::config::CatalogOptions {
            name: Some("prod".into()),
            uri: Some("https://user:uri-password-1@catalog.example/api".into()),
            warehouse: Some("s3://bucket/wh".into()),
        };
        let shown_options = format!("{options:?}");
        for shown in [format!("{catalog:?}"), format!("{config:?}"), shown_options] {
            for secret in [
                "uri-password-1",
                "credential-secret-2",
                "token-secret-3",
                "s3-secret-4",
                "AKIAKEYID5",
                "header-secret-6",
                "AKID-secret-7",
                "sigv4-secret-8",
            ] {
                assert!(!shown.contains(secret), "{secret} leaked: {shown}");
            }
            assert!(shown.contains("catalog.example") && shown.contains("s3://bucket/wh"), "{shown}");
        }
    }
}
