//! What moving a catalog's pointer to a new metadata file comes to, for every catalog whose
//! pointer we move ourselves (a SQL catalog's conditional `UPDATE`, Glue's `UpdateTable`; a REST
//! catalog moves its own).

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
