//! Reading whole metadata files (metadata.json, manifest lists, manifests) through iceberg-rust's
//! `FileIO`, or on object storage with one GET; errors name what was read.

use iceberg::io::FileIO;

use crate::error::{Error, ErrorKind, Result};
use crate::store::Location;

/// `{what} '{path}' does not exist` when it does not.
pub(crate) async fn ensure_exists(file_io: &FileIO, path: &str, what: &str) -> Result<()> {
    // A local file is checked with the error kept: iceberg-rust's `exists` says "no" on any
    // failure to stat, which would turn an I/O error into "does not exist".
    if let Ok(Location::Local(local)) = Location::parse(path)
        && local.is_absolute()
    {
        return match std::fs::metadata(local) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(Error::new(ErrorKind::NotFound, format!("{what} '{path}' does not exist")))
            }
            Err(e) => {
                Err(Error::new(ErrorKind::Io, format!("cannot read {what} '{path}'"))
                    .with_context("cause", e.to_string()))
            }
        };
    }
    if file_io.new_input(path)?.exists().await? {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::NotFound, format!("{what} '{path}' does not exist")))
    }
}

/// Reads a whole metadata file; `what` names it in errors ("manifest list '…' does not exist").
pub async fn read_file(file_io: &FileIO, path: &str, what: &str) -> Result<bytes::Bytes> {
    if crate::store::local_path(path).is_none() {
        // One GET (no HEAD first: on object storage every request is a round trip).
        return crate::store::read(path).await.map_err(|e| match e.kind() {
            ErrorKind::NotFound => Error::new(ErrorKind::NotFound, format!("{what} '{path}' does not exist")),
            _ => Error::new(ErrorKind::Io, format!("cannot read {what} '{path}'")).with_context("cause", e.message()),
        });
    }
    ensure_exists(file_io, path, what).await?;
    file_io.new_input(path)?.read().await.map_err(|e| {
        Error::new(ErrorKind::Io, format!("cannot read {what} '{path}'"))
            .with_context("cause", Error::from(e).to_string())
    })
}
