//! A lean reader of Iceberg manifest lists for reachability (expiry, orphans, health).
//!
//! Those read every manifest list of a table's history — thousands of lists, millions of
//! entries when each fast append carries every earlier manifest over — and need only each
//! entry's scalar fields (path, length, spec, content, sequence numbers, adding snapshot,
//! counts). iceberg-rust's reader decodes every entry into a generic Avro value tree, partition
//! summaries included, then deserializes it: most of an expiry's time. This reader walks the
//! Avro container with the file's own writer schema, reads the scalar fields by name and skips
//! the rest (partition summaries: an array with a byte size per block is skipped in one step).
//!
//! It returns `None` for anything it does not handle (another codec, a schema shape it does not
//! expect, encrypted manifests): the caller then uses iceberg-rust's reader. Entries it returns
//! carry no partition summaries, so they are never written back into a new manifest list (the
//! commit paths read lists with iceberg-rust's reader).

use iceberg::spec::{FormatVersion, ManifestContentType, ManifestFile};

use crate::table::iceberg::avro::{Container, Cursor, Shape};

/// The entries of the manifest list `bytes` (an Avro object container), or `None` when this
/// reader does not handle it (the caller falls back to iceberg-rust's reader).
pub fn read(bytes: &[u8], version: FormatVersion) -> Option<Vec<ManifestFile>> {
    let mut container = Container::open(bytes)?;
    let fields = container.fields.clone();
    let roles = roles(&fields)?;
    let mut out = Vec::new();
    container.for_each_block(|count, data| {
        let mut r = Cursor::new(data);
        for _ in 0..count {
            out.push(entry(&mut r, &roles, version)?);
        }
        (r.pos == data.len()).then_some(())
    })?;
    Some(out)
}

/// What an entry field is to this reader, decided once per list from its name.
#[derive(Clone, Copy)]
enum Role {
    Path,
    KeyMetadata,
    Skip,
    Long(usize),
}

/// The integer fields read, by slot; alternative names (v1's `added_data_files_count`) share one.
const LONGS: [&[&str]; 13] = [
    &["manifest_length"],
    &["partition_spec_id"],
    &["content"],
    &["sequence_number"],
    &["min_sequence_number"],
    &["added_snapshot_id"],
    &["added_files_count", "added_data_files_count"],
    &["existing_files_count", "existing_data_files_count"],
    &["deleted_files_count", "deleted_data_files_count"],
    &["added_rows_count"],
    &["existing_rows_count"],
    &["deleted_rows_count"],
    &["first_row_id"],
];

fn roles(fields: &[(String, Shape)]) -> Option<Vec<(Role, &Shape)>> {
    fields
        .iter()
        .map(|(name, shape)| {
            let role = match name.as_str() {
                "manifest_path" => Role::Path,
                "key_metadata" => Role::KeyMetadata,
                "partitions" => Role::Skip,
                other => Role::Long(LONGS.iter().position(|names| names.contains(&other))?),
            };
            Some((role, shape))
        })
        .collect()
}

/// One manifest-list entry.
fn entry(c: &mut Cursor<'_>, roles: &[(Role, &Shape)], version: FormatVersion) -> Option<ManifestFile> {
    let mut longs: [Option<i64>; LONGS.len()] = [None; LONGS.len()];
    let mut path: Option<String> = None;
    let mut key_metadata: Option<Vec<u8>> = None;
    for (role, shape) in roles {
        match role {
            Role::Path => path = Some(String::from_utf8(c.text(shape)??.to_vec()).ok()?),
            Role::KeyMetadata => key_metadata = c.text(shape)?.map(<[u8]>::to_vec),
            Role::Skip => c.skip(shape)?,
            Role::Long(slot) => longs[*slot] = c.integer(shape)?,
        }
    }
    let count = |slot: usize| longs[slot].and_then(|v| u32::try_from(v).ok());
    let rows = |slot: usize| longs[slot].and_then(|v| u64::try_from(v).ok());
    let v1 = version == FormatVersion::V1;
    Some(ManifestFile {
        manifest_path: path?,
        manifest_length: longs[0]?,
        partition_spec_id: i32::try_from(longs[1]?).ok()?,
        content: match longs[2].unwrap_or(0) {
            0 => ManifestContentType::Data,
            1 => ManifestContentType::Deletes,
            _ => return None,
        },
        sequence_number: if v1 { 0 } else { longs[3].unwrap_or(0) },
        min_sequence_number: if v1 { 0 } else { longs[4].unwrap_or(0) },
        added_snapshot_id: longs[5]?,
        added_files_count: count(6),
        existing_files_count: count(7),
        deleted_files_count: count(8),
        added_rows_count: rows(9),
        existing_rows_count: rows(10),
        deleted_rows_count: rows(11),
        partitions: None,
        key_metadata,
        first_row_id: rows(12),
    })
}

#[cfg(test)]
mod tests {
    use iceberg::io::FileIO;
    use iceberg::spec::{FieldSummary, ManifestList, ManifestListWriter};

    use super::*;

    fn entry(i: i64, content: ManifestContentType, summaries: bool) -> ManifestFile {
        ManifestFile {
            manifest_path: format!("/t/metadata/m{i}-ü.avro"),
            manifest_length: 1000 + i,
            partition_spec_id: (i % 3) as i32,
            content,
            sequence_number: i,
            min_sequence_number: i - 1,
            added_snapshot_id: 10_000 + i,
            added_files_count: Some(i as u32),
            existing_files_count: Some(2),
            deleted_files_count: Some(0),
            added_rows_count: Some(100 * i as u64),
            existing_rows_count: Some(7),
            deleted_rows_count: Some(0),
            partitions: summaries.then(|| {
                vec![FieldSummary {
                    contains_null: i % 2 == 0,
                    contains_nan: Some(false),
                    lower_bound: None,
                    upper_bound: None,
                }]
            }),
            key_metadata: None,
            first_row_id: None,
        }
    }

    /// Lists written by iceberg-rust (v1 and v2, data and delete manifests, with partition
    /// summaries) read the same by this reader as by iceberg-rust's, summaries aside.
    #[test]
    fn reads_what_iceberg_rust_reads() {
        let dir = std::env::temp_dir().join(format!("lakehouse-list-reader-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let io = FileIO::new_with_fs();
        for version in [FormatVersion::V1, FormatVersion::V2] {
            let path = dir.join(format!("list-{version}.avro")).to_string_lossy().into_owned();
            let entries: Vec<ManifestFile> = (1..=300)
                .map(|i| {
                    let deletes = version == FormatVersion::V2 && i % 5 == 0;
                    let mut e =
                        entry(i, if deletes { ManifestContentType::Deletes } else { ManifestContentType::Data }, true);
                    if version == FormatVersion::V1 {
                        (e.sequence_number, e.min_sequence_number) = (0, 0);
                    }
                    e
                })
                .collect();
            crate::runtime::block_on(async {
                let output = io.new_output(&path).unwrap().writer().await.unwrap();
                let mut writer = match version {
                    FormatVersion::V1 => ManifestListWriter::v1(output, 42, Some(41)),
                    _ => ManifestListWriter::v2(output, 42, Some(41), 300),
                };
                writer.add_manifests(entries.into_iter()).unwrap();
                writer.close().await.unwrap();
            })
            .unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let full: Vec<ManifestFile> = ManifestList::parse_with_version(&bytes, version)
                .unwrap()
                .consume_entries()
                .into_iter()
                .map(|mut f| {
                    f.partitions = None;
                    f
                })
                .collect();
            let lean = read(&bytes, version).expect("the lean reader handles iceberg-rust's lists");
            assert_eq!(lean.len(), 300);
            assert_eq!(lean, full, "{version}");
        }
        // Not an Avro container, or truncated: not handled (the caller falls back), never a panic.
        assert!(read(b"not avro", FormatVersion::V2).is_none());
        let bytes = std::fs::read(dir.join(format!("list-{}.avro", FormatVersion::V2))).unwrap();
        for cut in [5, 40, bytes.len() / 2, bytes.len() - 1] {
            assert!(read(&bytes[..cut], FormatVersion::V2).is_none(), "cut at {cut}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
