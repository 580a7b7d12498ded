//! iceberg-rust's `FileIO` over this crate's object storage: its `Storage` trait is iceberg-rust's
//! door for other stores, and [`ObjectStorage`] serves it through [`super::object`], so Iceberg
//! metadata I/O shares the clients, credentials and request limit of everything else.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};

use super::location::is_remote;
use super::object::{delete_many, exists, head, list, read, read_range, write};
use crate::error::Error;

/// The `FileIO` for a table at `location`: object storage through [`ObjectStorageFactory`], else
/// local files.
pub fn file_io_for(location: &str) -> iceberg::io::FileIO {
    if is_remote(location) {
        iceberg::io::FileIOBuilder::new(Arc::new(ObjectStorageFactory)).build()
    } else {
        iceberg::io::FileIO::new_with_fs()
    }
}

/// Builds [`ObjectStorage`]; the settings come from [`super::register`], per location.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ObjectStorageFactory;

#[typetag::serde]
impl iceberg::io::StorageFactory for ObjectStorageFactory {
    fn build(&self, _config: &iceberg::io::StorageConfig) -> iceberg::Result<Arc<dyn iceberg::io::Storage>> {
        Ok(Arc::new(ObjectStorage))
    }
}

/// iceberg-rust's `Storage` on object storage through [`super::object`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ObjectStorage;

fn to_iceberg(e: Error) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.message().to_string())
}

struct ObjectRead(String);

#[async_trait::async_trait]
impl iceberg::io::FileRead for ObjectRead {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        read_range(&self.0, range).await.map_err(to_iceberg)
    }
}

/// Buffers a file in memory and writes it whole on close (manifests and lists are small).
struct ObjectWrite {
    location: String,
    buffer: Vec<u8>,
    closed: bool,
}

#[async_trait::async_trait]
impl iceberg::io::FileWrite for ObjectWrite {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.buffer.extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        if self.closed {
            return Err(iceberg::Error::new(iceberg::ErrorKind::Unexpected, "file already closed"));
        }
        self.closed = true;
        write(&self.location, Bytes::from(std::mem::take(&mut self.buffer))).await.map_err(to_iceberg)
    }
}

#[async_trait::async_trait]
#[typetag::serde]
impl iceberg::io::Storage for ObjectStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        exists(path).await.map_err(to_iceberg)
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<iceberg::io::FileMetadata> {
        match head(path).await.map_err(to_iceberg)? {
            Some(info) => Ok(iceberg::io::FileMetadata { size: info.size_bytes }),
            None => Err(iceberg::Error::new(iceberg::ErrorKind::Unexpected, format!("'{path}' does not exist"))),
        }
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        read(path).await.map_err(to_iceberg)
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn iceberg::io::FileRead>> {
        Ok(Box::new(ObjectRead(path.to_string())))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        write(path, bs).await.map_err(to_iceberg)
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn iceberg::io::FileWrite>> {
        Ok(Box::new(ObjectWrite { location: path.to_string(), buffer: Vec::new(), closed: false }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        delete_many(vec![path.to_string()]).await.pop().unwrap_or(Ok(())).map_err(to_iceberg)
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let objects = list(path).await.map_err(to_iceberg)?;
        for r in delete_many(objects.into_iter().map(|o| o.location).collect()).await {
            r.map_err(to_iceberg)?;
        }
        Ok(())
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        let paths: Vec<String> = paths.collect().await;
        for r in delete_many(paths).await {
            r.map_err(to_iceberg)?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<iceberg::io::InputFile> {
        Ok(iceberg::io::InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<iceberg::io::OutputFile> {
        Ok(iceberg::io::OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}
