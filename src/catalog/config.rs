//! Catalog configuration as pyiceberg reads it: `.pyiceberg.yaml` (in `$PYICEBERG_HOME`, the
//! home directory, or the working directory), `PYICEBERG_CATALOG__<NAME>__<KEY>` environment
//! variables, and the SQL functions' named parameters `catalog`, `catalog_uri`, `warehouse`,
//! lowest precedence first; identifiers split into catalog, namespace and table. Catalog
//! properties hold tokens, credentials, keys and passwords: no Debug output here shows one.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{Error, ErrorKind, Result};

/// Catalog settings given as SQL named parameters; they override the configuration files.
#[derive(Clone, Default)]
pub struct CatalogOptions {
    /// Catalog name (`catalog := 'prod'`); default: pyiceberg's default catalog.
    pub name: Option<String>,
    /// Catalog URI (`catalog_uri := 'sqlite:////path/catalog.db'`).
    pub uri: Option<String>,
    /// Warehouse location (`warehouse := 'file:///data/warehouse'`).
    pub warehouse: Option<String>,
}

/// The effective configuration of one catalog.
#[derive(Clone, PartialEq, Default)]
pub struct CatalogConfig {
    /// The catalog's name.
    pub name: String,
    /// Its properties (`uri`, `warehouse`, `type`, …).
    pub properties: BTreeMap<String, String>,
}

/// pyiceberg's configuration: `catalog.<name>.<key>` and top-level keys such as `default-catalog`.
#[derive(Clone, Default)]
pub struct PyicebergConfig {
    catalogs: BTreeMap<String, BTreeMap<String, String>>,
    default_catalog: Option<String>,
}

// Debug output never shows a secret: catalog properties hold tokens, credentials, keys and
// passwords (in values, and inside URIs), which end up in logs and error reports.

impl std::fmt::Debug for CatalogOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogOptions")
            .field("name", &self.name)
            .field("uri", &self.uri.as_deref().map(redact_uri))
            .field("warehouse", &self.warehouse.as_deref().map(redact_uri))
            .finish()
    }
}

impl std::fmt::Debug for CatalogConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogConfig")
            .field("name", &self.name)
            .field("properties", &RedactedProperties(&self.properties))
            .finish()
    }
}

impl std::fmt::Debug for PyicebergConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let catalogs: BTreeMap<&String, RedactedProperties<'_>> =
            self.catalogs.iter().map(|(name, props)| (name, RedactedProperties(props))).collect();
        f.debug_struct("PyicebergConfig")
            .field("catalogs", &catalogs)
            .field("default_catalog", &self.default_catalog)
            .finish()
    }
}

/// Catalog or storage properties as Debug shows them: the value of every key that may hold a
/// secret ([`is_secret_key`]) replaced by `<redacted>`, passwords inside URIs by `***`.
pub struct RedactedProperties<'a>(pub &'a BTreeMap<String, String>);

impl std::fmt::Debug for RedactedProperties<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(
                self.0
                    .iter()
                    .map(|(k, v)| (k, if is_secret_key(k) { "<redacted>".to_string() } else { redact_uri(v) })),
            )
            .finish()
    }
}

/// Whether a property's value may be a secret: tokens, credentials, secrets, passwords, keys,
/// signatures, connection strings (Azure's hold the account key: `adls.connection-string`) and
/// every HTTP header (`header.Authorization`, …).
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.starts_with("header.")
        || [
            "token",
            "credential",
            "secret",
            "password",
            "passwd",
            "key",
            "signature",
            "authorization",
            "sas",
            "connection-string",
        ]
        .iter()
        .any(|word| key.contains(word))
}

/// `scheme://user:password@host/…?query` with the password (or a lone user, which may be a
/// token) replaced by `***` and a query string (a SAS token, a presigned signature) by `?***`;
/// anything else unchanged.
pub fn redact_uri(value: &str) -> String {
    let Some((scheme, rest)) = value.split_once("://") else { return value.to_string() };
    let rest = match rest.split_once('?') {
        Some((before, _)) => format!("{before}?***"),
        None => rest.to_string(),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else { return format!("{scheme}://{rest}") };
    let user = rest[..at].split(':').next().unwrap_or("");
    let shown = if rest[..at].contains(':') { format!("{user}:***") } else { "***".to_string() };
    format!("{scheme}://{shown}{}", &rest[at..])
}

impl PyicebergConfig {
    /// Reads `.pyiceberg.yaml` and `PYICEBERG_*` variables from this process's environment.
    pub fn from_environment() -> Result<Self> {
        let mut config = Self::default();
        if let Some(path) = yaml_path() {
            let text = std::fs::read_to_string(&path)?;
            config.merge_yaml(&text).map_err(|e| e.with_context("file", path.display().to_string()))?;
        }
        config.merge_env(std::env::vars());
        Ok(config)
    }

    /// Merges a `.pyiceberg.yaml` document.
    pub fn merge_yaml(&mut self, text: &str) -> Result<()> {
        let doc: serde_yaml::Value = serde_yaml::from_str(text)
            .map_err(|e| Error::new(ErrorKind::Catalog, format!("cannot parse .pyiceberg.yaml: {e}")))?;
        if let Some(name) = doc.get("default-catalog").and_then(scalar) {
            self.default_catalog = Some(name.to_lowercase());
        }
        if let Some(catalogs) = doc.get("catalog").and_then(|c| c.as_mapping()) {
            for (name, props) in catalogs {
                let (Some(name), Some(props)) = (scalar(name), props.as_mapping()) else { continue };
                let entry = self.catalogs.entry(name.to_lowercase()).or_default();
                for (key, value) in props {
                    if let (Some(key), Some(value)) = (scalar(key), scalar(value)) {
                        entry.insert(key, value);
                    }
                }
            }
        }
        Ok(())
    }

    /// Merges `PYICEBERG_…` variables: `PYICEBERG_CATALOG__PROD__URI=…` sets `catalog.prod.uri`
    /// (lower-cased, `_` read as `-`, as pyiceberg does); `PYICEBERG_DEFAULT_CATALOG` the default.
    pub fn merge_env(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        for (key, value) in vars {
            let Some(rest) = key.to_lowercase().strip_prefix("pyiceberg_").map(str::to_string) else { continue };
            // As pyiceberg: `__` inside a key is a `.` (`…__S3__ENDPOINT` is `s3.endpoint`).
            let parts: Vec<String> = rest.splitn(3, "__").map(|p| p.replace("__", ".").replace('_', "-")).collect();
            match parts.as_slice() {
                [catalog, name, prop] if catalog == "catalog" => {
                    self.catalogs.entry(name.clone()).or_default().insert(prop.clone(), value);
                }
                [single] if single == "default-catalog" => self.default_catalog = Some(value.to_lowercase()),
                _ => {}
            }
        }
    }

    /// Whether a catalog of this name is configured.
    pub fn has_catalog(&self, name: &str) -> bool {
        self.catalogs.contains_key(&name.to_lowercase())
    }

    /// The effective configuration of the named (or default) catalog, with `options` applied.
    pub fn catalog(&self, options: &CatalogOptions) -> CatalogConfig {
        let name = options
            .name
            .clone()
            .or_else(|| self.default_catalog.clone())
            .unwrap_or_else(|| "default".to_string())
            .to_lowercase();
        let mut properties = self.catalogs.get(&name).cloned().unwrap_or_default();
        if let Some(uri) = &options.uri {
            properties.insert("uri".into(), uri.clone());
        }
        if let Some(warehouse) = &options.warehouse {
            properties.insert("warehouse".into(), warehouse.clone());
        }
        CatalogConfig { name, properties }
    }
}

fn scalar(value: &serde_yaml::Value) -> Option<String> {
    match value {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn yaml_path() -> Option<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(home) = std::env::var("PYICEBERG_HOME") {
        dirs.push(PathBuf::from(home));
    }
    if let Ok(home) = std::env::var("HOME") {
        dirs.push(PathBuf::from(home));
    }
    if let Ok(cwd) = std::env::current_dir() {
        dirs.push(cwd);
    }
    dirs.into_iter().map(|d| d.join(".pyiceberg.yaml")).find(|p| p.is_file())
}

/// Splits `[catalog.]namespace.table`: a leading part is taken as the catalog when it names a
/// configured catalog and no `catalog` option was given.
pub fn split_identifier(
    identifier: &str,
    config: &PyicebergConfig,
    options: &CatalogOptions,
) -> Result<(Option<String>, String, String)> {
    let parts: Vec<&str> = identifier.split('.').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.trim().is_empty()) {
        return Err(Error::invalid(format!(
            "'{identifier}' is neither an existing path nor a catalog identifier of the form namespace.table"
        )));
    }
    let (catalog, rest) = if parts.len() >= 3 && options.name.is_none() && config.has_catalog(parts[0]) {
        (Some(parts[0].to_string()), &parts[1..])
    } else {
        (None, &parts[..])
    };
    let (table, namespace) = rest.split_last().expect("at least two parts");
    Ok((catalog, namespace.join("."), table.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn env_overrides_yaml_and_options_override_env() {
        let mut config = PyicebergConfig::default();
        config.merge_yaml("catalog:\n  default:\n    uri: sqlite:////yaml.db\n    warehouse: file:///w\n").unwrap();
        config.merge_env(env(&[("PYICEBERG_CATALOG__DEFAULT__URI", "sqlite:////env.db"), ("HOME", "/x")]));
        let c = config.catalog(&CatalogOptions::default());
        assert_eq!(c.name, "default");
        assert_eq!(c.properties["uri"], "sqlite:////env.db");
        assert_eq!(c.properties["warehouse"], "file:///w");
        let c = config.catalog(&CatalogOptions { uri: Some("sqlite:////opt.db".into()), ..Default::default() });
        assert_eq!(c.properties["uri"], "sqlite:////opt.db");
    }

    #[test]
    fn env_names_are_normalised_like_pyiceberg() {
        let mut config = PyicebergConfig::default();
        config.merge_env(env(&[
            ("PYICEBERG_CATALOG__MY_CAT__URI", "sqlite:////a.db"),
            ("PYICEBERG_DEFAULT_CATALOG", "MY-CAT"),
        ]));
        config.merge_env(env(&[("PYICEBERG_CATALOG__MY_CAT__S3__ACCESS_KEY_ID", "k")]));
        assert_eq!(config.catalog(&CatalogOptions::default()).properties["s3.access-key-id"], "k");
        assert!(config.has_catalog("my-cat"));
        assert_eq!(config.catalog(&CatalogOptions::default()).properties["uri"], "sqlite:////a.db");
    }

    #[test]
    fn connection_strings_are_secret() {
        let props: BTreeMap<String, String> = [(
            "adls.connection-string".to_string(),
            "AccountName=acct;AccountKey=c2VjcmV0LWtleQ==;BlobEndpoint=http://127.0.0.1:10000/acct;".to_string(),
        )]
        .into_iter()
        .collect();
        let shown = format!("{:?}", RedactedProperties(&props));
        assert!(!shown.contains("c2VjcmV0LWtleQ=="), "{shown}");
        assert!(is_secret_key("adls.connection-string") && !is_secret_key("adls.account-name"));
    }

    #[test]
    fn identifiers_split_into_catalog_namespace_table() {
        let mut config = PyicebergConfig::default();
        config.merge_env(env(&[("PYICEBERG_CATALOG__PROD__URI", "sqlite:////p.db")]));
        let opts = CatalogOptions::default();
        let cases = [
            ("analytics.events", (None, "analytics", "events")),
            ("prod.analytics.events", (Some("prod"), "analytics", "events")),
            ("a.b.events", (None, "a.b", "events")),
        ];
        for (input, (cat, ns, tbl)) in cases {
            let (c, n, t) = split_identifier(input, &config, &opts).unwrap();
            assert_eq!((c.as_deref(), n.as_str(), t.as_str()), (cat, ns, tbl), "{input}");
        }
        assert!(split_identifier("events", &config, &opts).is_err());
        assert!(split_identifier("a..b", &config, &opts).is_err());
    }
}
