//! `imgfeed merge-index DIR`: join the slices of a split shards conversion.

use anyhow::Result;
use std::path::Path;

pub fn merge_index(dir: &Path) -> Result<i32> {
    let m = imgfeed::shards::merge_index(dir)?;
    println!(
        "merged {} samples in {} shard(s) into {}",
        m.samples,
        m.shards.len(),
        dir.join(imgfeed::shards::format::MANIFEST).display()
    );
    Ok(0)
}
