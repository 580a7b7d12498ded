//! A [`Layout`] made concrete for one table: the `ORDER BY` each rewrite group is written with,
//! and for Iceberg the sort order id its files carry.
//!
//! Z-order: each column's order-preserving key is DuckDB's own `create_sort_key(col, 'ASC NULLS
//! LAST', …)` (the normalized key its sorter compares with memcmp: a null byte, then e.g. big-endian
//! integers with the sign bit flipped, IEEE floats made comparable, string bytes), of which the
//! first [`ZORDER_KEY_BYTES`] are kept; [`interleave`] takes their bits most significant first,
//! one column after the other, so the z-value sorts rows that are close on every column close
//! together (Iceberg's `ZOrderByteUtils` does the same with 8-byte keys). The interleave is
//! `lakehouse_zorder_key(BLOB, ...)`, registered with the extension.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BinaryArray, RecordBatch};
use duckdb::arrow::datatypes::DataType;
use duckdb::vscalar::{ArrowFunctionSignature, VArrowScalar};
use iceberg::spec::{
    NullOrder, PrimitiveType, Schema, SortDirection, SortField, SortOrder, TableMetadata, Transform, Type,
};

use crate::duck::quote_ident;
use crate::error::{Error, Result};
use crate::plan::layout::{Layout, LayoutOptions, MAX_ZORDER_COLUMNS, OrderTerm};

/// What follows the column in its `create_sort_key` call: its modifiers, and a constant empty
/// string, which makes DuckDB return the key as a BLOB even when it fits in 8 bytes (it returns
/// those as BIGINT); the string's bytes come after the column's and are the same in every row.
const ZORDER_KEY_SUFFIX: &str = "'ASC NULLS LAST', ''::VARCHAR, 'ASC NULLS LAST'";

/// Bytes of each column's sort key that enter the z-value: the null marker and 8 more.
pub const ZORDER_KEY_BYTES: usize = 9;

/// Interleaves the bits of `keys` (each cut or zero-padded to `width` bytes), most significant
/// first: bit `i` of key `c` goes to bit `i * keys.len() + c` of the result.
pub fn interleave(keys: &[&[u8]], width: usize) -> Vec<u8> {
    let n = keys.len();
    let mut out = vec![0u8; n * width];
    for bit in 0..width * 8 {
        for (c, key) in keys.iter().enumerate() {
            let set = key.get(bit / 8).is_some_and(|b| b & (0x80 >> (bit % 8)) != 0);
            if set {
                let pos = bit * n + c;
                out[pos / 8] |= 0x80 >> (pos % 8);
            }
        }
    }
    out
}

/// `lakehouse_zorder_key(k1 BLOB, k2 BLOB, ...)`: the z-value of the keys ([`interleave`]).
pub struct ZorderKey;

impl VArrowScalar for ZorderKey {
    type State = ();

    fn invoke(_: &(), input: RecordBatch) -> std::result::Result<Arc<dyn Array>, Box<dyn std::error::Error>> {
        let columns: Vec<&BinaryArray> = input
            .columns()
            .iter()
            .map(|c| {
                c.as_any()
                    .downcast_ref::<BinaryArray>()
                    .ok_or_else(|| "lakehouse_zorder_key: arguments must be BLOB".into())
            })
            .collect::<std::result::Result<_, Box<dyn std::error::Error>>>()?;
        if columns.is_empty() {
            return Err("lakehouse_zorder_key: needs at least one key".into());
        }
        let values: Vec<Vec<u8>> = (0..input.num_rows())
            .map(|row| {
                let keys: Vec<&[u8]> =
                    columns.iter().map(|c| if c.is_null(row) { &[][..] } else { c.value(row) }).collect();
                interleave(&keys, ZORDER_KEY_BYTES)
            })
            .collect();
        let array: ArrayRef = Arc::new(BinaryArray::from_iter_values(values));
        Ok(array)
    }

    /// One to [`MAX_ZORDER_COLUMNS`] keys: a variadic signature would also bind a call with none,
    /// which then fails inside the Arrow conversion with a message that does not name us.
    fn signatures() -> Vec<ArrowFunctionSignature> {
        (1..=MAX_ZORDER_COLUMNS)
            .map(|n| ArrowFunctionSignature::exact(vec![DataType::Binary; n], DataType::Binary))
            .collect()
    }
}

/// How a z-order column enters the z-value.
#[derive(Debug, Clone, PartialEq)]
pub enum ZorderScale {
    /// A number, date or timestamp: this DOUBLE expression of it, scaled linearly onto 32 bits
    /// between its minimum and maximum in the rows rewritten ([`zorder_order`]).
    Linear(String),
    /// Anything else (strings, binary, booleans, UUIDs): its raw sort key.
    Raw,
}

impl ZorderScale {
    /// The scale for a column of DuckDB type `ty`.
    pub fn of(column: &str, ty: &str) -> Self {
        let id = quote_ident(column);
        let upper = ty.to_ascii_uppercase();
        if upper.starts_with("DATE") || upper.starts_with("TIMESTAMP") {
            ZorderScale::Linear(format!("epoch({id})"))
        } else if [
            "TINYINT",
            "SMALLINT",
            "INTEGER",
            "BIGINT",
            "FLOAT",
            "DOUBLE",
            "DECIMAL",
            "HUGEINT",
            "UTINYINT",
            "USMALLINT",
            "UINTEGER",
            "UBIGINT",
        ]
        .iter()
        .any(|t| upper.starts_with(t))
        {
            ZorderScale::Linear(format!("CAST({id} AS DOUBLE)"))
        } else {
            ZorderScale::Raw
        }
    }
}

/// The z-order `ORDER BY` term for the rows of `select`. Numbers, dates and timestamps are first
/// scaled linearly onto 32 bits between their minimum and maximum in these rows (one aggregate
/// query): raw keys would let the column whose values differ in the highest bits (a double's
/// exponent beside a small integer's low bits) decide the order alone, which is a sort by that
/// column, not a z-order (Iceberg's Spark z-order interleaves raw 8-byte keys and has that
/// skew). Non-finite values and NULLs go last.
pub fn zorder_order(conn: &crate::duck::Nested, columns: &[(String, ZorderScale)], select: &str) -> Result<String> {
    let linear: Vec<&String> = columns
        .iter()
        .filter_map(|(_, s)| match s {
            ZorderScale::Linear(e) => Some(e),
            ZorderScale::Raw => None,
        })
        .collect();
    let mut ranges: Vec<Option<(f64, f64)>> = Vec::new();
    if !linear.is_empty() {
        let aggregates: Vec<String> = linear
            .iter()
            .map(|e| format!("min({e}) FILTER (WHERE isfinite({e})), max({e}) FILTER (WHERE isfinite({e}))"))
            .collect();
        let result = conn.query(&format!("SELECT {} FROM ({select})", aggregates.join(", ")))?;
        let row = result.first("z-order ranges")?;
        for k in 0..linear.len() {
            let value = |v: &crate::duck::Value| match v {
                crate::duck::Value::Double(f) => Some(*f),
                crate::duck::Value::Int(i) => Some(*i as f64),
                _ => None,
            };
            ranges.push(value(&row[2 * k]).zip(value(&row[2 * k + 1])));
        }
    }
    let mut next = ranges.into_iter();
    let keys: Vec<String> = columns
        .iter()
        .map(|(name, scale)| match scale {
            ZorderScale::Raw => format!("create_sort_key({}, {ZORDER_KEY_SUFFIX})", quote_ident(name)),
            ZorderScale::Linear(e) => match next.next().flatten() {
                Some((lo, hi)) if hi > lo && (hi - lo).is_finite() => format!(
                    "create_sort_key(CASE WHEN isfinite({e}) THEN CAST(least(greatest(({e} - {lo:e}) / {span:e}, 0), 1) * 4294967295 AS UBIGINT) END, {ZORDER_KEY_SUFFIX})",
                    span = hi - lo
                ),
                // A span beyond a double's range: the raw key.
                Some((lo, hi)) if hi > lo => {
                    format!("create_sort_key({}, {ZORDER_KEY_SUFFIX})", quote_ident(name))
                }
                // Constant (or no finite value): nothing to interleave but NULLs last.
                _ => format!("create_sort_key(({e}) IS NULL, {ZORDER_KEY_SUFFIX})"),
            },
        })
        .collect();
    Ok(format!("lakehouse_zorder_key({}) ASC NULLS LAST", keys.join(", ")))
}

/// How a rewrite orders its rows ([`RowOrder::of`]).
#[derive(Debug, Clone, Default)]
pub enum RowOrder {
    /// Any order (binpack).
    #[default]
    Unordered,
    /// These `ORDER BY` terms.
    Terms(Vec<String>),
    /// Z-order on these columns, each entering the z-value as its scale says ([`zorder_order`]).
    Zorder(Vec<(String, ZorderScale)>),
}

impl RowOrder {
    /// The order of `layout` over columns named (already resolved) as in the output; a z-order
    /// column is scaled by its DuckDB type, `type_of(column)`.
    pub fn of(layout: &Layout, type_of: impl Fn(&str) -> String) -> Self {
        match layout {
            Layout::Binpack => RowOrder::Unordered,
            Layout::Sort { terms, .. } => {
                RowOrder::Terms(terms.iter().map(|t| format!("{} {}", quote_ident(&t.column), t.modifiers())).collect())
            }
            Layout::Zorder(columns) => {
                RowOrder::Zorder(columns.iter().map(|c| (c.clone(), ZorderScale::of(c, &type_of(c)))).collect())
            }
        }
    }

    /// `select` (unordered) with this order; a z-order's key is measured on these rows.
    pub fn rows(&self, conn: &crate::duck::Nested, select: String) -> Result<OrderedRows> {
        let order = match self {
            RowOrder::Unordered => Vec::new(),
            RowOrder::Terms(terms) => terms.clone(),
            RowOrder::Zorder(columns) => vec![zorder_order(conn, columns, &select)?],
        };
        Ok(OrderedRows { select, order })
    }
}

/// The name `wanted` has among `columns` (exact, else the one equal ignoring case, as Spark
/// resolves names).
pub fn resolve_column<'c>(wanted: &str, columns: &'c [String]) -> Result<&'c str> {
    if let Some(c) = columns.iter().find(|c| *c == wanted) {
        return Ok(c);
    }
    let folded: Vec<&String> = columns.iter().filter(|c| c.eq_ignore_ascii_case(wanted)).collect();
    match folded.as_slice() {
        [one] => Ok(one),
        [] => Err(Error::invalid(format!(
            "sort_order names column '{wanted}', which is not a column the rewrite can sort by (top-level, primitive, \
             not a partition column of a Delta table); columns: {}",
            columns.join(", ")
        ))),
        _ => Err(Error::invalid(format!("sort_order column '{wanted}' matches several columns ignoring case"))),
    }
}

/// `layout` with its column names resolved among `columns` ([`resolve_column`]).
pub fn resolve_names(layout: Layout, columns: &[String]) -> Result<Layout> {
    Ok(match layout {
        Layout::Binpack => Layout::Binpack,
        Layout::Sort { terms, table_order } => Layout::Sort {
            terms: terms
                .into_iter()
                .map(|t| Ok(OrderTerm { column: resolve_column(&t.column, columns)?.to_string(), ..t }))
                .collect::<Result<_>>()?,
            table_order,
        },
        Layout::Zorder(names) => {
            Layout::Zorder(names.iter().map(|n| Ok(resolve_column(n, columns)?.to_string())).collect::<Result<_>>()?)
        }
    })
}

/// An Iceberg table's layout for a compaction: the `ORDER BY`, the sort order id the files carry,
/// and the sort order to add to the metadata when the files' order is not one of the table's.
#[derive(Debug, Clone)]
pub struct IcebergLayout {
    /// What was resolved.
    pub layout: Layout,
    /// The order the rows are written in.
    pub order: RowOrder,
    /// The files' `sort_order_id` (`None`: binpack and z-order, which no Iceberg sort order
    /// describes).
    pub sort_order_id: Option<i32>,
    /// A sort order the commit adds (not as the default) so that `sort_order_id` names it.
    pub add: Option<SortOrder>,
}

/// The rows a rewrite writes (`select`, unordered) and the `ORDER BY` terms they are written in
/// (empty: any order).
#[derive(Debug, Clone)]
pub struct OrderedRows {
    /// The rows.
    pub select: String,
    /// The order.
    pub order: Vec<String>,
}

impl OrderedRows {
    /// The ordered `SELECT`.
    pub fn sql(&self) -> String {
        if self.order.is_empty() {
            self.select.clone()
        } else {
            format!("SELECT * FROM ({}) AS __lakehouse_rows ORDER BY {}", self.select, self.order.join(", "))
        }
    }
}

/// The `ORDER BY` expression of a sort order field: the transform applied as Iceberg does
/// (UTC for `timestamptz`), or `Err(why)` for a transform DuckDB cannot evaluate here.
fn transform_sql(field: &SortField, schema: &Schema) -> std::result::Result<Option<String>, String> {
    let source =
        schema.field_by_id(field.source_id).ok_or_else(|| format!("source field {} is missing", field.source_id))?;
    // Only top-level columns are sorted by name; a nested field would resolve to a top-level
    // namesake (or nothing).
    if !schema.as_struct().fields().iter().any(|f| f.id == field.source_id) {
        return Err(format!("{}(nested field {})", field.transform, source.name));
    }
    let column = quote_ident(&source.name);
    let ty = source.field_type.as_primitive_type();
    let utc = if matches!(ty, Some(PrimitiveType::Timestamptz)) {
        format!("timezone('UTC', {column})")
    } else {
        column.clone()
    };
    Ok(Some(match (&field.transform, ty) {
        (Transform::Identity, Some(_)) => column,
        (Transform::Void, _) => return Ok(None),
        (Transform::Year, Some(_)) => format!("date_trunc('year', {utc})"),
        (Transform::Month, Some(_)) => format!("date_trunc('month', {utc})"),
        (Transform::Day, Some(_)) => format!("date_trunc('day', {utc})"),
        (Transform::Hour, Some(_)) => format!("date_trunc('hour', {utc})"),
        (Transform::Truncate(w), Some(PrimitiveType::Int | PrimitiveType::Long)) => {
            format!("({column} - ((({column} % {w}) + {w}) % {w}))")
        }
        (Transform::Truncate(w), Some(PrimitiveType::String)) => format!("left({column}, {w})"),
        (other, _) => return Err(format!("{other}({})", source.name)),
    }))
}

/// The table's default sort order as terms and `ORDER BY` SQL, or `Err(why)` when a field's
/// transform cannot be evaluated (`bucket`).
fn table_order(metadata: &TableMetadata) -> std::result::Result<(Vec<OrderTerm>, Vec<String>), String> {
    let schema = metadata.current_schema();
    let (mut terms, mut sql) = (Vec::new(), Vec::new());
    for field in &metadata.default_sort_order().fields {
        let Some(expr) = transform_sql(field, schema)? else { continue };
        let name = schema.field_by_id(field.source_id).map(|f| f.name.clone()).unwrap_or_default();
        let label = if field.transform == Transform::Identity { name } else { format!("{}({name})", field.transform) };
        let term = OrderTerm {
            column: label,
            descending: field.direction == SortDirection::Descending,
            nulls_first: field.null_order == NullOrder::First,
        };
        sql.push(format!("{expr} {}", term.modifiers()));
        terms.push(term);
    }
    Ok((terms, sql))
}

/// Resolves `options` on an Iceberg table.
pub fn iceberg_layout(options: &LayoutOptions, metadata: &TableMetadata) -> Result<IcebergLayout> {
    let schema = metadata.current_schema();
    let (table_terms, table_sql) = match table_order(metadata) {
        Ok(order) => order,
        Err(why) if options.sort_order.is_none() && options.strategy == Some(crate::plan::layout::Strategy::Sort) => {
            return Err(Error::invalid(format!(
                "strategy 'sort' without sort_order sorts by the table's sort order, which uses {why}: lakehouse cannot \
                 evaluate that transform; pass sort_order := 'col1, col2'"
            )));
        }
        // A table order with a transform we cannot evaluate: binpack unless told otherwise.
        Err(_) => (Vec::new(), Vec::new()),
    };
    let layout = options.resolve(&table_terms)?;
    let sortable: Vec<String> = schema
        .as_struct()
        .fields()
        .iter()
        .filter(|f| matches!(f.field_type.as_ref(), Type::Primitive(_)))
        .map(|f| f.name.clone())
        .collect();
    Ok(match layout {
        Layout::Binpack => {
            IcebergLayout { layout: Layout::Binpack, order: RowOrder::Unordered, sort_order_id: None, add: None }
        }
        Layout::Sort { table_order: true, .. } => IcebergLayout {
            order: RowOrder::Terms(table_sql),
            sort_order_id: i32::try_from(metadata.default_sort_order_id()).ok(),
            layout,
            add: None,
        },
        Layout::Zorder(_) => {
            let layout = resolve_names(layout, &sortable)?;
            let type_of = |c: &str| {
                let ty = schema.field_by_name(c).and_then(|f| f.field_type.as_primitive_type().map(|p| p.to_string()));
                ty.map_or_else(String::new, |t| iceberg_duckdb_name(&t))
            };
            IcebergLayout { order: RowOrder::of(&layout, type_of), layout, sort_order_id: None, add: None }
        }
        Layout::Sort { .. } => {
            let layout = resolve_names(layout, &sortable)?;
            let Layout::Sort { terms, .. } = &layout else { unreachable!("resolve_names keeps the variant") };
            let fields: Vec<SortField> = terms
                .iter()
                .map(|t| SortField {
                    source_id: schema.field_by_name(&t.column).map_or(0, |f| f.id),
                    transform: Transform::Identity,
                    direction: if t.descending { SortDirection::Descending } else { SortDirection::Ascending },
                    null_order: if t.nulls_first { NullOrder::First } else { NullOrder::Last },
                })
                .collect();
            let existing = metadata.sort_orders_iter().find(|o| o.fields == fields).map(|o| o.order_id);
            let id = existing
                .unwrap_or_else(|| metadata.sort_orders_iter().map(|o| o.order_id).max().unwrap_or(0).max(0) + 1);
            let add = existing.is_none().then_some(SortOrder { order_id: id, fields });
            IcebergLayout {
                order: RowOrder::of(&layout, |_| String::new()),
                sort_order_id: i32::try_from(id).ok(),
                layout,
                add,
            }
        }
    })
}

/// An Iceberg primitive type's name (`int`, `long`, `decimal(9,2)`, `timestamptz`, …) mapped to the
/// DuckDB type name [`ZorderScale::of`] reads.
fn iceberg_duckdb_name(iceberg: &str) -> String {
    match iceberg {
        "int" => "INTEGER".into(),
        "long" => "BIGINT".into(),
        "float" => "FLOAT".into(),
        "double" => "DOUBLE".into(),
        "date" => "DATE".into(),
        t if t.starts_with("timestamp") => "TIMESTAMP".into(),
        t if t.starts_with("decimal") => "DECIMAL".into(),
        other => other.to_ascii_uppercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_takes_bits_most_significant_first() {
        // Two one-byte keys 0b1111_0000 and 0b0000_1111 → 10101010 01010101.
        assert_eq!(interleave(&[&[0xF0], &[0x0F]], 1), vec![0xAA, 0x55]);
        // Short keys are zero-padded, long ones cut.
        assert_eq!(interleave(&[&[0xFF], &[]], 2), vec![0xAA, 0xAA, 0, 0]);
        assert_eq!(interleave(&[&[0xFF, 0xFF, 0xFF]], 1), vec![0xFF]);
        // One key: itself.
        assert_eq!(interleave(&[&[1, 2, 3]], 3), vec![1, 2, 3]);
    }

    #[test]
    fn z_values_order_a_grid_along_the_z_curve() {
        // On a 4×4 grid the z-order visits (0,0) (0,1) (1,0) (1,1) (0,2) ... : quadrant by quadrant.
        let mut cells: Vec<(u8, u8)> = (0..4).flat_map(|x| (0..4).map(move |y| (x, y))).collect();
        cells.sort_by_key(|&(x, y)| interleave(&[&[x << 6], &[y << 6]], 1));
        let first_quadrant: Vec<(u8, u8)> = cells[..4].to_vec();
        assert_eq!(first_quadrant, vec![(0, 0), (0, 1), (1, 0), (1, 1)]);
        assert!(cells[4..8].iter().all(|&(x, y)| x < 2 && y >= 2), "{cells:?}");
        assert_eq!(cells[15], (3, 3));
    }
}
