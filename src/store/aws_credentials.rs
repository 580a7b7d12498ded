//! The AWS credential chain, as the AWS SDKs resolve it (the SDK's own `aws-config`): explicit
//! settings first (a catalog's `s3.access-key-id`, `glue.access-key-id`, …, handled by the
//! callers), then the environment (`AWS_ACCESS_KEY_ID`, …), the shared `config` and `credentials`
//! files for the profile (`profile-name` property, else `AWS_PROFILE`; `role_arn` with
//! `source_profile` assumes the role through STS, `credential_process` runs the process, SSO
//! uses its token cache), a web identity token (`AWS_WEB_IDENTITY_TOKEN_FILE` with
//! `AWS_ROLE_ARN`, as on EKS), container credentials (ECS) and instance metadata (EC2).
//!
//! One chain per profile (and `AWS_*` environment) for the life of the process; its credentials are kept until five
//! minutes before they expire and then fetched again, so a long run (`lakehouse_serve`, a large
//! compaction) never signs with an expired session. STS is reached at `AWS_ENDPOINT_URL_STS` or
//! `AWS_ENDPOINT_URL` when set (a test server), else AWS's endpoint. No key, secret or token
//! appears in `Debug` output or errors.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime};

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;

use crate::error::{Error, ErrorKind, Result};

/// Credentials are fetched again when they expire within this margin.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// A resolved key pair and session token.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsKeys {
    /// The access key id.
    pub key_id: String,
    /// The secret access key.
    pub secret: String,
    /// The session token of temporary credentials.
    pub token: Option<String>,
    /// When temporary credentials expire.
    pub expiry: Option<SystemTime>,
}

impl std::fmt::Debug for AwsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsKeys")
            .field("key_id", &"<redacted>")
            .field("secret", &"<redacted>")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("expiry", &self.expiry)
            .finish()
    }
}

impl AwsKeys {
    /// Static keys (no expiry).
    pub fn new(key_id: &str, secret: &str, token: Option<&str>) -> Self {
        AwsKeys {
            key_id: key_id.to_string(),
            secret: secret.to_string(),
            token: token.map(str::to_string),
            expiry: None,
        }
    }

    fn from_sdk(c: &Credentials) -> Self {
        AwsKeys {
            key_id: c.access_key_id().to_string(),
            secret: c.secret_access_key().to_string(),
            token: c.session_token().map(str::to_string),
            expiry: c.expiry(),
        }
    }

    /// Whether these credentials must be fetched again before use at `now`.
    pub fn needs_refresh(&self, now: SystemTime) -> bool {
        self.expiry.is_some_and(|at| at <= now + REFRESH_MARGIN)
    }

    /// The SDK's form of these keys, for signing.
    pub fn to_sdk(&self) -> Credentials {
        Credentials::new(self.key_id.clone(), self.secret.clone(), self.token.clone(), self.expiry, "lakehouse")
    }
}

/// One chain and what it last resolved.
struct Chain {
    provider: DefaultCredentialsChain,
    cached: tokio::sync::Mutex<Option<AwsKeys>>,
}

/// Chains by profile and by the `AWS_*` environment they were built in (a process that changes
/// its environment gets a new chain, not the credentials of the old one).
type Chains = tokio::sync::Mutex<HashMap<(Option<String>, u64), Arc<Chain>>>;
static CHAINS: LazyLock<Chains> = LazyLock::new(|| tokio::sync::Mutex::new(HashMap::new()));

async fn chain(profile: Option<&str>) -> Arc<Chain> {
    let mut chains = CHAINS.lock().await;
    let key = (profile.map(str::to_string), environment_fingerprint());
    if let Some(chain) = chains.get(&key) {
        return chain.clone();
    }
    // The chain's own calls (STS, SSO, ECS, EC2) go through rustls with ring.
    use aws_smithy_http_client::tls;
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::Ring))
        .build_https();
    let config = aws_config::provider_config::ProviderConfig::default().with_http_client(http);
    let mut builder = DefaultCredentialsChain::builder().configure(config);
    if let Some(name) = profile {
        builder = builder.profile_name(name);
    }
    let chain = Arc::new(Chain { provider: builder.build().await, cached: tokio::sync::Mutex::new(None) });
    chains.insert(key, chain.clone());
    chain
}

/// A hash of the process's `AWS_*` variables.
fn environment_fingerprint() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut vars: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k.starts_with("AWS_")).collect();
    vars.sort();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    vars.hash(&mut hasher);
    hasher.finish()
}

/// The credentials of the chain for `profile` (`None`: `AWS_PROFILE` or `default`), fetched
/// again when the ones held expire within [`REFRESH_MARGIN`]. `service` names what they are for
/// in an error ("S3 bucket 'lake'", "Glue catalog 'prod'").
pub async fn resolve(profile: Option<&str>, service: &str) -> Result<AwsKeys> {
    let chain = chain(profile).await;
    let mut cached = chain.cached.lock().await;
    if let Some(keys) = cached.as_ref().filter(|k| !k.needs_refresh(SystemTime::now())) {
        return Ok(keys.clone());
    }
    let fetched = chain.provider.provide_credentials().await.map_err(|e| {
        let profile = profile.map(|p| format!(" (profile '{p}')")).unwrap_or_default();
        Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "no AWS credentials for {service}{profile}: {}; give keys in the catalog's properties, or set \
                 AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity token or an instance role",
                describe(&e)
            ),
        )
    })?;
    let keys = AwsKeys::from_sdk(&fetched);
    *cached = Some(keys.clone());
    Ok(keys)
}

/// The blocking form of [`resolve`], for callers outside the runtime.
pub fn resolve_blocking(profile: Option<&str>, service: &str) -> Result<AwsKeys> {
    let (profile, service) = (profile.map(str::to_string), service.to_string());
    crate::runtime::block_on(async move { resolve(profile.as_deref(), &service).await })?
}

/// A credential error's chain of causes (the SDK's errors name providers and profiles, never a
/// secret).
fn describe(e: &aws_credential_types::provider::error::CredentialsError) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// object_store's S3 client asks this for credentials before each request.
#[derive(Debug)]
pub struct ChainProvider {
    /// The profile (`None`: `AWS_PROFILE` or `default`).
    pub profile: Option<String>,
    /// What the credentials are for, in errors.
    pub service: String,
}

#[async_trait::async_trait]
impl object_store::CredentialProvider for ChainProvider {
    type Credential = object_store::aws::AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<Self::Credential>> {
        let keys = resolve(self.profile.as_deref(), &self.service).await.map_err(|e| object_store::Error::Generic {
            store: "S3",
            source: Box::new(std::io::Error::other(e.message().to_string())),
        })?;
        Ok(Arc::new(object_store::aws::AwsCredential {
            key_id: keys.key_id,
            secret_key: keys.secret,
            token: keys.token,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_refreshed_five_minutes_before_they_expire() {
        let now = SystemTime::now();
        let at = |secs: u64| AwsKeys { expiry: Some(now + Duration::from_secs(secs)), ..AwsKeys::new("a", "b", None) };
        assert!(at(60).needs_refresh(now));
        assert!(at(299).needs_refresh(now));
        assert!(!at(301).needs_refresh(now));
        assert!(!AwsKeys::new("a", "b", None).needs_refresh(now));
    }

    #[test]
    fn keys_never_print() {
        let keys = AwsKeys::new("AKIDSECRETID", "wJalrSECRET", Some("FwoGSESSION"));
        let shown = format!("{keys:?}");
        assert!(!shown.contains("AKIDSECRETID") && !shown.contains("wJalrSECRET") && !shown.contains("FwoGSESSION"));
    }
}
