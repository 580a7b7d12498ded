//! What publishing a commit through a catalog comes to: a pointer move we make ourselves (a SQL
//! catalog's conditional `UPDATE`, Glue's `UpdateTable`: [`Swap`]), or changes a catalog applies
//! and writes the metadata of itself (a REST catalog's commit: [`Published`]).

/// One pointer move: `namespace.table`'s pointer from `base` to `new_location`, only if it is
/// still `base`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Move<'a> {
    /// The table's namespace.
    pub namespace: &'a str,
    /// The table's name.
    pub table: &'a str,
    /// The metadata location the commit was based on.
    pub base: &'a str,
    /// The new metadata file (written and flushed).
    pub new_location: &'a str,
}

/// The outcome of one pointer move.
#[derive(Debug, Clone, PartialEq)]
pub enum Swap {
    /// The pointer names the new metadata.
    Moved,
    /// Another writer moved it first (or the lock refused): nothing was committed.
    Conflict,
    /// No answer: the pointer may or may not have moved.
    Unknown(String),
}

/// The outcome of changes sent to a catalog that applies them itself.
#[derive(Debug, Clone, PartialEq)]
pub enum Published {
    /// Committed; the new metadata location.
    Committed(String),
    /// A requirement failed (409): nothing was committed.
    Conflict,
    /// 5xx, a timeout or a dropped connection: the commit may or may not have landed.
    Unknown(String),
}
