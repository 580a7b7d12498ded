//! Settings registered per table location, looked up by the longest registered prefix that
//! contains a location: what S3 ([`super::s3`]) and Azure ([`super::azure`]) credentials apply to.

use std::sync::Mutex;

use super::location::canonical;

/// Settings of type `T` by location prefix.
pub struct PrefixRegistry<T>(Mutex<Vec<(String, T)>>);

impl<T: Clone> PrefixRegistry<T> {
    /// An empty registry.
    pub const fn new() -> Self {
        PrefixRegistry(Mutex::new(Vec::new()))
    }

    /// Records `settings` for every location under `prefix` (a table's location), replacing what
    /// an earlier call registered for the same prefix.
    pub fn register(&self, prefix: &str, settings: T) {
        let prefix = canonical(prefix).trim_end_matches('/').to_string();
        if let Ok(mut entries) = self.0.lock() {
            entries.retain(|(p, _)| *p != prefix);
            entries.push((prefix, settings));
        }
    }

    /// The longest registered prefix containing `location`, and its settings.
    pub fn lookup(&self, location: &str) -> Option<(String, T)> {
        let location = canonical(location);
        let entries = self.0.lock().ok()?;
        entries
            .iter()
            .filter(|(prefix, _)| {
                location == *prefix || location.strip_prefix(prefix.as_str()).is_some_and(|r| r.starts_with('/'))
            })
            .max_by_key(|(prefix, _)| prefix.len())
            .cloned()
    }
}

impl<T: Clone> Default for PrefixRegistry<T> {
    fn default() -> Self {
        Self::new()
    }
}
