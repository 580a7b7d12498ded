//! Column defaults in a rewrite: what a reader sees in a data file written before a column
//! existed.
//!
//! A column added with an `initial-default` (Iceberg v3; pyiceberg also writes one into v2
//! tables, and DuckDB's and Java's readers honour it) reads as that value in every file that
//! lacks the column's field id; without one it reads as NULL. A rewrite must write what a reader
//! sees, so the rewrite reads each top-level column with its default ([`default_text`], DuckDB's
//! `read_parquet(schema = …, default_value …)`), and the non-null check counts the defaults
//! ([`expected_non_null`]). Struct fields' defaults are written where the parent struct is not
//! NULL ([`writable_nested_defaults`], [`crate::action::compact::iceberg_nested_defaults`]). What this
//! version cannot write faithfully skips the partition with the reason
//! ([`skip_unwritable_defaults`]): defaults inside list elements and maps and struct-typed
//! fields' own defaults in files that lack them, defaults with files that carry no field ids
//! (read by name), defaults of types it cannot render.
//!
//! The spec's first rule comes before any default: a file without the source column of an
//! identity partition field reads that column as the partition value (files a Hive migration
//! added keep their partition columns in the directory names only). Such partitions are skipped
//! ([`skip_missing_identity_columns`]).

use std::collections::{HashMap, HashSet};

use ::iceberg::spec::{
    DataFile, Literal, NestedField, PrimitiveLiteral, PrimitiveType, Schema, TableMetadata, Transform, Type,
};

use crate::duck::{Nested, quote_file, quote_files};
use crate::error::Result;
use crate::plan::compaction::{PartitionPlan, Verdict};

/// `field`'s `initial-default` as text that DuckDB casts to the column's type: `Ok(None)`
/// without one, `Err` (with the reason) for one this version cannot render.
pub fn default_text(field: &NestedField) -> std::result::Result<Option<String>, String> {
    let Some(value) = &field.initial_default else { return Ok(None) };
    let unsupported =
        || format!("column '{}' has an initial-default of a type this version does not write", field.name);
    let (Literal::Primitive(value), Type::Primitive(ty)) = (value, field.field_type.as_ref()) else {
        return Err(unsupported());
    };
    let micros = |v: i64| chrono::DateTime::from_timestamp_micros(v).map(|t| t.naive_utc());
    Ok(Some(match (ty, value) {
        (PrimitiveType::Boolean, PrimitiveLiteral::Boolean(v)) => v.to_string(),
        (PrimitiveType::Int, PrimitiveLiteral::Int(v)) => v.to_string(),
        (PrimitiveType::Long, PrimitiveLiteral::Long(v)) => v.to_string(),
        (PrimitiveType::Float, PrimitiveLiteral::Float(v)) => format!("{:?}", v.0),
        (PrimitiveType::Double, PrimitiveLiteral::Double(v)) => format!("{:?}", v.0),
        (PrimitiveType::Decimal { scale, .. }, PrimitiveLiteral::Int128(v)) => decimal_text(*v, *scale),
        (PrimitiveType::Date, PrimitiveLiteral::Int(days)) => {
            common_era(chrono::NaiveDate::from_num_days_from_ce_opt(days.checked_add(719_163).ok_or_else(unsupported)?))
                .ok_or_else(unsupported)?
                .format("%Y-%m-%d")
                .to_string()
        }
        (PrimitiveType::Time, PrimitiveLiteral::Long(v)) if (0..86_400_000_000).contains(v) => {
            micros(*v).ok_or_else(unsupported)?.format("%H:%M:%S%.6f").to_string()
        }
        (PrimitiveType::Timestamp, PrimitiveLiteral::Long(v)) => common_era(micros(*v).map(|t| t.date()))
            .and(micros(*v))
            .ok_or_else(unsupported)?
            .format("%Y-%m-%d %H:%M:%S%.6f")
            .to_string(),
        (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(v)) => common_era(micros(*v).map(|t| t.date()))
            .and(micros(*v))
            .ok_or_else(unsupported)?
            .format("%Y-%m-%d %H:%M:%S%.6f+00")
            .to_string(),
        (PrimitiveType::TimestampNs, PrimitiveLiteral::Long(v)) => {
            let t = chrono::DateTime::from_timestamp_nanos(*v).naive_utc();
            common_era(Some(t.date())).ok_or_else(unsupported)?;
            t.format("%Y-%m-%d %H:%M:%S%.9f").to_string()
        }
        (PrimitiveType::String, PrimitiveLiteral::String(v)) => v.clone(),
        (PrimitiveType::Uuid, PrimitiveLiteral::UInt128(v)) => uuid::Uuid::from_u128(*v).to_string(),
        (PrimitiveType::Fixed(_) | PrimitiveType::Binary, PrimitiveLiteral::Binary(bytes)) => {
            bytes.iter().map(|b| format!("\\x{b:02X}")).collect()
        }
        _ => return Err(unsupported()),
    }))
}

/// `date` when its year is 1 to 9999: years before or after print in forms (`0000`, `-0001`,
/// `+10000`) DuckDB's cast does not read as the same date.
fn common_era(date: Option<chrono::NaiveDate>) -> Option<chrono::NaiveDate> {
    use chrono::Datelike;
    date.filter(|d| (1..=9999).contains(&d.year()))
}

/// An unscaled decimal as text with `scale` digits after the point.
fn decimal_text(unscaled: i128, scale: u32) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    format!("{sign}{whole}.{fraction}")
}

/// The fields with an `initial-default`: (top-level, nested) — nested ones are struct fields at
/// any depth, list elements and map keys and values.
fn fields_with_defaults(schema: &Schema) -> (Vec<&NestedField>, Vec<&NestedField>) {
    fn nested<'a>(ty: &'a Type, out: &mut Vec<&'a NestedField>) {
        let children: Vec<&'a NestedField> = match ty {
            Type::Primitive(_) => return,
            Type::Struct(s) => s.fields().iter().map(|f| f.as_ref()).collect(),
            Type::List(l) => vec![l.element_field.as_ref()],
            Type::Map(m) => vec![m.key_field.as_ref(), m.value_field.as_ref()],
        };
        for child in children {
            if child.initial_default.is_some() {
                out.push(child);
            }
            nested(&child.field_type, out);
        }
    }
    let top: Vec<&NestedField> =
        schema.as_struct().fields().iter().map(|f| f.as_ref()).filter(|f| f.initial_default.is_some()).collect();
    let mut inner = Vec::new();
    for field in schema.as_struct().fields() {
        nested(&field.field_type, &mut inner);
    }
    (top, inner)
}

/// Whether any field of `schema` has an `initial-default`.
pub fn has_defaults(schema: &Schema) -> bool {
    let (top, nested) = fields_with_defaults(schema);
    !top.is_empty() || !nested.is_empty()
}

/// The Parquet field ids each of `inputs` carries (every level; empty for a file without ids).
pub fn field_ids_by_file(conn: &Nested, inputs: &[String]) -> Result<Vec<HashSet<i32>>> {
    let result = conn.query(&format!(
        "SELECT file_name, list(field_id::BIGINT) FILTER (WHERE field_id IS NOT NULL)::VARCHAR FROM \
         parquet_schema({}) GROUP BY file_name",
        quote_files(inputs)
    ))?;
    let mut out = vec![HashSet::new(); inputs.len()];
    let index: HashMap<&str, usize> = inputs.iter().enumerate().map(|(k, i)| (i.as_str(), k)).collect();
    for row in &result.rows {
        let (Some(file), Some(ids)) = (row[0].text(), row[1].text()) else { continue };
        let Some(&k) = index.get(file) else { continue };
        out[k] = ids
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .filter_map(|id| id.trim().parse::<i32>().ok())
            .collect();
    }
    Ok(out)
}

/// Skips (with the reason, before anything is written; a dry run shows it too) each partition
/// whose files a rewrite would read differently from a reader, because of a column's
/// `initial-default`: a default this version cannot render; a nested field's default other than
/// the [`writable_nested_defaults`] in a file that lacks the field; any default where a file
/// carries no field ids (read by name, without defaults).
/// `input_paths(plan)` gives a plan's input files as DuckDB reads them.
pub fn skip_unwritable_defaults(
    conn: &Nested,
    schema: &Schema,
    plans: &mut [PartitionPlan],
    input_paths: &dyn Fn(&PartitionPlan) -> Vec<String>,
) -> Result<()> {
    let (top, nested) = fields_with_defaults(schema);
    if top.is_empty() && nested.is_empty() {
        return Ok(());
    }
    let unrenderable = top.iter().find_map(|f| default_text(f).err());
    let writable: HashSet<i32> = writable_nested_defaults(schema).iter().map(|f| f.id).collect();
    for p in plans.iter_mut().filter(|p| p.verdict == Verdict::Compact) {
        if let Some(why) = &unrenderable {
            p.skip(&format!("{why}; its files are not rewritten"));
            continue;
        }
        let ids = field_ids_by_file(conn, &input_paths(p))?;
        if ids.iter().any(HashSet::is_empty) {
            p.skip(
                "a data file carries no Parquet field ids and the table has columns with an initial-default, which \
                 a rewrite by column name would not write; its files are not rewritten",
            );
        } else if let Some(f) =
            nested.iter().filter(|f| !writable.contains(&f.id)).find(|f| ids.iter().any(|file| !file.contains(&f.id)))
        {
            p.skip(&format!(
                "nested field '{}' has an initial-default and a data file written before it existed, which this \
                 version does not write ({}); its files are not rewritten",
                f.name,
                unwritable_nested_default(f)
            ));
        }
    }
    Ok(())
}

/// The nested fields with an `initial-default` this version writes into rewritten rows:
/// primitive struct fields, at any depth of structs, list elements and map keys and values,
/// whose default renders ([`default_text`]) and whose enclosing fields have no default of their
/// own; [`crate::action::compact::iceberg_nested_defaults`] finds the files lacking them.
pub fn writable_nested_defaults(schema: &Schema) -> Vec<&NestedField> {
    fn walk<'a>(ty: &'a Type, out: &mut Vec<&'a NestedField>) {
        let enclosing = |f: &'a NestedField, out: &mut Vec<&'a NestedField>| {
            if f.initial_default.is_none() {
                walk(&f.field_type, out);
            }
        };
        match ty {
            Type::Primitive(_) => {}
            Type::Struct(s) => {
                for child in s.fields() {
                    match child.field_type.as_ref() {
                        Type::Primitive(_) if matches!(default_text(child), Ok(Some(_))) => out.push(child),
                        _ => enclosing(child, out),
                    }
                }
            }
            Type::List(l) => enclosing(&l.element_field, out),
            Type::Map(m) => {
                enclosing(&m.key_field, out);
                enclosing(&m.value_field, out);
            }
        }
    }
    let mut out = Vec::new();
    for field in schema.as_struct().fields() {
        walk(&field.field_type, &mut out);
    }
    out
}

/// Why nested field `field`'s default is not among the [`writable_nested_defaults`].
fn unwritable_nested_default(field: &NestedField) -> &'static str {
    match (field.field_type.as_ref(), default_text(field)) {
        (Type::Primitive(_), Err(_)) => "a default of a type this version does not write",
        (Type::Primitive(_), _) => "a field inside a field with a default of its own",
        _ => "a default of a struct, list or map itself",
    }
}

/// Skips (with the reason, before anything is written) each partition with a data file that lacks
/// the source column of an identity partition field of its spec — by field id, or by name for a
/// file without ids — since readers take that column from the partition value (the spec's first
/// rule for a missing column), which this version does not write. Only files whose manifest entry
/// has no value count for the column are probed (a writer that wrote the column counted it);
/// `sources[i]` is model file `i`'s manifest entry, `local(i)` its path as DuckDB reads it.
pub fn skip_missing_identity_columns(
    conn: &Nested,
    metadata: &TableMetadata,
    plans: &mut [PartitionPlan],
    sources: &[&DataFile],
    local: &dyn Fn(usize) -> String,
) -> Result<()> {
    let schema = metadata.current_schema();
    for p in plans.iter_mut().filter(|p| p.verdict == Verdict::Compact) {
        let Some(spec) = metadata.partition_spec_by_id(p.spec_id) else { continue };
        let identity: Vec<&NestedField> = spec
            .fields()
            .iter()
            .filter(|f| f.transform == Transform::Identity)
            .filter_map(|f| schema.as_struct().fields().iter().find(|c| c.id == f.source_id).map(|c| c.as_ref()))
            .collect();
        let suspects: Vec<usize> = p
            .groups
            .iter()
            .flatten()
            .copied()
            .filter(|&i| identity.iter().any(|c| !sources[i].value_counts().contains_key(&c.id)))
            .collect();
        if suspects.is_empty() {
            continue;
        }
        let paths: Vec<String> = suspects.iter().map(|&i| local(i)).collect();
        let columns = columns_by_file(conn, &paths)?;
        let missing = paths.iter().zip(&columns).find_map(|(path, (ids, names))| {
            let lacks = |c: &NestedField| if ids.is_empty() { !names.contains(&c.name) } else { !ids.contains(&c.id) };
            identity.iter().find(|c| lacks(c)).map(|c| (path, c.name.clone()))
        });
        if let Some((path, column)) = missing {
            p.skip(&format!(
                "data file '{path}' lacks the identity partition column '{column}', which readers take from the \
                 partition value (a Hive migration's files); this version does not rewrite it"
            ));
        }
    }
    Ok(())
}

/// Per file of `inputs`: its Parquet field ids (every level), and for a file without ids its
/// top-level column names.
fn columns_by_file(conn: &Nested, inputs: &[String]) -> Result<Vec<(HashSet<i32>, HashSet<String>)>> {
    let mut out = Vec::with_capacity(inputs.len());
    for (path, ids) in inputs.iter().zip(field_ids_by_file(conn, inputs)?) {
        let mut names = HashSet::new();
        if ids.is_empty() {
            let described = conn.query(&format!("DESCRIBE SELECT * FROM read_parquet({})", quote_file(path)))?;
            let column = described.column("column_name")?;
            names.extend(described.rows.iter().filter_map(|r| r[column].text().map(str::to_string)));
        }
        out.push((ids, names));
    }
    Ok(out)
}

/// The non-null values a reader sees in column `field_id` of an input file that lacks it (its
/// `present` field ids do not hold it) with `record_count` rows: every row for a top-level
/// column with an `initial-default`, none otherwise. `None` when the file has the column (or
/// carries no ids): the manifest's counts tell.
pub fn expected_non_null(schema: &Schema, field_id: i32, present: &HashSet<i32>, record_count: u64) -> Option<u64> {
    if present.is_empty() || present.contains(&field_id) {
        return None;
    }
    let top_level_default = schema.as_struct().fields().iter().any(|f| f.id == field_id && f.initial_default.is_some());
    if top_level_default {
        return Some(record_count);
    }
    // A nested field's default shows in the rows whose parent struct is not NULL, which no
    // manifest counts: unknown.
    let nested_default = schema.field_by_id(field_id).is_some_and(|f| f.initial_default.is_some());
    if nested_default { None } else { Some(0) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::iceberg::spec::{NestedField, StructType};

    fn field(ty: PrimitiveType, value: PrimitiveLiteral) -> NestedField {
        NestedField::optional(7, "c", Type::Primitive(ty)).with_initial_default(Literal::Primitive(value))
    }

    #[test]
    fn defaults_render_as_text_duckdb_casts_to_the_column_type() {
        let cases = [
            (PrimitiveType::Boolean, PrimitiveLiteral::Boolean(true), "true"),
            (PrimitiveType::Int, PrimitiveLiteral::Int(-42), "-42"),
            (PrimitiveType::Long, PrimitiveLiteral::Long(1 << 40), "1099511627776"),
            (PrimitiveType::Double, PrimitiveLiteral::Double(1.5.into()), "1.5"),
            (PrimitiveType::Float, PrimitiveLiteral::Float(0.25.into()), "0.25"),
            (PrimitiveType::Decimal { precision: 10, scale: 2 }, PrimitiveLiteral::Int128(-5), "-0.05"),
            (PrimitiveType::Decimal { precision: 10, scale: 0 }, PrimitiveLiteral::Int128(12), "12"),
            (PrimitiveType::Date, PrimitiveLiteral::Int(0), "1970-01-01"),
            (PrimitiveType::Date, PrimitiveLiteral::Int(-1), "1969-12-31"),
            (PrimitiveType::Timestamp, PrimitiveLiteral::Long(1_500_000), "1970-01-01 00:00:01.500000"),
            (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(0), "1970-01-01 00:00:00.000000+00"),
            (PrimitiveType::Time, PrimitiveLiteral::Long(3_600_000_001), "01:00:00.000001"),
            (PrimitiveType::TimestampNs, PrimitiveLiteral::Long(-1), "1969-12-31 23:59:59.999999999"),
            (PrimitiveType::String, PrimitiveLiteral::String("it's".into()), "it's"),
            (PrimitiveType::Binary, PrimitiveLiteral::Binary(vec![0, 255]), "\\x00\\xFF"),
            (
                PrimitiveType::Uuid,
                PrimitiveLiteral::UInt128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
                "01234567-89ab-cdef-0123-456789abcdef",
            ),
        ];
        for (ty, value, want) in cases {
            assert_eq!(default_text(&field(ty.clone(), value)).unwrap().as_deref(), Some(want), "{ty:?}");
        }
        assert_eq!(default_text(&NestedField::optional(1, "x", Type::Primitive(PrimitiveType::Int))), Ok(None));
        // Years outside 1..=9999 print in forms DuckDB's cast would not read as the same date.
        for days in [-719_163, -800_000, 2_932_897] {
            assert!(default_text(&field(PrimitiveType::Date, PrimitiveLiteral::Int(days))).is_err(), "{days}");
        }
        assert_eq!(
            default_text(&field(PrimitiveType::Date, PrimitiveLiteral::Int(-719_162))).unwrap().as_deref(),
            Some("0001-01-01")
        );
        assert!(default_text(&field(PrimitiveType::Timestamp, PrimitiveLiteral::Long(i64::MIN))).is_err());
        assert!(default_text(&field(PrimitiveType::Int, PrimitiveLiteral::String("x".into()))).is_err());
    }

    #[test]
    fn a_missing_column_reads_as_its_default_or_as_null() {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                field(PrimitiveType::Boolean, PrimitiveLiteral::Boolean(false)).into(),
                NestedField::optional(
                    8,
                    "s",
                    Type::Struct(StructType::new(vec![
                        NestedField::optional(9, "x", Type::Primitive(PrimitiveType::Int))
                            .with_initial_default(Literal::Primitive(PrimitiveLiteral::Int(3)))
                            .into(),
                    ])),
                )
                .into(),
                NestedField::optional(10, "later", Type::Primitive(PrimitiveType::Int)).into(),
            ])
            .build()
            .unwrap();
        let (top, nested) = fields_with_defaults(&schema);
        assert_eq!(
            (top.iter().map(|f| f.id).collect::<Vec<_>>(), nested.iter().map(|f| f.id).collect::<Vec<_>>()),
            (vec![7], vec![9])
        );
        let old_file: HashSet<i32> = [1].into();
        assert_eq!(expected_non_null(&schema, 7, &old_file, 5), Some(5), "the default, never NULL");
        assert_eq!(expected_non_null(&schema, 10, &old_file, 5), Some(0), "no default: NULL");
        assert_eq!(expected_non_null(&schema, 1, &old_file, 5), None, "present: the manifest tells");
        assert_eq!(expected_non_null(&schema, 7, &HashSet::new(), 5), None, "no ids: unknown");
        assert_eq!(expected_non_null(&schema, 9, &old_file, 5), None, "a nested default: as many as non-null parents");
    }
}
