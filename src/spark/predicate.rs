//! The Spark SQL predicate that selects exactly one Iceberg partition, for
//! `rewrite_data_files(where => …)`.
//!
//! Spark parses the `where` text against the table's columns, and Iceberg projects it onto each
//! file's partition (inclusively) to pick the files. So the predicate is written on the *source*
//! columns, one conjunct per partition field:
//!
//! - identity: `col = <literal>` (typed per source type: `DATE '…'`, `TIMESTAMP '…+00:00'`,
//!   `TIMESTAMP_NTZ '…'`, `CAST('…' AS DECIMAL(p,s))`, `X'…'`, quoted strings);
//! - year / month / day / hour: the half-open range of the source column the value covers
//!   (`ts >= TIMESTAMP '2024-01-02 00:00:00+00:00' AND ts < TIMESTAMP '2024-01-03 00:00:00+00:00'`);
//! - bucket / truncate: Iceberg's Spark system functions, catalog-qualified
//!   (`cat.system.bucket(16, id) = 3`, `cat.system.truncate(4, code) = 'abcd'`); an unqualified
//!   `system.bucket` resolves in the session's current catalog and is refused;
//! - void: nothing (always null);
//! - a null value: `col IS NULL`.
//!
//! Spark string literals process backslash escapes (`\'`, `\\`), and `''` is *not* an escaped
//! quote (it concatenates two literals), so [`string_literal`] escapes with backslashes. The
//! predicate is then itself put in a string literal for the `CALL`, so it is escaped twice.
//!
//! What Spark cannot express (time and nanosecond columns, unknown transforms) is an `Err` with
//! the reason, and the partition stays with the local executor.

use chrono::{DateTime, Duration};
use iceberg::spec::{Literal, PartitionSpec, PrimitiveLiteral, PrimitiveType, Schema, Struct, Transform, Type};

/// `'…'` with `\` and `'` escaped by a backslash (Spark's default string-literal rules).
pub fn string_literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `` `name` `` with backticks doubled.
pub fn identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A dotted multi-part name, each part quoted (`` `ns`.`events` ``).
pub fn multipart(parts: &[&str]) -> String {
    parts.iter().map(|p| identifier(p)).collect::<Vec<_>>().join(".")
}

/// The predicate selecting the partition `data` of `spec` (fields in spec order), or why there
/// is none. `catalog` is Spark's name of the catalog (for the system functions). An empty
/// predicate selects the whole table: only an unpartitioned table's one partition has it.
pub fn partition_predicate(
    spec: &PartitionSpec,
    schema: &Schema,
    data: &Struct,
    catalog: &str,
) -> Result<String, String> {
    let values: Vec<Option<&Literal>> = data.iter().collect();
    let mut conjuncts = Vec::new();
    for (i, field) in spec.fields().iter().enumerate() {
        if field.transform == Transform::Void {
            continue;
        }
        let source = schema
            .field_by_id(field.source_id)
            .ok_or_else(|| format!("partition field '{}' has no source column in the current schema", field.name))?;
        let name = schema.name_by_field_id(field.source_id).unwrap_or(&source.name);
        let column = multipart(&name.split('.').collect::<Vec<_>>());
        let Type::Primitive(ty) = source.field_type.as_ref() else {
            return Err(format!("partition field '{}' has a non-primitive source column", field.name));
        };
        let value = match values.get(i).copied().flatten() {
            None => {
                conjuncts.push(format!("{column} IS NULL"));
                continue;
            }
            Some(Literal::Primitive(v)) => v,
            Some(_) => return Err(format!("partition field '{}' holds a non-primitive value", field.name)),
        };
        let conjunct = match field.transform {
            Transform::Identity => format!("{column} = {}", literal(ty, value)?),
            Transform::Bucket(n) => {
                let PrimitiveLiteral::Int(b) = value else {
                    return Err(format!("bucket field '{}' holds {value:?}, not an int", field.name));
                };
                format!("{}.system.bucket({n}, {column}) = {b}", identifier(catalog))
            }
            Transform::Truncate(w) => {
                format!("{}.system.truncate({w}, {column}) = {}", identifier(catalog), literal(ty, value)?)
            }
            Transform::Year | Transform::Month | Transform::Day | Transform::Hour => {
                let (from, to) = crate::table::iceberg::partition::time_range(field.transform, value)
                    .ok_or_else(|| format!("{} field '{}' holds {value:?}", field.transform, field.name))?;
                let bound = |t: chrono::NaiveDateTime| -> Result<String, String> {
                    match ty {
                        PrimitiveType::Date if field.transform != Transform::Hour => {
                            Ok(format!("DATE '{}'", t.date().format("%Y-%m-%d")))
                        }
                        PrimitiveType::Timestamp => Ok(format!("TIMESTAMP_NTZ '{}'", t.format("%Y-%m-%d %H:%M:%S"))),
                        PrimitiveType::Timestamptz => {
                            Ok(format!("TIMESTAMP '{}+00:00'", t.format("%Y-%m-%d %H:%M:%S")))
                        }
                        other => Err(format!("Spark has no type for a {other} column ({} transform)", field.transform)),
                    }
                };
                format!("{column} >= {} AND {column} < {}", bound(from)?, bound(to)?)
            }
            other => return Err(format!("the {other} transform has no Spark predicate")),
        };
        conjuncts.push(conjunct);
    }
    Ok(conjuncts.join(" AND "))
}

/// A Spark SQL literal of Iceberg type `ty` holding `value`.
fn literal(ty: &PrimitiveType, value: &PrimitiveLiteral) -> Result<String, String> {
    use PrimitiveLiteral as L;
    use PrimitiveType as T;
    let epoch = DateTime::UNIX_EPOCH.naive_utc();
    let micros = |v: i64| {
        epoch.checked_add_signed(Duration::microseconds(v)).ok_or_else(|| format!("timestamp {v} is out of range"))
    };
    Ok(match (ty, value) {
        (T::Boolean, L::Boolean(b)) => if *b { "TRUE" } else { "FALSE" }.into(),
        (T::Int, L::Int(v)) => v.to_string(),
        (T::Long, L::Long(v)) => format!("{v}L"),
        (T::Long, L::Int(v)) => format!("{v}L"),
        (T::Float, L::Float(v)) => format!("CAST('{:?}' AS FLOAT)", v.0),
        (T::Double, L::Double(v)) => format!("CAST('{:?}' AS DOUBLE)", v.0),
        (T::Date, L::Int(days)) => {
            let date = epoch
                .checked_add_signed(Duration::try_days(i64::from(*days)).ok_or("date out of range")?)
                .ok_or_else(|| format!("date {days} is out of range"))?;
            format!("DATE '{}'", date.format("%Y-%m-%d"))
        }
        (T::Timestamp, L::Long(v)) => format!("TIMESTAMP_NTZ '{}'", micros(*v)?.format("%Y-%m-%d %H:%M:%S%.6f")),
        (T::Timestamptz, L::Long(v)) => format!("TIMESTAMP '{}+00:00'", micros(*v)?.format("%Y-%m-%d %H:%M:%S%.6f")),
        (T::String, L::String(s)) => string_literal(s),
        (T::Uuid, L::UInt128(v)) => string_literal(&uuid::Uuid::from_u128(*v).to_string()),
        (T::Binary | T::Fixed(_), L::Binary(bytes)) => format!("X'{}'", hex::encode_upper(bytes)),
        (T::Decimal { precision, scale }, L::Int128(unscaled)) => {
            format!("CAST('{}' AS DECIMAL({precision},{scale}))", decimal_text(*unscaled, *scale))
        }
        (T::Time | T::TimestampNs | T::TimestamptzNs, _) => {
            return Err(format!("Spark has no type for a {ty} column"));
        }
        (ty, value) => return Err(format!("a {ty} column holds {value:?}")),
    })
}

/// `unscaled × 10^-scale` as decimal text (`-1234`, 2 → `-12.34`).
fn decimal_text(unscaled: i128, scale: u32) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// The predicate selecting one partition of a Delta table for `OPTIMIZE … WHERE`, or why there
/// is none: `columns` are the partition columns (name, Delta type as the schema spells it) and
/// `values` their serialized partition values (`partitionValues`, null for null). Delta matches
/// the text against the partition values of the log, so each conjunct is the column equal to
/// its value as a literal of the column's type: strings quoted, integers and booleans as they
/// are, dates, `timestamp_ntz` and decimals typed (`DATE '…'`, `TIMESTAMP_NTZ '…'`,
/// `CAST('…' AS DECIMAL(p,s))`), a timestamp only with an explicit zone (its value otherwise
/// depends on the writer's session time zone); floating point and binary values are refused.
/// No columns: the empty predicate (the whole table, its one partition).
pub fn delta_partition_predicate(columns: &[(String, String)], values: &[Option<&str>]) -> Result<String, String> {
    let mut conjuncts = Vec::with_capacity(columns.len());
    for ((name, ty), value) in columns.iter().zip(values) {
        let column = identifier(name);
        let Some(value) = value else {
            conjuncts.push(format!("{column} IS NULL"));
            continue;
        };
        let plain = |allowed: &dyn Fn(char) -> bool| !value.is_empty() && value.chars().all(allowed);
        let digits = |c: char| c.is_ascii_digit();
        let literal = match ty.as_str() {
            "string" => string_literal(value),
            "long" | "integer" | "short" | "byte" if value.parse::<i64>().is_ok() => value.to_string(),
            "boolean" if matches!(*value, "true" | "false") => value.to_string(),
            "date" if plain(&|c| digits(c) || c == '-') => format!("DATE {}", string_literal(value)),
            "timestamp_ntz" if plain(&|c| digits(c) || " -:.".contains(c)) => {
                format!("TIMESTAMP_NTZ {}", string_literal(value))
            }
            "timestamp" if value.ends_with('Z') && plain(&|c| digits(c) || " -:.TZ".contains(c)) => {
                format!("TIMESTAMP {}", string_literal(value))
            }
            t if t.starts_with("decimal(") && plain(&|c| digits(c) || c == '-' || c == '.') => {
                format!("CAST({} AS {})", string_literal(value), t.to_ascii_uppercase())
            }
            t => {
                return Err(format!(
                    "partition column {column} of type {t} with value {value:?} has no exact Spark literal"
                ));
            }
        };
        conjuncts.push(format!("{column} = {literal}"));
    }
    Ok(conjuncts.join(" AND "))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{NestedField, UnboundPartitionSpec};

    use super::*;

    fn schema() -> Schema {
        let fields = [
            (1, "id", PrimitiveType::Long),
            (2, "region", PrimitiveType::String),
            (3, "ts", PrimitiveType::Timestamptz),
            (4, "tn", PrimitiveType::Timestamp),
            (5, "d", PrimitiveType::Date),
            (6, "amount", PrimitiveType::Decimal { precision: 12, scale: 2 }),
            (7, "flag", PrimitiveType::Boolean),
            (8, "payload", PrimitiveType::Binary),
            (9, "n", PrimitiveType::Int),
            (10, "u", PrimitiveType::Uuid),
            (11, "t", PrimitiveType::Time),
            (12, "we`ird", PrimitiveType::Double),
        ];
        Schema::builder()
            .with_fields(fields.map(|(id, name, ty)| Arc::new(NestedField::optional(id, name, Type::Primitive(ty)))))
            .build()
            .unwrap()
    }

    fn predicate(source: i32, transform: Transform, value: Option<PrimitiveLiteral>) -> Result<String, String> {
        let schema = schema();
        let spec = UnboundPartitionSpec::builder()
            .add_partition_field(source, "p", transform)
            .unwrap()
            .build()
            .bind(Arc::new(schema.clone()))
            .unwrap();
        let data = Struct::from_iter([value.map(Literal::Primitive)]);
        partition_predicate(&spec, &schema, &data, "sc")
    }

    #[test]
    fn every_transform_selects_its_partition_on_the_source_column() {
        use PrimitiveLiteral as L;
        use Transform as X;
        let day_2024_01_02 = 19_724; // days since 1970-01-01
        let cases: Vec<(i32, Transform, Option<L>, &str)> = vec![
            (1, X::Identity, Some(L::Long(20_000_000_001)), "`id` = 20000000001L"),
            (9, X::Identity, Some(L::Int(-3)), "`n` = -3"),
            (2, X::Identity, Some(L::String("a'b\\c".into())), r"`region` = 'a\'b\\c'"),
            (7, X::Identity, Some(L::Boolean(true)), "`flag` = TRUE"),
            (5, X::Identity, Some(L::Int(day_2024_01_02)), "`d` = DATE '2024-01-02'"),
            (
                3,
                X::Identity,
                Some(L::Long(1_704_106_800_000_001)),
                "`ts` = TIMESTAMP '2024-01-01 11:00:00.000001+00:00'",
            ),
            (4, X::Identity, Some(L::Long(1_704_106_800_000_000)), "`tn` = TIMESTAMP_NTZ '2024-01-01 11:00:00.000000'"),
            (6, X::Identity, Some(L::Int128(-1334)), "`amount` = CAST('-13.34' AS DECIMAL(12,2))"),
            (6, X::Identity, Some(L::Int128(5)), "`amount` = CAST('0.05' AS DECIMAL(12,2))"),
            (8, X::Identity, Some(L::Binary(vec![3, 4, 0xab])), "`payload` = X'0304AB'"),
            (
                10,
                X::Identity,
                Some(L::UInt128(0x0011_2233_4455_6677_8899_aabb_ccdd_eeff)),
                "`u` = '00112233-4455-6677-8899-aabbccddeeff'",
            ),
            (12, X::Identity, Some(L::Double(1.5.into())), "`we``ird` = CAST('1.5' AS DOUBLE)"),
            (9, X::Identity, None, "`n` IS NULL"),
            (3, X::Day, None, "`ts` IS NULL"),
            (
                3,
                X::Day,
                Some(L::Int(day_2024_01_02)),
                "`ts` >= TIMESTAMP '2024-01-02 00:00:00+00:00' AND `ts` < TIMESTAMP '2024-01-03 00:00:00+00:00'",
            ),
            (
                3,
                X::Hour,
                Some(L::Int(473_363)),
                "`ts` >= TIMESTAMP '2024-01-01 11:00:00+00:00' AND `ts` < TIMESTAMP '2024-01-01 12:00:00+00:00'",
            ),
            (
                3,
                X::Month,
                Some(L::Int(649)),
                "`ts` >= TIMESTAMP '2024-02-01 00:00:00+00:00' AND `ts` < TIMESTAMP '2024-03-01 00:00:00+00:00'",
            ),
            (
                3,
                X::Year,
                Some(L::Int(54)),
                "`ts` >= TIMESTAMP '2024-01-01 00:00:00+00:00' AND `ts` < TIMESTAMP '2025-01-01 00:00:00+00:00'",
            ),
            (
                4,
                X::Day,
                Some(L::Int(day_2024_01_02)),
                "`tn` >= TIMESTAMP_NTZ '2024-01-02 00:00:00' AND `tn` < TIMESTAMP_NTZ '2024-01-03 00:00:00'",
            ),
            (5, X::Day, Some(L::Int(day_2024_01_02)), "`d` >= DATE '2024-01-02' AND `d` < DATE '2024-01-03'"),
            (5, X::Month, Some(L::Int(659)), "`d` >= DATE '2024-12-01' AND `d` < DATE '2025-01-01'"),
            (5, X::Year, Some(L::Int(-1)), "`d` >= DATE '1969-01-01' AND `d` < DATE '1970-01-01'"),
            (
                3,
                X::Month,
                Some(L::Int(-1)),
                "`ts` >= TIMESTAMP '1969-12-01 00:00:00+00:00' AND `ts` < TIMESTAMP '1970-01-01 00:00:00+00:00'",
            ),
            (1, X::Bucket(16), Some(L::Int(3)), "`sc`.system.bucket(16, `id`) = 3"),
            (2, X::Truncate(4), Some(L::String("ab'c".into())), r"`sc`.system.truncate(4, `region`) = 'ab\'c'"),
            (9, X::Truncate(10), Some(L::Int(-10)), "`sc`.system.truncate(10, `n`) = -10"),
            (1, X::Void, None, ""),
        ];
        for (source, transform, value, want) in cases {
            assert_eq!(predicate(source, transform, value.clone()).as_deref(), Ok(want), "{transform} {value:?}");
        }
    }

    #[test]
    fn what_spark_cannot_express_is_refused_with_the_reason() {
        let err = predicate(11, Transform::Identity, Some(PrimitiveLiteral::Long(1))).unwrap_err();
        assert!(err.contains("Spark has no type for a time column"), "{err}");
        let err = predicate(1, Transform::Identity, Some(PrimitiveLiteral::String("x".into()))).unwrap_err();
        assert!(err.contains("long column holds"), "{err}");
    }

    #[test]
    fn a_multi_field_spec_ands_its_conjuncts() {
        let schema = schema();
        let spec = UnboundPartitionSpec::builder()
            .add_partition_field(2, "region", Transform::Identity)
            .unwrap()
            .add_partition_field(3, "ts_day", Transform::Day)
            .unwrap()
            .build()
            .bind(Arc::new(schema.clone()))
            .unwrap();
        let data = Struct::from_iter([Some(Literal::string("eu")), Some(Literal::Primitive(PrimitiveLiteral::Int(0)))]);
        assert_eq!(
            partition_predicate(&spec, &schema, &data, "my cat").unwrap(),
            "`region` = 'eu' AND `ts` >= TIMESTAMP '1970-01-01 00:00:00+00:00' AND `ts` < TIMESTAMP '1970-01-02 00:00:00+00:00'"
        );
        assert_eq!(string_literal(r"it's \o/"), r"'it\'s \\o/'");
        assert_eq!(multipart(&["ns", "a.b"]), "`ns`.`a.b`");
    }

    #[test]
    fn delta_predicates_type_each_value_and_refuse_what_has_no_exact_literal() {
        let columns: Vec<(String, String)> = [("r", "string"), ("n", "long"), ("d", "date"), ("a", "decimal(8,2)")]
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        assert_eq!(
            delta_partition_predicate(&columns, &[Some("o'r\\x"), Some("-5"), Some("2026-11-02"), None]).unwrap(),
            "`r` = 'o\\'r\\\\x' AND `n` = -5 AND `d` = DATE '2026-11-02' AND `a` IS NULL"
        );
        let one = |ty: &str, value: &str| delta_partition_predicate(&[("c".into(), ty.into())], &[Some(value)]);
        assert_eq!(one("decimal(8,2)", "-12.50").unwrap(), "`c` = CAST('-12.50' AS DECIMAL(8,2))");
        assert_eq!(one("timestamp_ntz", "2026-01-01 00:00:00").unwrap(), "`c` = TIMESTAMP_NTZ '2026-01-01 00:00:00'");
        assert_eq!(
            one("timestamp", "2026-01-01T00:00:00.000000Z").unwrap(),
            "`c` = TIMESTAMP '2026-01-01T00:00:00.000000Z'"
        );
        for (ty, value) in
            [("timestamp", "2026-01-01 00:00:00"), ("double", "1.5"), ("long", "1e3"), ("date", "x' OR '1")]
        {
            assert!(one(ty, value).unwrap_err().contains("has no exact Spark literal"), "{ty} {value}");
        }
        assert_eq!(delta_partition_predicate(&[], &[]).unwrap(), "");
    }
}
