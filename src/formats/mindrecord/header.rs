//! A MindRecord file's header: `header length: u64 LE`, then that many bytes of JSON (the
//! schema, the shard group's file names, the page table), padded with zeros to
//! `header_size`. Pages of `page_size` bytes follow it, page `i` at
//! `header_size + i × page_size`.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The JSON header, as far as the reader needs it (the other keys — `index_fields`,
/// `statistics`, `compression_size`, `version` — are ignored).
#[derive(Clone, Debug, Deserialize)]
pub struct Header {
    /// Bytes from the file's start to the first page.
    pub header_size: u64,
    /// Bytes each page has (the last page of the file may be shorter).
    pub page_size: u64,
    /// The file's pages.
    pub page: Vec<PageDesc>,
    /// The schema (MindSpore allows exactly one).
    pub schema: Vec<SchemaDesc>,
    /// The file names of the shard group, in MindSpore's order.
    pub shard_addresses: Vec<String>,
    /// This file's place in the group.
    #[serde(default)]
    pub shard_id: Option<u64>,
}

/// One page of the page table.
#[derive(Clone, Debug, Deserialize)]
pub struct PageDesc {
    /// Where the page lies: `header_size + page_id × page_size`.
    pub page_id: u64,
    /// `BLOB_DATA` (one row group's blobs) or `RAW_DATA` (rows' scalar columns).
    pub page_type: String,
    /// For a blob page, its row group.
    pub page_type_id: u64,
    /// A blob page's first row (global in the file).
    pub start_row_id: u64,
    /// A blob page's end row (exclusive).
    pub end_row_id: u64,
    /// For a raw page, where each row group's rows start in it.
    pub row_group_ids: Vec<RowGroupRef>,
    /// Bytes used in the page.
    pub page_size: u64,
}

/// A row group's start in a raw page.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct RowGroupRef {
    /// The row group.
    pub id: u64,
    /// Where its rows start in the page.
    pub offset: u64,
}

/// The schema: column types, and which columns are blobs (in the blob pages).
#[derive(Clone, Debug, Deserialize)]
pub struct SchemaDesc {
    /// The blob columns, in the order a row's blob holds them.
    pub blob_fields: Vec<String>,
    /// Column name → `{"type": ..., "shape": [...]}`.
    pub schema: BTreeMap<String, ColumnDesc>,
}

/// One column's type.
#[derive(Clone, Debug, Deserialize)]
pub struct ColumnDesc {
    /// `bytes`, `string`, `int32`, `int64`, `float32`, `float64`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Present for array columns.
    #[serde(default)]
    pub shape: Option<Vec<i64>>,
}

/// Page types of the page table.
pub const BLOB_PAGE: &str = "BLOB_DATA";
/// Pages of raw rows.
pub const RAW_PAGE: &str = "RAW_DATA";
