//! `imgfeed merge-index DIR`: join the slices of a split shards conversion (DIR may be
//! `s3://bucket/prefix`).

use anyhow::Result;
use imgfeed::store::StoreOptions;
use std::path::Path;

pub fn merge_index(dir: &Path, endpoint: Option<String>) -> Result<i32> {
    let mut options = StoreOptions::default();
    options.endpoint = endpoint;
    let m = imgfeed::shards::merge_index_with(dir, &options)?;
    println!(
        "merged {} samples in {} shard(s) into {}",
        m.samples,
        m.shards.len(),
        dir.join(imgfeed::shards::format::MANIFEST).display()
    );
    let traffic = imgfeed::store::snapshot();
    if !traffic.is_empty() {
        println!("{traffic}");
    }
    Ok(0)
}
