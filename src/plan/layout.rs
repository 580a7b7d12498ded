//! What order compacted files are written in (pure): the `strategy` and `sort_order` a user asks
//! for, in Spark's spellings, and the `skip_recent_partitions` window.
//!
//! - `binpack`: rows are concatenated, no sort (cheapest);
//! - `sort`: rows are sorted within each output file by `sort_order` (`'id DESC NULLS LAST, name'`,
//!   Spark's defaults: `ASC NULLS FIRST`, `DESC NULLS LAST`), or by the table's own sort order;
//! - `zorder`: rows are sorted by the z-value of the columns (`'zorder(a, b)'`, also accepted as
//!   `sort_order` of strategy `sort`, as Spark spells it): the bits of each column's
//!   order-preserving key interleaved, so files cluster on every column at once.
//!
//! Unset, the table's default sort order is used when it has one, else binpack (as Spark does).

use crate::error::{Error, Result};

/// The most columns a z-order interleaves (`lakehouse_zorder_key`'s arity).
pub const MAX_ZORDER_COLUMNS: usize = 16;

/// The rewrite strategy asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Concatenate.
    Binpack,
    /// Sort by a sort order.
    Sort,
    /// Sort by the interleaved bits of several columns.
    Zorder,
}

impl Strategy {
    /// Parses `binpack`, `sort` or `zorder` (any case).
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "binpack" => Ok(Self::Binpack),
            "sort" => Ok(Self::Sort),
            "zorder" => Ok(Self::Zorder),
            other => Err(Error::invalid(format!("strategy must be 'binpack', 'sort' or 'zorder', got '{other}'"))),
        }
    }
}

/// One term of a sort order: a column, its direction and where nulls go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderTerm {
    /// Column name as given (unquoted).
    pub column: String,
    /// `DESC`.
    pub descending: bool,
    /// `NULLS FIRST`.
    pub nulls_first: bool,
}

impl OrderTerm {
    /// `col ASC NULLS FIRST` (Spark's default null order for the direction when not given).
    pub fn new(column: &str, descending: bool, nulls_first: Option<bool>) -> Self {
        Self { column: column.to_string(), descending, nulls_first: nulls_first.unwrap_or(!descending) }
    }

    /// `ASC NULLS FIRST` / `DESC NULLS LAST`, for SQL and labels.
    pub fn modifiers(&self) -> String {
        format!(
            "{} NULLS {}",
            if self.descending { "DESC" } else { "ASC" },
            if self.nulls_first { "FIRST" } else { "LAST" }
        )
    }
}

/// A parsed `sort_order`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderSpec {
    /// `a DESC NULLS LAST, b`.
    Sort(Vec<OrderTerm>),
    /// `zorder(a, b)`.
    Zorder(Vec<String>),
}

/// What the user asked for: a strategy, a sort order, both or neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LayoutOptions {
    /// `strategy`, when given.
    pub strategy: Option<Strategy>,
    /// `sort_order`, when given.
    pub sort_order: Option<OrderSpec>,
}

/// How a compaction lays out rows once the table is known ([`LayoutOptions::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// No sort.
    Binpack,
    /// Sort by these terms; `table_order`: the table's default sort order is what is used.
    Sort { terms: Vec<OrderTerm>, table_order: bool },
    /// Z-order on these columns.
    Zorder(Vec<String>),
}

impl Layout {
    /// `binpack`, `sort(id DESC NULLS LAST)`, `zorder(a, b)`: what the output shows.
    pub fn label(&self) -> String {
        match self {
            Layout::Binpack => "binpack".into(),
            Layout::Sort { terms, .. } => format!(
                "sort({})",
                terms.iter().map(|t| format!("{} {}", t.column, t.modifiers())).collect::<Vec<_>>().join(", ")
            ),
            Layout::Zorder(columns) => format!("zorder({})", columns.join(", ")),
        }
    }

    /// The columns the layout reads.
    pub fn columns(&self) -> Vec<&str> {
        match self {
            Layout::Binpack => Vec::new(),
            Layout::Sort { terms, .. } => terms.iter().map(|t| t.column.as_str()).collect(),
            Layout::Zorder(columns) => columns.iter().map(String::as_str).collect(),
        }
    }
}

impl LayoutOptions {
    /// Parses and checks the combination (`strategy`, `sort_order`).
    pub fn new(strategy: Option<&str>, sort_order: Option<&str>) -> Result<Self> {
        let strategy = strategy.map(Strategy::parse).transpose()?;
        let sort_order = sort_order.map(parse_sort_order).transpose()?;
        let layout = Self { strategy, sort_order };
        match (&layout.strategy, &layout.sort_order) {
            (Some(Strategy::Binpack), Some(_)) => Err(Error::invalid(
                "sort_order applies to strategy 'sort' or 'zorder'; strategy 'binpack' does not sort",
            )),
            (Some(Strategy::Zorder), Some(OrderSpec::Sort(terms)))
                if terms.iter().any(|t| t.descending || t.nulls_first == t.descending) =>
            {
                Err(Error::invalid(
                    "strategy 'zorder' takes columns only ('a, b' or 'zorder(a, b)'), no ASC/DESC or NULLS",
                ))
            }
            _ => Ok(layout),
        }
    }

    /// The layout on a table whose default sort order is `table_order` (empty: unsorted).
    pub fn resolve(&self, table_order: &[OrderTerm]) -> Result<Layout> {
        let table = || Layout::Sort { terms: table_order.to_vec(), table_order: true };
        Ok(match (self.strategy, &self.sort_order) {
            (Some(Strategy::Binpack), _) => Layout::Binpack,
            (_, Some(OrderSpec::Zorder(columns))) => Layout::Zorder(columns.clone()),
            (Some(Strategy::Zorder), Some(OrderSpec::Sort(terms))) => {
                Layout::Zorder(terms.iter().map(|t| t.column.clone()).collect())
            }
            (_, Some(OrderSpec::Sort(terms))) => Layout::Sort { terms: terms.clone(), table_order: false },
            (Some(Strategy::Zorder), None) => {
                return Err(Error::invalid("strategy 'zorder' needs sort_order := 'zorder(col1, col2)'"));
            }
            (Some(Strategy::Sort), None) if table_order.is_empty() => {
                return Err(Error::invalid(
                    "strategy 'sort' needs sort_order (e.g. 'col1 DESC NULLS LAST, col2'): the table has no sort order",
                ));
            }
            (Some(Strategy::Sort), None) => table(),
            (None, None) if table_order.is_empty() => Layout::Binpack,
            (None, None) => table(),
        })
    }
}

/// Splits `text` on top-level commas (outside back-quotes and parentheses).
fn split_top_level(text: &str) -> Result<Vec<String>> {
    let (mut parts, mut current, mut depth, mut quoted) = (Vec::new(), String::new(), 0i32, false);
    for c in text.chars() {
        match c {
            '`' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if quoted || depth != 0 {
        return Err(Error::invalid(format!("sort_order '{text}' has an unbalanced back-quote or parenthesis")));
    }
    parts.push(current);
    Ok(parts)
}

/// Reads a column name at the start of `text` (back-quoted with ``` `` ``` for a back-quote, or a
/// bare identifier, dots allowed): (name, rest).
fn column_name(text: &str) -> Result<(String, &str)> {
    let text = text.trim_start();
    if let Some(rest) = text.strip_prefix('`') {
        let mut name = String::new();
        let mut chars = rest.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '`' {
                if matches!(chars.peek(), Some((_, '`'))) {
                    chars.next();
                    name.push('`');
                    continue;
                }
                return Ok((name, &rest[i + 1..]));
            }
            name.push(c);
        }
        return Err(Error::invalid(format!("sort_order: unterminated back-quote in '{text}'")));
    }
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')).unwrap_or(text.len());
    if end == 0 {
        return Err(Error::invalid(format!("sort_order: expected a column name at '{}'", text.trim())));
    }
    Ok((text[..end].to_string(), &text[end..]))
}

/// Parses Spark's `sort_order` spellings: `col1 DESC NULLS LAST, col2` or `zorder(col1, col2)`.
/// Transforms (`bucket(16, id)`, `days(ts)`) are refused: sort by the column itself.
pub fn parse_sort_order(text: &str) -> Result<OrderSpec> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(Error::invalid("sort_order must not be empty"));
    }
    let lower = trimmed.to_ascii_lowercase();
    if lower.starts_with("zorder") && lower["zorder".len()..].trim_start().starts_with('(') {
        let open = trimmed.find('(').expect("checked");
        let inner = trimmed[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| Error::invalid(format!("sort_order '{trimmed}': zorder(...) must close with ')'")))?;
        let mut columns = Vec::new();
        for part in split_top_level(inner)? {
            let (name, rest) = column_name(&part)?;
            if !rest.trim().is_empty() {
                return Err(Error::invalid(format!(
                    "sort_order '{trimmed}': zorder takes column names only, got '{}'",
                    part.trim()
                )));
            }
            columns.push(name);
        }
        check_distinct(&columns, trimmed)?;
        if columns.len() > MAX_ZORDER_COLUMNS {
            return Err(Error::invalid(format!(
                "sort_order '{trimmed}': zorder takes at most {MAX_ZORDER_COLUMNS} columns (each gets 1/n of the key's \
                 bits; past a few columns z-order clusters none of them)"
            )));
        }
        return Ok(OrderSpec::Zorder(columns));
    }
    let mut terms = Vec::new();
    for part in split_top_level(trimmed)? {
        let (name, rest) = column_name(&part)?;
        if rest.trim_start().starts_with('(') {
            return Err(Error::invalid(format!(
                "sort_order '{trimmed}': transforms like '{}' are not supported; sort by the column itself \
                 (or use 'zorder(a, b)')",
                part.trim()
            )));
        }
        let words: Vec<String> = rest.split_whitespace().map(str::to_ascii_uppercase).collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let (descending, nulls) = match words.as_slice() {
            [] => (false, None),
            ["ASC"] => (false, None),
            ["DESC"] => (true, None),
            ["NULLS", n] => (false, Some(*n)),
            ["ASC", "NULLS", n] => (false, Some(*n)),
            ["DESC", "NULLS", n] => (true, Some(*n)),
            _ => {
                return Err(Error::invalid(format!(
                    "sort_order '{trimmed}': cannot read '{}' (expected 'col [ASC|DESC] [NULLS FIRST|LAST]')",
                    part.trim()
                )));
            }
        };
        let nulls_first = match nulls {
            None => None,
            Some("FIRST") => Some(true),
            Some("LAST") => Some(false),
            Some(other) => {
                return Err(Error::invalid(format!(
                    "sort_order '{trimmed}': NULLS must be FIRST or LAST, got '{other}'"
                )));
            }
        };
        terms.push(OrderTerm::new(&name, descending, nulls_first));
    }
    check_distinct(&terms.iter().map(|t| t.column.clone()).collect::<Vec<_>>(), trimmed)?;
    Ok(OrderSpec::Sort(terms))
}

fn check_distinct(columns: &[String], text: &str) -> Result<()> {
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].iter().any(|d| d.eq_ignore_ascii_case(c)) {
            return Err(Error::invalid(format!("sort_order '{text}' names column '{c}' twice")));
        }
    }
    Ok(())
}

/// Microseconds in one unit of `skip_recent_partitions`.
fn unit_micros(unit: &str) -> Option<i64> {
    const SECOND: i64 = 1_000_000;
    Some(match unit.strip_suffix('s').unwrap_or(unit) {
        "microsecond" => 1,
        "millisecond" => 1_000,
        "second" => SECOND,
        "minute" => 60 * SECOND,
        "hour" => 3_600 * SECOND,
        "day" => 86_400 * SECOND,
        "week" => 7 * 86_400 * SECOND,
        _ => return None,
    })
}

/// `skip_recent_partitions` as the SQL functions take it: absent means `'0'` ([`parse_recent_window`]).
pub fn recent_window(text: Option<&str>) -> Result<Option<i64>> {
    text.map_or(Ok(Some(0)), parse_recent_window)
}

/// Parses `skip_recent_partitions`: `'1 day'`, `'6 hours'`, `'0'` (only the partition covering
/// now), or `'none'` (hold nothing back): `Some(window in µs)` or `None`.
pub fn parse_recent_window(text: &str) -> Result<Option<i64>> {
    let lower = text.trim().to_ascii_lowercase();
    let bad = || {
        Error::invalid(format!(
            "skip_recent_partitions must be a duration like '1 day', '6 hours' or '0', or 'none', got '{}'",
            text.trim()
        ))
    };
    if lower == "none" || lower == "off" {
        return Ok(None);
    }
    let mut total: i64 = 0;
    let words: Vec<&str> = lower.split_whitespace().collect();
    if words.is_empty() {
        return Err(bad());
    }
    if words == ["0"] {
        return Ok(Some(0));
    }
    for pair in words.chunks(2) {
        let [n, unit] = pair else { return Err(bad()) };
        let n: f64 = n.parse().map_err(|_| bad())?;
        if !n.is_finite() || n < 0.0 {
            return Err(Error::invalid(format!("skip_recent_partitions must not be negative, got '{}'", text.trim())));
        }
        let micros = unit_micros(unit).ok_or_else(bad)?;
        total = total.saturating_add((n * micros as f64) as i64);
    }
    Ok(Some(total))
}

/// Whether a partition of range `[start, end)` is still being written at `now` with `window`:
/// it ends after `now - window` (the partition covering now, later ones, and with a window the
/// ones that ended within it).
pub fn is_recent((_, end): (i64, i64), now: i64, window: i64) -> bool {
    end > now.saturating_sub(window)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sort(terms: &[(&str, bool, bool)]) -> OrderSpec {
        OrderSpec::Sort(
            terms
                .iter()
                .map(|(c, d, n)| OrderTerm { column: c.to_string(), descending: *d, nulls_first: *n })
                .collect(),
        )
    }

    #[test]
    fn spark_sort_order_spellings() {
        let cases: Vec<(&str, OrderSpec)> = vec![
            ("id", sort(&[("id", false, true)])),
            ("id DESC", sort(&[("id", true, false)])),
            ("id desc nulls first, name", sort(&[("id", true, true), ("name", false, true)])),
            ("a ASC NULLS LAST,b NULLS FIRST", sort(&[("a", false, false), ("b", false, true)])),
            ("`odd, name` DESC", sort(&[("odd, name", true, false)])),
            ("`a``b`", sort(&[("a`b", false, true)])),
            ("s.x", sort(&[("s.x", false, true)])),
            ("zorder(a, b)", OrderSpec::Zorder(vec!["a".into(), "b".into()])),
            ("ZORDER ( `c d` ,e )", OrderSpec::Zorder(vec!["c d".into(), "e".into()])),
            ("zorder_col", sort(&[("zorder_col", false, true)])),
        ];
        for (text, want) in cases {
            assert_eq!(parse_sort_order(text).unwrap(), want, "{text}");
        }
        for bad in [
            "",
            "id sideways",
            "id NULLS MIDDLE",
            "bucket(16, id)",
            "zorder(a, b",
            "zorder(a DESC)",
            "zorder(c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17)",
            "a, a",
            "zorder(a, A)",
            "`a",
            "id,",
        ] {
            assert!(parse_sort_order(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn strategy_and_sort_order_resolve_like_spark() {
        let table = vec![OrderTerm::new("ts", true, None)];
        let resolve = |s: Option<&str>, o: Option<&str>, t: &[OrderTerm]| LayoutOptions::new(s, o)?.resolve(t);
        assert_eq!(resolve(None, None, &[]).unwrap(), Layout::Binpack);
        assert_eq!(resolve(None, None, &table).unwrap(), Layout::Sort { terms: table.clone(), table_order: true });
        assert_eq!(resolve(Some("binpack"), None, &table).unwrap(), Layout::Binpack);
        assert_eq!(
            resolve(Some("SORT"), None, &table).unwrap(),
            Layout::Sort { terms: table.clone(), table_order: true }
        );
        assert!(resolve(Some("sort"), None, &[]).is_err(), "nothing to sort by");
        assert_eq!(
            resolve(Some("sort"), Some("zorder(a,b)"), &[]).unwrap(),
            Layout::Zorder(vec!["a".into(), "b".into()])
        );
        assert_eq!(resolve(Some("zorder"), Some("a, b"), &[]).unwrap(), Layout::Zorder(vec!["a".into(), "b".into()]));
        assert_eq!(resolve(None, Some("zorder(a)"), &table).unwrap(), Layout::Zorder(vec!["a".into()]));
        let custom = resolve(None, Some("x DESC"), &table).unwrap();
        assert_eq!(custom.label(), "sort(x DESC NULLS LAST)");
        assert!(resolve(Some("zorder"), None, &table).is_err());
        assert!(resolve(Some("zorder"), Some("a DESC"), &[]).is_err());
        assert!(resolve(Some("binpack"), Some("a"), &[]).is_err());
        assert!(resolve(Some("hilbert"), None, &[]).is_err());
    }

    #[test]
    fn recent_windows() {
        const H: i64 = 3_600_000_000;
        assert_eq!(parse_recent_window("1 day").unwrap(), Some(24 * H));
        assert_eq!(parse_recent_window(" 6 HOURS ").unwrap(), Some(6 * H));
        assert_eq!(parse_recent_window("1 day 2 hours").unwrap(), Some(26 * H));
        assert_eq!(parse_recent_window("1.5 hours").unwrap(), Some(3 * H / 2));
        assert_eq!(parse_recent_window("0").unwrap(), Some(0));
        assert_eq!(parse_recent_window("none").unwrap(), None);
        for bad in ["", "-1 day", "1 fortnight", "day", "1 day 2", "x hours"] {
            assert!(parse_recent_window(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn recency() {
        const DAY: i64 = 86_400_000_000;
        let today = 20_793;
        let now = today * DAY + 5 * DAY / 24;
        let day = |d: i64| (d * DAY, (d + 1) * DAY);
        assert!(is_recent(day(today), now, 0));
        assert!(is_recent(day(today + 3), now, 0), "a future partition is still open");
        assert!(!is_recent(day(today - 1), now, 0), "yesterday ended before now");
        assert!(is_recent(day(today - 1), now, DAY), "but within a day's window");
        assert!(!is_recent(day(today - 2), now, DAY));
    }
}
