//! Readable partition labels (`partition_date=2026-10-01/bucket=3`) from Iceberg partition tuples.
//!
//! Formatting follows Java Iceberg's `Transform.toHumanString`: `year`/`month`/`day`/`hour`
//! results print as dates (`2026`, `2026-10`, `2026-10-01`, `2026-10-01-05`), identity values as
//! their source type prints them, null as `null`. Unlike iceberg-rust's `partition_to_path`, it
//! never panics on a value whose type disagrees with the spec: it falls back to the raw literal.

use chrono::{DateTime, Datelike, Duration, NaiveDate};
use iceberg::spec::{Literal, PartitionSpec, PrimitiveLiteral, PrimitiveType, Struct, Transform, Type};

use crate::table::UNPARTITIONED;

/// `name=value/…` for one partition tuple of `spec`; `field_types` are the spec's result types
/// (missing when the spec no longer binds to the schema).
pub fn label(spec: &PartitionSpec, field_types: Option<&[Type]>, data: &Struct) -> String {
    if spec.fields().is_empty() {
        return UNPARTITIONED.to_string();
    }
    let values: Vec<Option<&Literal>> = data.iter().collect();
    spec.fields()
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let value = values.get(i).copied().flatten();
            let ty = field_types.and_then(|t| t.get(i));
            format!("{}={}", field.name, human(&field.transform, ty, value))
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The directory Java's location provider gives a partition (`PartitionSpec.partitionToPath`):
/// `name=value/…` with each name and value URL-encoded as a form value; empty for an
/// unpartitioned spec.
pub fn path(spec: &PartitionSpec, schema: &iceberg::spec::Schema, data: &Struct) -> String {
    let types: Option<Vec<Type>> =
        spec.partition_type(schema).ok().map(|t| t.fields().iter().map(|f| f.field_type.as_ref().clone()).collect());
    let values: Vec<Option<&Literal>> = data.iter().collect();
    spec.fields()
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let value =
                human(&field.transform, types.as_ref().and_then(|t| t.get(i)), values.get(i).copied().flatten());
            format!("{}={}", form_encode(&field.name), form_encode(&value))
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Java's `URLEncoder.encode(s, UTF_8)`: letters, digits and `.-*_` stay, space becomes `+`,
/// every other byte `%XX`.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The tuple in a canonical typed text form: every value with its type, a null as `None`, so
/// that two tuples share it only when they are equal ([`crate::table::PartitionKey`]).
pub fn canonical(data: &Struct) -> String {
    format!("{:?}", data.iter().collect::<Vec<Option<&Literal>>>())
}

/// Whether `spec` is unpartitioned in the Iceberg sense: no fields, or only `void` ones. Delete
/// files of such a spec are global.
pub fn is_unpartitioned(spec: &PartitionSpec) -> bool {
    spec.fields().iter().all(|f| f.transform == Transform::Void)
}

fn human(transform: &Transform, ty: Option<&Type>, value: Option<&Literal>) -> String {
    let Some(Literal::Primitive(value)) = value else {
        return "null".to_string();
    };
    match (transform, value) {
        (Transform::Void, _) => "null".to_string(),
        (Transform::Year, PrimitiveLiteral::Int(v)) => format!("{}", 1970 + v),
        (Transform::Month, PrimitiveLiteral::Int(v)) => {
            let (y, m) = (1970 + v.div_euclid(12), v.rem_euclid(12) + 1);
            format!("{y:04}-{m:02}")
        }
        (Transform::Day, PrimitiveLiteral::Int(v)) => date(*v),
        (Transform::Hour, PrimitiveLiteral::Int(v)) => {
            let t = DateTime::UNIX_EPOCH + Duration::hours(i64::from(*v));
            format!("{:04}-{:02}-{:02}-{:02}", t.year(), t.month(), t.day(), t.format("%H"))
        }
        _ => primitive(ty, value),
    }
}

fn date(days: i32) -> String {
    NaiveDate::from_ymd_opt(1970, 1, 1)
        .and_then(|d| d.checked_add_signed(Duration::days(i64::from(days))))
        .map(|d| d.to_string())
        .unwrap_or_else(|| days.to_string())
}

fn micros(v: i64, zone: &str) -> String {
    DateTime::from_timestamp_micros(v)
        .map(|t| format!("{}{zone}", t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.f")))
        .unwrap_or_else(|| v.to_string())
}

fn primitive(ty: Option<&Type>, value: &PrimitiveLiteral) -> String {
    let ty = match ty {
        Some(Type::Primitive(p)) => Some(p),
        _ => None,
    };
    match (ty, value) {
        (Some(PrimitiveType::Date), PrimitiveLiteral::Int(v)) => date(*v),
        (Some(PrimitiveType::Timestamp), PrimitiveLiteral::Long(v)) => micros(*v, ""),
        (Some(PrimitiveType::Timestamptz), PrimitiveLiteral::Long(v)) => micros(*v, "Z"),
        (Some(PrimitiveType::Decimal { scale, .. }), PrimitiveLiteral::Int128(v)) => decimal(*v, *scale),
        (Some(PrimitiveType::Uuid), PrimitiveLiteral::UInt128(v)) => uuid::Uuid::from_u128(*v).to_string(),
        (_, PrimitiveLiteral::Boolean(v)) => v.to_string(),
        (_, PrimitiveLiteral::Int(v)) => v.to_string(),
        (_, PrimitiveLiteral::Long(v)) => v.to_string(),
        (_, PrimitiveLiteral::Float(v)) => v.to_string(),
        (_, PrimitiveLiteral::Double(v)) => v.to_string(),
        (_, PrimitiveLiteral::String(v)) => v.clone(),
        (_, PrimitiveLiteral::Binary(v)) => v.iter().map(|b| format!("{b:02x}")).collect(),
        (_, PrimitiveLiteral::Int128(v)) => v.to_string(),
        (_, PrimitiveLiteral::UInt128(v)) => v.to_string(),
        (_, PrimitiveLiteral::AboveMax) => "above-max".to_string(),
        (_, PrimitiveLiteral::BelowMin) => "below-min".to_string(),
    }
}

fn decimal(unscaled: i128, scale: u32) -> String {
    if scale == 0 {
        return unscaled.to_string();
    }
    let sign = if unscaled < 0 { "-" } else { "" };
    let digits = format!("{:0>width$}", unscaled.unsigned_abs(), width = scale as usize + 1);
    let (int, frac) = digits.split_at(digits.len() - scale as usize);
    format!("{sign}{int}.{frac}")
}

/// The half-open range `[from, to)` a year/month/day/hour value covers (UTC wall time): what
/// the Spark executor's predicates select and what `skip_recent_partitions` holds back.
pub fn time_range(
    transform: Transform,
    value: &PrimitiveLiteral,
) -> Option<(chrono::NaiveDateTime, chrono::NaiveDateTime)> {
    let v = match value {
        PrimitiveLiteral::Int(v) => i64::from(*v),
        PrimitiveLiteral::Long(v) => *v,
        _ => return None,
    };
    let month_start = |months: i64| -> Option<chrono::NaiveDateTime> {
        let year = 1970 + months.div_euclid(12);
        let month = months.rem_euclid(12) as u32 + 1;
        NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, 1)?.and_hms_opt(0, 0, 0)
    };
    let epoch = DateTime::UNIX_EPOCH.naive_utc();
    match transform {
        Transform::Year => Some((month_start(v.checked_mul(12)?)?, month_start(v.checked_add(1)?.checked_mul(12)?)?)),
        Transform::Month => Some((month_start(v)?, month_start(v.checked_add(1)?)?)),
        Transform::Day => {
            let from = epoch.checked_add_signed(Duration::try_days(v)?)?;
            Some((from, from.checked_add_signed(Duration::days(1))?))
        }
        Transform::Hour => {
            let from = epoch.checked_add_signed(Duration::try_hours(v)?)?;
            Some((from, from.checked_add_signed(Duration::hours(1))?))
        }
        _ => None,
    }
}

/// [`time_range`] in µs since the epoch.
pub fn time_range_micros(transform: Transform, value: &PrimitiveLiteral) -> Option<(i64, i64)> {
    time_range(transform, value).map(|(from, to)| (from.and_utc().timestamp_micros(), to.and_utc().timestamp_micros()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(v: PrimitiveLiteral) -> Option<Literal> {
        Some(Literal::Primitive(v))
    }

    #[test]
    fn time_ranges_in_micros() {
        const DAY: i64 = 86_400_000_000;
        let range = |t: Transform, v: i64| time_range_micros(t, &PrimitiveLiteral::Long(v));
        // 2026-12-06 is day 20793 since 1970-01-01.
        let today = 20_793;
        assert_eq!(range(Transform::Day, today), Some((today * DAY, (today + 1) * DAY)));
        assert_eq!(range(Transform::Hour, 24), Some((DAY, DAY + DAY / 24)));
        // Month 683 = 2026-12 (56 years × 12 + 11); it ends on 2027-01-01 = day 20819.
        assert_eq!(range(Transform::Month, 56 * 12 + 11), Some((20_788 * DAY, 20_819 * DAY)));
        assert_eq!(range(Transform::Year, 56), Some((20_454 * DAY, 20_819 * DAY)));
        assert_eq!(range(Transform::Month, -1), Some((-31 * DAY, 0)), "1969-12");
        assert_eq!(range(Transform::Year, i64::MAX), None);
        assert_eq!(time_range_micros(Transform::Day, &PrimitiveLiteral::Int(1)), Some((DAY, 2 * DAY)));
    }

    #[test]
    fn human_strings_follow_java_iceberg() {
        let date_ty = Type::Primitive(PrimitiveType::Date);
        let int_ty = Type::Primitive(PrimitiveType::Int);
        let cases: Vec<(Transform, Option<Type>, Option<Literal>, &str)> = vec![
            (Transform::Identity, Some(date_ty.clone()), lit(PrimitiveLiteral::Int(20362)), "2025-10-01"),
            (Transform::Day, Some(date_ty), lit(PrimitiveLiteral::Int(0)), "1970-01-01"),
            (Transform::Month, Some(int_ty.clone()), lit(PrimitiveLiteral::Int(681)), "2026-10"),
            (Transform::Year, Some(int_ty.clone()), lit(PrimitiveLiteral::Int(56)), "2026"),
            (Transform::Hour, Some(int_ty.clone()), lit(PrimitiveLiteral::Int(25)), "1970-01-02-01"),
            (Transform::Bucket(16), Some(int_ty.clone()), lit(PrimitiveLiteral::Int(3)), "3"),
            (Transform::Identity, None, lit(PrimitiveLiteral::String("a/b".into())), "a/b"),
            (Transform::Identity, Some(int_ty), None, "null"),
            (
                Transform::Identity,
                Some(Type::Primitive(PrimitiveType::Decimal { precision: 9, scale: 2 })),
                lit(PrimitiveLiteral::Int128(-5)),
                "-0.05",
            ),
        ];
        for (transform, ty, value, want) in cases {
            assert_eq!(human(&transform, ty.as_ref(), value.as_ref()), want, "{transform:?}");
        }
    }

    #[test]
    fn canonical_tuples_tell_apart_what_labels_merge() {
        let null = Struct::from_iter([None]);
        let text_null = Struct::from_iter([Some(Literal::string("null"))]);
        assert_ne!(canonical(&null), canonical(&text_null));
        let int = Struct::from_iter([Some(Literal::int(1))]);
        let long = Struct::from_iter([Some(Literal::long(1))]);
        assert_ne!(canonical(&int), canonical(&long));
        // Two fields whose values hold the separators print alike, but are different tuples.
        let a = Struct::from_iter([Some(Literal::string("x/b=y")), Some(Literal::string("z"))]);
        let b = Struct::from_iter([Some(Literal::string("x")), Some(Literal::string("y/b=z"))]);
        assert_ne!(canonical(&a), canonical(&b));
        assert_eq!(canonical(&a), canonical(&a.clone()));
    }

    #[test]
    fn paths_are_form_encoded_as_java_encodes_them() {
        assert_eq!(form_encode("a b/c=d&é"), "a+b%2Fc%3Dd%26%C3%A9");
        assert_eq!(form_encode("2026-10-01"), "2026-10-01");
        assert_eq!(form_encode("x.y_z*-"), "x.y_z*-");
    }

    #[test]
    fn mismatched_types_do_not_panic() {
        let ty = Type::Primitive(PrimitiveType::Date);
        assert_eq!(human(&Transform::Identity, Some(&ty), lit(PrimitiveLiteral::Long(7)).as_ref()), "7");
    }
}
