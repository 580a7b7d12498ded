//! What a local directory that is not a table holds, said so that the error points the way: a
//! Delta table's `_delta_log/`, an Iceberg table's `metadata/` or `data/`, or a directory of
//! tables each get the path to name instead.

use std::path::Path;

use crate::error::{Error, ErrorKind};

/// At most this many tables or entries are named in a message.
const SHOWN: usize = 5;

/// The format of the table at `dir`, if `dir` is one.
fn table_format(dir: &Path) -> Option<&'static str> {
    if dir.join("_delta_log").is_dir() {
        Some("Delta")
    } else if dir.join("metadata").is_dir() {
        Some("Iceberg")
    } else {
        None
    }
}

/// The error for `dir`, a directory that is neither an Iceberg table (no `metadata/`) nor a Delta
/// table (no `_delta_log/`): what was found there, and the path to name instead where one is
/// plain.
pub fn not_a_table(dir: &Path) -> Error {
    let shown = dir.display();
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    let message = match (name, parent.and_then(|p| table_format(p).map(|f| (p, f)))) {
        ("_delta_log", Some((table, "Delta"))) => format!(
            "'{shown}' is the transaction log of the Delta Lake table '{}': name the table directory, '{}'",
            table.display(),
            table.display()
        ),
        ("metadata", Some((table, "Iceberg"))) => format!(
            "'{shown}' is the metadata/ directory of the Iceberg table '{}': name the table directory, '{}' (or one \
             of its metadata.json files)",
            table.display(),
            table.display()
        ),
        (_, Some((table, format))) => format!(
            "'{shown}' is a directory inside the {format} table '{}': name the table directory, '{}'",
            table.display(),
            table.display()
        ),
        _ => {
            let mut tables = Vec::new();
            let mut entries = Vec::new();
            if let Ok(listing) = std::fs::read_dir(dir) {
                let mut paths: Vec<_> = listing.flatten().map(|e| e.path()).collect();
                paths.sort();
                for path in paths {
                    let entry = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    match path.is_dir().then(|| table_format(&path)).flatten() {
                        Some(format) => tables.push(format!("'{}' ({format})", path.display())),
                        None => entries.push(if path.is_dir() { format!("{entry}/") } else { entry }),
                    }
                }
            }
            let list = |items: &[String]| {
                let mut text = items.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
                if items.len() > SHOWN {
                    text.push_str(&format!(" and {} more", items.len() - SHOWN));
                }
                text
            };
            if !tables.is_empty() {
                format!(
                    "'{shown}' is not a table but holds {} table{}: {}; name one of them",
                    tables.len(),
                    if tables.len() == 1 { "" } else { "s" },
                    list(&tables)
                )
            } else {
                let found =
                    if entries.is_empty() { "it is empty".to_string() } else { format!("found {}", list(&entries)) };
                format!(
                    "'{shown}' is not an Iceberg table directory (no metadata/) nor a Delta Lake table directory (no \
                     _delta_log/): {found}"
                )
            }
        }
    };
    Error::new(ErrorKind::NotFound, message)
}

/// For an object-store location (`s3://b/t/_delta_log`) under which no Iceberg metadata was
/// found: the error naming the table directory when the last segment says what it is — a Delta
/// table's `_delta_log` or an Iceberg table's `metadata` (nothing is listed: its name suffices).
pub fn by_name(table: &str) -> Option<Error> {
    let trimmed = table.trim_end_matches('/');
    let (parent, name) = trimmed.rsplit_once('/')?;
    let message = match name {
        "_delta_log" => {
            format!("'{table}' is the transaction log of a Delta Lake table: name the table directory, '{parent}'")
        }
        "metadata" => format!(
            "'{table}' is the metadata/ directory of an Iceberg table: name the table directory, '{parent}' (or \
             one of its metadata.json files)"
        ),
        _ => return None,
    };
    Some(Error::new(ErrorKind::NotFound, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_near_miss_names_the_path_to_use() {
        let root = std::env::temp_dir().join(format!("lakehouse-not-a-table-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["delta/_delta_log", "ice/metadata", "ice/data/d=1", "plain/sub"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("plain/notes.txt"), b"x").unwrap();
        let message = |dir: &str| not_a_table(&root.join(dir)).message().to_string();
        let at = |dir: &str| root.join(dir).display().to_string();
        assert!(message("delta/_delta_log").contains(&format!("Delta Lake table '{}'", at("delta"))));
        assert!(message("ice/metadata").contains(&format!("name the table directory, '{}'", at("ice"))));
        assert!(message("ice/data").contains(&format!("inside the Iceberg table '{}'", at("ice"))));
        let parent = message("");
        assert!(
            parent.contains("holds 2 tables") && parent.contains(&format!("'{}' (Delta)", at("delta"))),
            "{parent}"
        );
        let plain = message("plain");
        assert!(plain.ends_with("found notes.txt, sub/"), "{plain}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn object_store_near_misses_are_told_by_name() {
        let log = by_name("s3://bucket/events/_delta_log/").unwrap();
        assert!(log.message().ends_with("Delta Lake table: name the table directory, 's3://bucket/events'"));
        let metadata = by_name("gs://bucket/orders/metadata").unwrap();
        assert!(metadata.message().contains("name the table directory, 'gs://bucket/orders'"));
        assert!(by_name("s3://bucket/elsewhere").is_none());
    }
}
