//! The files of a location as a reader of few large files (shards, container files)
//! reads them: whole, fetched into the cache ([`FetchAhead`]), or by samples' byte ranges
//! into memory ([`RangeAhead`], range mode: the exact global shuffle over files that do
//! not fit the cache). Which one is the `fetch` option's choice ([`Fetch`](super::Fetch)).

use super::{FetchAhead, RangeAhead};
use crate::error::Result;
use std::ops::Range;

/// A location's files, read whole or by ranges (see the module).
#[derive(Debug)]
pub enum RemoteFiles {
    /// Whole files through the cache.
    Whole(FetchAhead),
    /// Samples' byte ranges.
    Ranges(RangeAhead),
}

impl RemoteFiles {
    /// Epoch `epoch` reads the samples `order` (indices, in order).
    pub fn start_epoch(&self, epoch: u64, order: &[usize]) {
        match self {
            RemoteFiles::Whole(f) => f.start_epoch(epoch, order),
            RemoteFiles::Ranges(r) => r.start_epoch(epoch, order),
        }
    }

    /// The run reads no epoch after `epoch` (a hint: range mode keeps nothing for one).
    pub fn last_epoch(&self, epoch: u64) {
        if let RemoteFiles::Ranges(r) = self {
            r.last_epoch(epoch);
        }
    }

    /// Copy bytes `range` of file `file` into `scratch` (the read of sample `index`).
    pub fn copy(
        &self,
        file: usize,
        range: Range<usize>,
        index: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        match self {
            RemoteFiles::Whole(f) => f.copy(file, range, index, scratch),
            RemoteFiles::Ranges(r) => r.copy(file, range, index, scratch),
        }
    }

    /// Read every file and check it whole (size, CRC-32 when listed, header).
    pub fn verify_all(&self) -> Result<()> {
        match self {
            RemoteFiles::Whole(f) => f.verify_all(),
            RemoteFiles::Ranges(r) => r.verify_all(),
        }
    }

    /// Whether samples are read by ranges.
    pub fn ranged(&self) -> bool {
        matches!(self, RemoteFiles::Ranges(_))
    }
}
