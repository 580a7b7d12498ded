//! Column statistics of a written file (DuckDB's Parquet footer reading) as Iceberg manifest
//! figures — sizes, value and null counts, lower and upper bounds in Iceberg's binary form — and
//! the non-null check that compares them with the inputs' manifests.

use std::collections::{HashMap, HashSet};

use ::iceberg::spec::{DataFile as IcebergDataFile, Datum, PrimitiveType, Schema};

use super::sql::leaves;
use crate::action::compact::defaults::expected_non_null;
use crate::duck::{Nested, quote_file};
use crate::error::{Error, ErrorKind, Result};

/// Whether every input's manifest entry has value and null counts for every leaf outside lists
/// and maps (the columns [`check_non_null_counts`] compares).
pub(super) fn has_column_counts(inputs: &[&IcebergDataFile], schema: &Schema) -> bool {
    let ids: Vec<i32> = leaves(schema).into_values().filter(|l| !l.repeated).map(|l| l.id).collect();
    inputs
        .iter()
        .all(|f| ids.iter().all(|id| f.value_counts().contains_key(id) && f.null_value_counts().contains_key(id)))
}

/// Every leaf column outside lists and maps (top-level and struct fields) must hold as many
/// non-null values as its inputs did as a reader sees them: per the manifests' own value and null
/// counts, and for an input that lacks the column (`present`: each input's field ids, when
/// known) its initial-default in every row, or none ([`expected_non_null`]); checked where every
/// input's figure is known. Catches a column read as NULL, a default written as NULL.
pub(super) fn check_non_null_counts(
    inputs: &[&IcebergDataFile],
    present: Option<&[HashSet<i32>]>,
    stats: &ColumnStats,
    deleted: &HashMap<i32, u64>,
    schema: &Schema,
) -> Result<()> {
    for field in leaves(schema).into_values().filter(|l| !l.repeated) {
        let id = field.id;
        let expected: Option<u64> = inputs
            .iter()
            .enumerate()
            .map(|(k, f)| {
                if let Some(missing) = present.and_then(|p| expected_non_null(schema, id, &p[k], f.record_count())) {
                    return Some(missing);
                }
                Some(f.value_counts().get(&id)?.saturating_sub(*f.null_value_counts().get(&id)?))
            })
            .sum();
        let removed = deleted.get(&id).copied().unwrap_or(0);
        let written = stats.values.get(&id).zip(stats.nulls.get(&id)).map(|(v, n)| v.saturating_sub(*n));
        if let (Some(expected), Some(written)) = (expected, written)
            && expected != written + removed
        {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "rewrite check failed: column '{}' has {written} non-null values and the deletes removed {removed}, \
                     its inputs {expected}; nothing was committed",
                    field.name.replace(", ", ".")
                ),
            ));
        }
    }
    Ok(())
}

#[derive(Default)]
pub(super) struct ColumnStats {
    pub(super) sizes: HashMap<i32, u64>,
    pub(super) values: HashMap<i32, u64>,
    pub(super) nulls: HashMap<i32, u64>,
    pub(super) lower: HashMap<i32, Datum>,
    pub(super) upper: HashMap<i32, Datum>,
}

impl ColumnStats {
    /// The counts of several files added up, for the checks over a whole rewrite (no bounds).
    pub(super) fn summed(all: &[ColumnStats]) -> ColumnStats {
        let mut out = ColumnStats::default();
        let add = |into: &mut HashMap<i32, u64>, from: &HashMap<i32, u64>| {
            for (id, n) in from {
                *into.entry(*id).or_default() += n;
            }
        };
        for stats in all {
            add(&mut out.sizes, &stats.sizes);
            add(&mut out.values, &stats.values);
            add(&mut out.nulls, &stats.nulls);
        }
        // A count one file lacks is unknown for the whole.
        for map in [&mut out.values, &mut out.nulls] {
            map.retain(|id, _| all.iter().all(|s| s.values.contains_key(id) && s.nulls.contains_key(id)));
        }
        out
    }
}

/// DuckDB truncates string statistics to this many bytes: a maximum that long may be a prefix
/// of the true maximum (too small to be an upper bound); a truncated minimum is still a valid
/// lower bound.
pub(super) const DUCKDB_STRING_STATS_BYTES: usize = 256;

/// Parses a Parquet statistics value (as DuckDB prints it) into an Iceberg bound. Only types
/// whose printed form is exact get bounds; a wrong bound would make other engines skip rows.
pub(super) fn bound(ty: &PrimitiveType, text: &str, upper: bool) -> Option<Datum> {
    match ty {
        PrimitiveType::String if upper && text.len() >= DUCKDB_STRING_STATS_BYTES => None,
        PrimitiveType::String => Some(Datum::string(text)),
        PrimitiveType::Int => text.parse::<i32>().ok().map(Datum::int),
        PrimitiveType::Long => text.parse::<i64>().ok().map(Datum::long),
        PrimitiveType::Date => {
            let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
            let day = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
            i32::try_from((day - epoch).num_days()).ok().map(Datum::date)
        }
        PrimitiveType::Timestamp => chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
            .ok()
            .map(|t| Datum::timestamp_micros(t.and_utc().timestamp_micros())),
        // DuckDB prints TIMESTAMPTZ statistics in UTC, whatever the session's TimeZone.
        PrimitiveType::Timestamptz => text
            .strip_suffix("+00")
            .and_then(|t| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.f").ok())
            .map(|t| Datum::timestamptz_micros(t.and_utc().timestamp_micros())),
        // DuckDB prints TIMESTAMP_NS statistics to the nanosecond (trailing zeros dropped); the
        // bound is nanoseconds since the epoch, as the spec serializes `timestamp_ns`.
        PrimitiveType::TimestampNs => chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
            .ok()
            .and_then(|t| t.and_utc().timestamp_nanos_opt())
            .map(Datum::timestamp_nanos),
        PrimitiveType::Time => chrono::NaiveTime::parse_from_str(text, "%H:%M:%S%.f").ok().and_then(|t| {
            use chrono::Timelike;
            let micros = i64::from(t.num_seconds_from_midnight()) * 1_000_000 + i64::from(t.nanosecond() / 1_000);
            Datum::time_micros(micros).ok()
        }),
        PrimitiveType::Boolean => match text {
            "true" => Some(Datum::bool(true)),
            "false" => Some(Datum::bool(false)),
            _ => None,
        },
        PrimitiveType::Float => float_bound::<f32>(text, upper).map(Datum::float),
        PrimitiveType::Double => float_bound::<f64>(text, upper).map(Datum::double),
        PrimitiveType::Decimal { precision, scale } => {
            let mantissa = decimal_mantissa(text, *scale)?;
            let ty = PrimitiveType::Decimal { precision: *precision, scale: *scale };
            Datum::try_from_bytes(&mantissa.to_be_bytes(), ty).ok()
        }
        _ => None,
    }
}

/// A float statistic as an Iceberg bound: never NaN (Iceberg bounds exclude NaN, and DuckDB
/// orders NaN above every number, so a NaN maximum says nothing about the others), and a zero
/// widened to the signed zero that bounds both `-0.0` and `0.0` (Parquet writers may not
/// distinguish them in statistics).
pub(super) fn float_bound<F>(text: &str, upper: bool) -> Option<F>
where
    F: std::str::FromStr + std::ops::Neg<Output = F> + PartialEq + Default + Copy,
{
    let value: F = text.trim().parse().ok()?;
    #[allow(clippy::eq_op)]
    let is_nan = value != value;
    if is_nan {
        return None;
    }
    let zero = F::default();
    Some(if value == zero { if upper { zero } else { -zero } } else { value })
}

/// The unscaled value of a decimal printed as `-123.45`, at exactly `scale` fractional digits
/// (fewer are padded; more, or anything but digits, give no bound).
fn decimal_mantissa(text: &str, scale: u32) -> Option<i128> {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int_part.is_empty() || !all_digits(int_part) || !all_digits(frac_part) || frac_part.len() > scale as usize {
        return None;
    }
    let padded = format!("{int_part}{frac_part:0<width$}", width = scale as usize);
    let magnitude: i128 = padded.parse().ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// Per-column sizes, value and null counts, and bounds from the written file's footer.
pub(super) fn column_stats(conn: &Nested, path: &str, schema: &Schema) -> Result<ColumnStats> {
    // Statistics as text, so that every DuckDB version returns the same types.
    let result = conn.query(&format!(
        "SELECT path_in_schema::VARCHAR, stats_min_value::VARCHAR, stats_max_value::VARCHAR, \
         stats_null_count::BIGINT, total_compressed_size::BIGINT, num_values::BIGINT FROM parquet_metadata({})",
        quote_file(path)
    ))?;
    let mut stats = ColumnStats::default();
    let mut lower_text: HashMap<i32, Vec<Option<String>>> = HashMap::new();
    let mut upper_text: HashMap<i32, Vec<Option<String>>> = HashMap::new();
    // Columns with a row group whose null count is missing: their total is unknown.
    let mut nulls_unknown: HashSet<i32> = HashSet::new();
    let leaves = leaves(schema);
    for row in &result.rows {
        let Some(column) = row[0].text() else { continue };
        let Some(leaf) = leaves.get(column) else { continue };
        let id = leaf.id;
        let nulls = row[3].opt_int()?;
        *stats.sizes.entry(id).or_default() += row[4].opt_int()?.unwrap_or(0).max(0) as u64;
        *stats.values.entry(id).or_default() += row[5].opt_int()?.unwrap_or(0).max(0) as u64;
        match nulls {
            Some(n) => *stats.nulls.entry(id).or_default() += n.max(0) as u64,
            None => {
                nulls_unknown.insert(id);
            }
        }
        lower_text.entry(id).or_default().push(row[1].text().map(str::to_string));
        upper_text.entry(id).or_default().push(row[2].text().map(str::to_string));
    }
    for id in nulls_unknown {
        stats.nulls.remove(&id);
    }
    for field in leaves.values().filter(|l| !l.repeated) {
        let ty = &field.ty;
        let parse_all = |texts: Option<&Vec<Option<String>>>, upper: bool| -> Option<Vec<Datum>> {
            texts?.iter().map(|t| t.as_deref().and_then(|t| bound(ty, t, upper))).collect()
        };
        // Only when every row group has a parseable bound (an all-null row group has none).
        let (lo, hi) = (parse_all(lower_text.get(&field.id), false), parse_all(upper_text.get(&field.id), true));
        if let (Some(lo), Some(hi)) = (lo, hi) {
            let min = lo.into_iter().reduce(|a, b| if b < a { b } else { a });
            let max = hi.into_iter().reduce(|a, b| if b > a { b } else { a });
            if let (Some(min), Some(max)) = (min, max) {
                stats.lower.insert(field.id, min);
                stats.upper.insert(field.id, max);
            }
        }
    }
    Ok(stats)
}
