//! The format-neutral model: what a table's live files are to the profile, the planners and
//! the actions, whichever format the table is in. Both formats produce it ([`super::iceberg`],
//! [`super::delta`]) and depend on nothing else of `table` for it.

/// The label of the single partition of an unpartitioned table (or spec), in every format.
pub const UNPARTITIONED: &str = "(unpartitioned)";

/// A table's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// Apache Iceberg.
    Iceberg,
    /// Delta Lake.
    Delta,
}

impl TableFormat {
    /// `Apache Iceberg` / `Delta Lake`, as people name them.
    pub fn name(self) -> &'static str {
        match self {
            TableFormat::Iceberg => "Apache Iceberg",
            TableFormat::Delta => "Delta Lake",
        }
    }

    /// `Iceberg` / `Delta`, as the reference flow's messages say it.
    pub fn short(self) -> &'static str {
        match self {
            TableFormat::Iceberg => "Iceberg",
            TableFormat::Delta => "Delta",
        }
    }

    /// `iceberg` / `delta`, for rows.
    pub fn as_str(self) -> &'static str {
        match self {
            TableFormat::Iceberg => "iceberg",
            TableFormat::Delta => "delta",
        }
    }
}

/// What a file in a table's current snapshot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileContent {
    /// Rows of the table.
    Data,
    /// Position deletes (Iceberg v2).
    PositionDeletes,
    /// Equality deletes (Iceberg v2).
    EqualityDeletes,
}

impl From<::iceberg::spec::DataContentType> for FileContent {
    fn from(content: ::iceberg::spec::DataContentType) -> Self {
        use ::iceberg::spec::DataContentType;
        match content {
            DataContentType::Data => FileContent::Data,
            DataContentType::PositionDeletes => FileContent::PositionDeletes,
            DataContentType::EqualityDeletes => FileContent::EqualityDeletes,
        }
    }
}

/// A partition's identity: its spec and its value tuple. Two files share a key only when their
/// specs are the same and every value is equal, type included: a string `"null"` and a null, or
/// values that print with `/` and `=`, never share one. The label ([`DataFile::partition`]) is for
/// people; planners group by the key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionKey {
    /// Partition spec id.
    pub spec_id: i32,
    /// The tuple in a canonical, typed text form (not for display).
    pub values: String,
}

/// One live file of the current snapshot, reduced to what maintenance decisions need.
#[derive(Debug, Clone, PartialEq)]
pub struct DataFile {
    /// Location as written in the manifest.
    pub path: String,
    /// Size in bytes from the manifest entry.
    pub size_bytes: u64,
    /// Rows (data files) or deletes (delete files) in the file.
    pub record_count: u64,
    /// Human-readable partition, e.g. `partition_date=2026-10-01` ([`UNPARTITIONED`]).
    pub partition: String,
    /// Partition spec the file was written with.
    pub spec_id: i32,
    /// Spec and value tuple: what files are grouped by.
    pub key: PartitionKey,
    /// Whether the file's spec is unpartitioned (no fields, or only `void` ones): a delete file of
    /// such a spec applies to data files of every spec and partition.
    pub global: bool,
    /// Data sequence number (0 for format v1, where there are no deletes).
    pub data_sequence_number: i64,
    /// For a position delete file, the one data file all its rows point at, when recorded.
    pub referenced_data_file: Option<String>,
    /// What the file holds.
    pub content: FileContent,
    /// Whether the file is Parquet (the only format compaction reads; ORC and Avro data files
    /// are profiled but never rewritten).
    pub parquet: bool,
    /// For an Iceberg deletion vector, where its blob starts in its Puffin file, which holds the
    /// vectors of many data files: with `path`, what tells one delete entry from another
    /// ([`DataFile::entry`]).
    pub content_offset: Option<i64>,
}

impl DataFile {
    /// What identifies this file's manifest entry among the live ones: its path, and for a
    /// deletion vector also its offset (one Puffin file holds many vectors).
    pub fn entry(&self) -> (&str, Option<i64>) {
        (&self.path, self.content_offset)
    }

    /// Whether this delete file can delete rows of `data` under the spec's rules: position
    /// deletes when `data`'s data sequence number is at most the delete's, equality deletes when
    /// it is lower; both only within the same spec and partition, or from an unpartitioned spec
    /// (for position deletes the spec applies this only to equality deletes; treating them alike
    /// can only skip more), and position deletes that name their data file only to that file.
    pub fn applies_to(&self, data: &DataFile) -> bool {
        self.applies_to_partition(&data.key, data.data_sequence_number)
            && (self.content != FileContent::PositionDeletes
                || self
                    .referenced_data_file
                    .as_ref()
                    .is_none_or(|r| crate::store::location_key(r) == crate::store::location_key(&data.path)))
    }

    /// [`DataFile::applies_to`] without the `referenced_data_file` rule: whether this delete file
    /// can delete rows of a data file of partition `key` with data sequence number `seq`.
    pub fn applies_to_partition(&self, key: &PartitionKey, seq: i64) -> bool {
        let in_scope = self.global || self.key == *key;
        match self.content {
            FileContent::Data => false,
            FileContent::PositionDeletes => in_scope && seq <= self.data_sequence_number,
            FileContent::EqualityDeletes => in_scope && seq < self.data_sequence_number,
        }
    }
}

#[cfg(test)]
impl DataFile {
    /// A file of spec 0 whose partition tuple is its label, sequence number 0, one row.
    pub fn for_tests(partition: &str, size_bytes: u64, content: FileContent) -> Self {
        DataFile {
            path: format!("/t/{partition}/{}.parquet", uuid::Uuid::new_v4()),
            size_bytes,
            record_count: 1,
            partition: partition.to_string(),
            spec_id: 0,
            key: PartitionKey { spec_id: 0, values: format!("{partition:?}") },
            global: false,
            data_sequence_number: 0,
            referenced_data_file: None,
            content,
            parquet: true,
            content_offset: None,
        }
    }
}
