//! `imgfeed merge-index DIR`: join the slices of a split shards conversion (DIR may be
//! `s3://bucket/prefix`); `imgfeed merge-npy OUT SLICE...`: join those of a split npy
//! conversion.

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

pub fn merge_npy(out: &Path, slices: &[std::path::PathBuf]) -> Result<i32> {
    let m = imgfeed::sink::merge_npy(slices, out)?;
    println!(
        "merged {} samples from {} slice(s) into {}",
        m.samples,
        m.slices,
        out.display()
    );
    Ok(0)
}
