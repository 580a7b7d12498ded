//! Amazon S3 and S3-compatible servers: the `s3.*` settings a catalog or the user gives, which
//! table location they apply to ([`register`]), and one object_store `AmazonS3` client per bucket
//! and settings. Without keys a location's credentials come from the AWS credential chain
//! ([`super::aws_credentials`]: environment, the settings' profile or `AWS_PROFILE`, assume-role,
//! web identity, ECS, instance metadata), refreshed before they expire. Secrets never
//! appear in `Debug` output or errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{ObjectStore, RetryConfig};

use super::backend::{ObjectLocation, StoreBackend};
use super::redact::scrub;
use super::secret::{TableAccess, load_extension, outranked, users_secret};
use crate::duck::{Connection, quote_literal};
use crate::error::{Error, ErrorKind, Result};

/// The S3 store: `s3://`, and `s3a://`, `s3n://` as Hadoop writes them.
pub struct S3Store;

/// The S3 backend, as [`super::stores::STORES`] lists it.
pub static S3: S3Store = S3Store;

impl StoreBackend for S3Store {
    fn name(&self) -> &'static str {
        "S3"
    }

    fn schemes(&self) -> &'static [(&'static str, &'static str)] {
        &[("s3", "s3"), ("s3a", "s3"), ("s3n", "s3")]
    }

    fn describes(&self) -> &'static str {
        "S3 (s3://)"
    }

    fn register_properties(&self, prefix: &str, properties: &BTreeMap<String, String>) {
        if let Some(settings) = S3Settings::from_properties(properties) {
            register(prefix, settings);
        }
    }

    fn client(&self, object: &ObjectLocation) -> Result<Arc<dyn ObjectStore>> {
        Ok(client(&object.bucket, &settings_for(&object.to_uri()))?)
    }

    /// `httpfs` loaded, and a temporary S3 secret scoped to the root with the credentials the
    /// metadata is read with, so DuckDB reads and writes the data as they do: the keys this
    /// extension registered for the table (a catalog's vended credentials or `s3.*` properties,
    /// [`registered`]), else — for registered settings without keys — the AWS credential chain's
    /// ([`super::aws_credentials`]: a profile, assume-role, web identity, ECS, EC2), fetched again
    /// before they expire each time a table is readied. Without registered settings, a secret of
    /// the user's that covers the root is used; without one either, and without
    /// `AWS_ACCESS_KEY_ID` (which httpfs reads itself), the credential chain's.
    fn prepare_duckdb(&self, conn: &Connection, prefix: &str) -> Result<TableAccess> {
        load_extension(conn, "httpfs")?;
        let theirs = users_secret(conn, prefix, "s3");
        let settings = match registered(prefix) {
            Some((_, settings)) => settings,
            None if theirs.is_some() => return Ok(TableAccess::default()),
            None if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() => S3Settings::from_environment(),
            None => return Ok(TableAccess::default()),
        };
        let keys = match (&settings.access_key_id, &settings.secret_access_key) {
            (Some(key_id), Some(secret)) => {
                super::aws_credentials::AwsKeys::new(key_id, secret, settings.session_token.as_deref())
            }
            _ => match super::aws_credentials::resolve_blocking(settings.profile.as_deref(), &format!("'{prefix}'")) {
                Ok(keys) => keys,
                Err(_) => return Ok(TableAccess::default()),
            },
        };
        let mut options = vec![
            "TYPE s3".to_string(),
            format!("KEY_ID {}", quote_literal(&keys.key_id)),
            format!("SECRET {}", quote_literal(&keys.secret)),
            format!("URL_STYLE {}", quote_literal(if settings.path_style() { "path" } else { "vhost" })),
            format!("SCOPE {}", quote_literal(&format!("{prefix}/"))),
        ];
        if let Some(token) = &keys.token {
            options.push(format!("SESSION_TOKEN {}", quote_literal(token)));
        }
        options.push(format!("REGION {}", quote_literal(settings.region.as_deref().unwrap_or("us-east-1"))));
        if let Some((host, tls)) = settings.endpoint_host() {
            options.push(format!("ENDPOINT {}", quote_literal(&host)));
            options.push(format!("USE_SSL {tls}"));
        }
        let secret = conn.lease_secret("s3", &format!("S3 secret for '{prefix}'"), &options.join(", "))?;
        Ok(TableAccess::new(Some(secret), theirs.map(|name| outranked(&name, prefix))))
    }
}

/// The `s3.*` settings of a table's storage (the keys pyiceberg and iceberg-rust read).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct S3Settings {
    /// `s3.endpoint`: an S3-compatible server, e.g. `http://127.0.0.1:9000`.
    pub endpoint: Option<String>,
    /// `s3.region` (`client.region` wins).
    pub region: Option<String>,
    /// `s3.access-key-id`.
    pub access_key_id: Option<String>,
    /// `s3.secret-access-key`.
    pub secret_access_key: Option<String>,
    /// `s3.session-token`.
    pub session_token: Option<String>,
    /// `s3.path-style-access`; unset means path style with an endpoint, virtual-hosted without.
    pub path_style: Option<bool>,
    /// `s3.profile-name` (`client.profile-name` wins): the shared-config profile whose
    /// credentials apply when no keys are given ([`super::aws_credentials`]).
    pub profile: Option<String>,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use super::redact::presence as shown;
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &shown(&self.access_key_id))
            .field("secret_access_key", &shown(&self.secret_access_key))
            .field("session_token", &shown(&self.session_token))
            .field("path_style", &self.path_style)
            .field("profile", &self.profile)
            .finish()
    }
}

impl S3Settings {
    /// The settings among `properties` (`s3.endpoint`, …); `None` when there are none.
    pub fn from_properties<'a>(properties: impl IntoIterator<Item = (&'a String, &'a String)>) -> Option<Self> {
        let mut s = S3Settings::default();
        let mut client_region = None;
        let mut client_profile = None;
        let mut any = false;
        for (key, value) in properties {
            let value = Some(value.clone());
            match key.as_str() {
                "s3.endpoint" => s.endpoint = value,
                "s3.region" => s.region = value,
                "client.region" => client_region = value,
                "s3.access-key-id" => s.access_key_id = value,
                "s3.secret-access-key" => s.secret_access_key = value,
                "s3.session-token" => s.session_token = value,
                "s3.path-style-access" => s.path_style = value.map(|v| v.eq_ignore_ascii_case("true")),
                "s3.profile-name" => s.profile = value,
                "client.profile-name" => client_profile = value,
                _ => continue,
            }
            any = true;
        }
        if client_region.is_some() {
            s.region = client_region;
            any = true;
        }
        if client_profile.is_some() {
            s.profile = client_profile;
            any = true;
        }
        any.then_some(s)
    }

    /// `self`, with what it leaves unset taken from `fallback`. Keys and secrets go together:
    /// a key id from one source is never paired with a secret from another.
    pub fn or(self, fallback: &S3Settings) -> S3Settings {
        let has_keys = self.access_key_id.is_some() || self.secret_access_key.is_some();
        S3Settings {
            endpoint: self.endpoint.or_else(|| fallback.endpoint.clone()),
            region: self.region.or_else(|| fallback.region.clone()),
            access_key_id: if has_keys { self.access_key_id } else { fallback.access_key_id.clone() },
            secret_access_key: if has_keys { self.secret_access_key } else { fallback.secret_access_key.clone() },
            session_token: if has_keys { self.session_token } else { fallback.session_token.clone() },
            path_style: self.path_style.or(fallback.path_style),
            profile: if has_keys { self.profile } else { self.profile.or_else(|| fallback.profile.clone()) },
        }
    }

    /// The endpoint and region of the AWS environment (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`;
    /// `AWS_REGION`, `AWS_DEFAULT_REGION`), as the AWS SDKs read them; never keys (the credential
    /// chain reads those).
    pub fn from_environment() -> S3Settings {
        let env = |names: &[&str]| names.iter().find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()));
        S3Settings {
            endpoint: env(&["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]),
            region: env(&["AWS_REGION", "AWS_DEFAULT_REGION"]),
            ..Default::default()
        }
    }

    /// Path-style addressing (`http://host/bucket/key`): as configured, else with an endpoint.
    pub fn path_style(&self) -> bool {
        self.path_style.unwrap_or(self.endpoint.is_some())
    }

    /// The endpoint as `host:port` and whether it uses TLS (DuckDB's secret wants them apart).
    pub fn endpoint_host(&self) -> Option<(String, bool)> {
        let endpoint = self.endpoint.as_deref()?;
        let (tls, rest) = match endpoint.split_once("://") {
            Some((scheme, rest)) => (!scheme.eq_ignore_ascii_case("http"), rest),
            None => (true, endpoint),
        };
        Some((rest.trim_end_matches('/').to_string(), tls))
    }
}

/// Settings registered for table locations.
static REGISTRY: super::registry::PrefixRegistry<S3Settings> = super::registry::PrefixRegistry::new();

/// Clients, one per bucket and settings.
static CLIENTS: super::registry::ClientCache<(String, S3Settings), AmazonS3> = super::registry::ClientCache::new();

/// Records the settings for every location under `prefix` (a table's location, canonical:
/// [`super::canonical`]), replacing what an earlier call registered for the same prefix.
pub fn register(prefix: &str, settings: S3Settings) {
    REGISTRY.register(prefix, settings);
}

/// The settings registered for `location` (canonical; the longest registered prefix that
/// contains it).
pub fn settings_for(location: &str) -> S3Settings {
    registered(location).map(|(_, s)| s).unwrap_or_default()
}

/// The longest registered prefix containing `location` (canonical), and its settings.
pub fn registered(location: &str) -> Option<(String, S3Settings)> {
    REGISTRY.lookup(location)
}

/// The client of `bucket` with `settings` (one per pair, built on first use).
fn client(bucket: &str, settings: &S3Settings) -> Result<Arc<AmazonS3>> {
    let settings = &settings.clone().or(&S3Settings::from_environment());
    CLIENTS.get_or_build((bucket.to_string(), settings.clone()), || build(bucket, settings))
}

fn build(bucket: &str, settings: &S3Settings) -> Result<Arc<AmazonS3>> {
    let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket).with_retry(RetryConfig {
        max_retries: 6,
        retry_timeout: std::time::Duration::from_secs(60),
        ..Default::default()
    });
    if let Some(endpoint) = &settings.endpoint {
        builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
    }
    builder = builder.with_virtual_hosted_style_request(!settings.path_style());
    if let Some(region) = &settings.region {
        builder = builder.with_region(region);
    }
    if let (Some(id), Some(secret)) = (&settings.access_key_id, &settings.secret_access_key) {
        builder = builder.with_access_key_id(id).with_secret_access_key(secret);
        if let Some(token) = &settings.session_token {
            builder = builder.with_token(token);
        }
    } else {
        // The SDKs' chain (profiles, assume-role, SSO, web identity, ECS, EC2), refreshed before
        // expiry: object_store's own chain has no profiles.
        builder = builder.with_credentials(Arc::new(super::aws_credentials::ChainProvider {
            profile: settings.profile.clone(),
            service: format!("S3 bucket '{bucket}'"),
        }));
    }
    Ok(Arc::new(builder.build().map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("cannot configure S3 access to bucket '{bucket}': {}", scrub(&e)),
        )
    })?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn settings_come_from_the_longest_registered_prefix() {
        let a = S3Settings { endpoint: Some("http://a:1".into()), ..Default::default() };
        let b = S3Settings { endpoint: Some("http://b:2".into()), ..Default::default() };
        register("s3://reg-bucket/wh", a.clone());
        register("s3://reg-bucket/wh/t1/", b.clone());
        assert_eq!(settings_for("s3://reg-bucket/wh/t1/metadata/x.json"), b);
        assert_eq!(settings_for(&crate::store::canonical("s3a://reg-bucket/wh/t2/x")), a);
        assert_eq!(settings_for("s3://reg-bucket/wh-other/x"), S3Settings::default());
    }

    #[test]
    fn keys_never_mix_sources_and_never_print() {
        let props: HashMap<String, String> = [
            ("s3.endpoint", "http://127.0.0.1:9000"),
            ("s3.access-key-id", "AKIDEXAMPLE"),
            ("s3.secret-access-key", "wJalrXUtnFEMI"),
            ("s3.path-style-access", "true"),
            ("client.region", "eu-west-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let catalog = S3Settings::from_properties(&props).unwrap();
        assert_eq!(catalog.region.as_deref(), Some("eu-west-1"));
        let shown = format!("{catalog:?}");
        assert!(!shown.contains("wJalrXUtnFEMI") && !shown.contains("AKIDEXAMPLE"), "{shown}");
        let vended =
            S3Settings { access_key_id: Some("V".into()), secret_access_key: Some("S".into()), ..Default::default() };
        let merged = vended.or(&catalog);
        assert_eq!((merged.access_key_id.as_deref(), merged.secret_access_key.as_deref()), (Some("V"), Some("S")));
        assert_eq!(merged.endpoint_host(), Some(("127.0.0.1:9000".to_string(), false)));
        let only_endpoint = S3Settings { endpoint: Some("https://e".into()), ..Default::default() }.or(&catalog);
        assert_eq!(only_endpoint.access_key_id.as_deref(), Some("AKIDEXAMPLE"));
        assert!(only_endpoint.path_style());
        assert!(S3Settings::from_properties(&HashMap::new()).is_none());
    }
}
