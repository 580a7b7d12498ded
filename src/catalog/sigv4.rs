//! AWS Signature Version 4 for catalog requests (Glue, S3 Tables, SigV4-signed Iceberg REST), with
//! the AWS SDK's own signer (`aws-sigv4`) and the credential chain of
//! [`crate::store::aws_credentials`].
//!
//! Credentials, region and profile come from a catalog's properties the way pyiceberg reads them:
//! the service's own keys first (`glue.access-key-id`, `glue.secret-access-key`,
//! `glue.session-token`, `glue.profile-name`, `glue.region`), then the client's
//! (`client.access-key-id`, …, `client.region`), then the chain (environment, `AWS_PROFILE`,
//! assume-role, web identity, ECS, EC2) and the SDK's region chain (`AWS_REGION`, the profile's
//! `region`). No key, secret or token appears in `Debug` output or errors.

use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::error::{Error, ErrorKind, Result};
use crate::store::aws_credentials::{self, AwsKeys};

/// Signs requests for one AWS service in one region.
pub struct Signer {
    /// The signing name (`glue`, `s3tables`, `execute-api`).
    pub service: String,
    /// The signing region.
    pub region: String,
    keys: Option<AwsKeys>,
    profile: Option<String>,
    /// What the requests are for, in errors ("Glue catalog 'prod'").
    what: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("service", &self.service)
            .field("region", &self.region)
            .field("keys", &self.keys.as_ref().map(|_| "<explicit, redacted>"))
            .field("profile", &self.profile)
            .finish()
    }
}

/// The first of `keys` that `properties` sets.
pub fn first<'a>(properties: &'a BTreeMap<String, String>, keys: &[&str]) -> Option<&'a String> {
    keys.iter().find_map(|k| properties.get(*k).filter(|v| !v.is_empty()))
}

impl Signer {
    /// A signer for `service` configured by `properties` under `prefix` (`glue`, `rest`,
    /// `s3tables`) then `client`; `region` wins over both when given (a REST catalog's
    /// `rest.signing-region`). `what` names the catalog in errors.
    pub fn from_properties(
        properties: &BTreeMap<String, String>,
        prefix: &str,
        service: &str,
        region: Option<&str>,
        what: &str,
    ) -> Result<Signer> {
        let key = |name: &str| first(properties, &[&format!("{prefix}.{name}"), &format!("client.{name}")]);
        let profile = key("profile-name").cloned();
        let keys = match (key("access-key-id"), key("secret-access-key")) {
            (Some(id), Some(secret)) => Some(AwsKeys::new(id, secret, key("session-token").map(String::as_str))),
            (None, None) => None,
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("{what}: an access key id needs its secret access key, and a secret its key id"),
                ));
            }
        };
        let region = match region.map(str::to_string).or_else(|| key("region").cloned()) {
            Some(region) => region,
            None => default_region(profile.as_deref()).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("{what}: no AWS region; set {prefix}.region (or client.region), AWS_REGION or a profile's region"),
                )
            })?,
        };
        Ok(Signer { service: service.to_string(), region, keys, profile, what: what.to_string() })
    }

    /// The credentials requests are signed with now (fetched again before they expire).
    pub async fn credentials(&self) -> Result<AwsKeys> {
        match &self.keys {
            Some(keys) => Ok(keys.clone()),
            None => aws_credentials::resolve(self.profile.as_deref(), &self.what).await,
        }
    }

    /// Signs `request` (method, URL, headers and body as they will be sent): adds `Authorization`,
    /// `X-Amz-Date`, `X-Amz-Security-Token` and the payload hash.
    pub async fn sign(&self, request: &mut reqwest::Request) -> Result<()> {
        use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
        let keys = self.credentials().await?;
        let identity = keys.to_sdk().into();
        let failed =
            |why: String| Error::new(ErrorKind::Catalog, format!("{}: cannot sign the request: {why}", self.what));
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(&self.service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| failed(e.to_string()))?
            .into();
        let body: &[u8] = request.body().and_then(|b| b.as_bytes()).unwrap_or(&[]);
        let headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_string(), v.to_string())))
            .collect();
        let signable = SignableRequest::new(
            request.method().as_str(),
            request.url().as_str(),
            headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            SignableBody::Bytes(body),
        )
        .map_err(|e| failed(e.to_string()))?;
        let (instructions, _signature) = sign(signable, &params).map_err(|e| failed(e.to_string()))?.into_parts();
        let (new_headers, _params) = instructions.into_parts();
        for header in new_headers {
            let value = reqwest::header::HeaderValue::from_str(header.value()).map_err(|e| failed(e.to_string()))?;
            request.headers_mut().insert(header.name(), value);
        }
        Ok(())
    }
}

/// The region the AWS SDKs would use: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region`.
fn default_region(profile: Option<&str>) -> Option<String> {
    let profile = profile.map(str::to_string);
    crate::runtime::block_on(async move {
        let mut chain = aws_config::default_provider::region::DefaultRegionChain::builder();
        if let Some(name) = &profile {
            chain = chain.profile_name(name);
        }
        chain.build().region().await.map(|r| r.to_string())
    })
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn service_keys_win_over_client_keys_and_never_print() {
        let p = props(&[
            ("glue.access-key-id", "AKIDGLUE"),
            ("glue.secret-access-key", "SECRETGLUE"),
            ("client.access-key-id", "AKIDCLIENT"),
            ("client.secret-access-key", "SECRETCLIENT"),
            ("client.region", "eu-west-1"),
        ]);
        let signer = Signer::from_properties(&p, "glue", "glue", None, "Glue catalog 'g'").unwrap();
        assert_eq!(signer.region, "eu-west-1");
        assert_eq!(signer.keys.as_ref().unwrap().key_id, "AKIDGLUE");
        let shown = format!("{signer:?}");
        assert!(!shown.contains("AKIDGLUE") && !shown.contains("SECRETGLUE"), "{shown}");
        let half = props(&[("glue.access-key-id", "AKID"), ("client.region", "us-east-1")]);
        let err = Signer::from_properties(&half, "glue", "glue", None, "Glue catalog 'g'").unwrap_err();
        assert!(err.message().contains("Glue catalog 'g'"), "{}", err.message());
    }

    #[test]
    fn signed_requests_carry_the_signature_headers() {
        let p = props(&[
            ("client.access-key-id", "AKID"),
            ("client.secret-access-key", "S"),
            ("client.session-token", "T"),
        ]);
        let signer = Signer::from_properties(&p, "rest", "execute-api", Some("us-west-2"), "REST catalog 'r'").unwrap();
        let mut request =
            reqwest::Client::new().post("https://example.com/v1/config?warehouse=a%2Fb").body("{}").build().unwrap();
        crate::runtime::block_on(signer.sign(&mut request)).unwrap().unwrap();
        let auth = request.headers()["authorization"].to_str().unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKID/")
                && auth.contains("/us-west-2/execute-api/aws4_request"),
            "{auth}"
        );
        assert_eq!(request.headers()["x-amz-security-token"], "T");
        assert!(request.headers().contains_key("x-amz-date"));
    }
}
