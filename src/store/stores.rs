//! The stores this version serves: [`STORES`], the one list of backends, and what is found by a
//! location's scheme through it (parsing an [`ObjectLocation`], the canonical spelling of a
//! location, registering a catalog's settings, delta-rs's log stores). A new store is a file
//! beside `s3.rs` implementing [`StoreBackend`], its `pub mod` line, and its line here.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::backend::{ObjectLocation, ObjectScheme, StoreBackend};
use crate::error::{Error, ErrorKind, Result};

/// Every store, each once.
pub static STORES: &[&dyn StoreBackend] = &[&super::s3::S3, &super::azure::AZURE, &super::gcs::GCS];

impl ObjectScheme {
    /// The store a URI scheme names (any case), if this version serves it.
    pub fn from_scheme(scheme: &str) -> Option<ObjectScheme> {
        let scheme = scheme.to_ascii_lowercase();
        STORES.iter().find_map(|backend| {
            let (_, written) = backend.schemes().iter().find(|(s, _)| *s == scheme)?;
            Some(ObjectScheme::new(*backend, written))
        })
    }

    /// Every store and spelling, each as locations are written back ([`ObjectScheme::as_str`]),
    /// once: what a library that keys on a location's scheme must be told about (delta-rs's log
    /// stores).
    pub fn all() -> Vec<ObjectScheme> {
        let mut all: Vec<ObjectScheme> = Vec::new();
        for backend in STORES {
            for (_, written) in backend.schemes() {
                let scheme = ObjectScheme::new(*backend, written);
                if !all.contains(&scheme) {
                    all.push(scheme);
                }
            }
        }
        all
    }
}

impl ObjectLocation {
    /// Parses `scheme://bucket/key`; schemes this version does not serve are refused by name.
    pub fn parse(location: &str) -> Result<ObjectLocation> {
        let (scheme, rest) = location
            .split_once("://")
            .ok_or_else(|| Error::invalid(format!("'{location}' is not an object storage location")))?;
        let Some(scheme) = ObjectScheme::from_scheme(scheme) else {
            let described: Vec<&str> = STORES.iter().map(|b| b.describes()).collect();
            let stores = match described.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
                _ => described.join(""),
            };
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("'{scheme}://' locations are not supported; this version reads local files, {stores}"),
            ));
        };
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(Error::invalid(format!("'{location}' names no bucket")));
        }
        Ok(ObjectLocation { scheme, bucket: bucket.to_string(), key: key.trim_start_matches('/').to_string() })
    }
}

/// `location` with its store's canonical scheme (`s3a://b/k` → `s3://b/k`); anything that is not
/// an object storage location unchanged.
pub fn canonical(location: &str) -> String {
    match ObjectLocation::parse(location) {
        Ok(object) => object.to_uri(),
        Err(_) => location.to_string(),
    }
}

/// Registers the storage settings among `properties` (`s3.*`/`client.*`, `adls.*`, `gcs.*`:
/// each store takes its own) for every location under `prefix`.
pub fn register_properties(prefix: &str, properties: &BTreeMap<String, String>) {
    let prefix = canonical(prefix);
    for backend in STORES {
        backend.register_properties(&prefix, properties);
    }
}

/// Each scheme a table URL can have (a remote root is written canonically) with the log store
/// delta-rs must have registered for it.
pub fn delta_log_stores() -> Vec<(&'static str, Arc<dyn deltalake_core::logstore::LogStoreFactory>)> {
    ObjectScheme::all().into_iter().map(|s| (s.as_str(), s.backend().delta_log_store())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_is_listed_once_and_reads_back_as_itself() {
        let all = ObjectScheme::all();
        let written: std::collections::HashSet<&str> = all.iter().map(|s| s.as_str()).collect();
        assert_eq!(written.len(), all.len());
        assert_eq!(all.len(), 8);
        for scheme in all {
            assert_eq!(ObjectScheme::from_scheme(scheme.as_str()), Some(scheme));
        }
        let names: std::collections::HashSet<&str> = STORES.iter().map(|b| b.name()).collect();
        assert_eq!(names.len(), STORES.len(), "one name per store");
    }

    #[test]
    fn each_store_takes_its_own_settings_under_the_canonical_prefix() {
        let properties: BTreeMap<String, String> = [
            ("s3.endpoint", "http://127.0.0.1:1"),
            ("adls.account-name", "acct"),
            ("gcs.service.host", "http://127.0.0.1:2"),
            ("unrelated", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        register_properties("s3a://stores-unit/wh/t/", &properties);
        let (prefix, s3) = super::super::s3::registered("s3://stores-unit/wh/t/data/a.parquet").unwrap();
        assert_eq!((prefix.as_str(), s3.endpoint.as_deref()), ("s3://stores-unit/wh/t", Some("http://127.0.0.1:1")));
        register_properties("az://stores-unit/t", &properties);
        let (_, azure) = super::super::azure::registered("az://stores-unit/t/x").unwrap();
        assert_eq!(azure.account_name.as_deref(), Some("acct"));
        assert!(super::super::azure::registered("abfss://stores-unit/t/x").is_none(), "as spelled");
    }

    #[test]
    fn azure_spellings_of_one_container_are_one_bucket() {
        let az = ObjectLocation::parse("az://lake/t").unwrap();
        let abfss = ObjectLocation::parse("abfss://lake@acct.dfs.core.windows.net/t").unwrap();
        assert!(az.same_bucket(&abfss) && abfss.same_bucket(&az));
        assert!(az.scheme.same_store(abfss.scheme) && az.scheme != abfss.scheme);
        let s3 = ObjectLocation::parse("s3://lake/t").unwrap();
        assert!(!az.same_bucket(&s3) && !s3.same_bucket(&ObjectLocation::parse("gs://lake/t").unwrap()));
        assert!(s3.same_bucket(&ObjectLocation::parse("s3n://lake/u").unwrap()));
    }

    #[test]
    fn unsupported_schemes_name_every_store() {
        let e = ObjectLocation::parse("hdfs://n/k").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(
            e.message(),
            "'hdfs://' locations are not supported; this version reads local files, S3 (s3://), Azure (az://, \
             abfss://, wasbs://) and Google Cloud Storage (gs://)"
        );
    }
}
