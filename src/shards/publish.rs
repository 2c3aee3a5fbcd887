//! Where a conversion's finished files go when the output is not the local folder they are
//! written in: a [`Publish`] takes each file as soon as it is complete (a shard when the
//! next one starts, then the index and the names) and stores the manifest only after every
//! file is stored, so a reader never sees half a dataset. Object storage is one
//! ([`super::upload::Uploader`]); without one, the writer renames its files in place.

use crate::error::Result;
use std::path::PathBuf;

/// Takes the finished files of a [`ShardWriter`](super::ShardWriter).
pub trait Publish: Send {
    /// A complete file: the temporary file `tmp` holds `name`'s bytes. The publisher owns
    /// it from now on (and removes it once stored). An error here is an earlier file's
    /// failure too: the conversion stops.
    fn file(&mut self, tmp: PathBuf, name: &str) -> Result<()>;

    /// Every file given: wait until all are stored, then store `manifest` (the bytes of the
    /// manifest file `name`) last. Dropping a publisher without this call removes what it
    /// stored (best effort), leaving no partial dataset.
    fn finish(&mut self, name: &str, manifest: Vec<u8>) -> Result<()>;

    /// Where the output goes, for messages (`s3://bucket/prefix`).
    fn target(&self) -> String;
}
