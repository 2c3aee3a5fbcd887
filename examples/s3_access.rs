//! Whole-shard downloads against ranged reads of records, from an S3-compatible store: the
//! measurement behind the shards source's choice of whole-shard downloads
//! (BENCHMARKS.md). Reads the local copy's index for the record ranges.
//!
//! ```sh
//! AWS_ENDPOINT_URL=http://127.0.0.1:5000 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
//!   cargo run --release --example s3_access -- s3://bucket/prefix LOCAL_DIR
//! ```

use imgfeed::shards::format::{Entry, HEADER_LEN};
use imgfeed::shards::Manifest;
use imgfeed::store::{StoreClient, StoreUrl};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, local] = args.as_slice() else {
        return Err("usage: s3_access s3://bucket/prefix LOCAL_SHARDS_DIR".into());
    };
    let local = std::path::Path::new(local);
    let url = StoreUrl::parse(url)?;
    let client = StoreClient::new(&url, None)?;
    let manifest = Manifest::read(&local.join("manifest.json"))?;
    let index = std::fs::read(local.join(&manifest.index.file))?;
    let body = index.get(HEADER_LEN..).ok_or("short index")?;
    let entries: Vec<Entry> = (0..manifest.samples as usize)
        .filter_map(|i| Entry::at(body, i))
        .collect();
    let dir = tempfile::tempdir()?;
    for round in 0..3 {
        let t0 = Instant::now();
        let mut bytes = 0u64;
        for (i, s) in manifest.shards.iter().enumerate() {
            let mut f = std::fs::File::create(dir.path().join(format!("{i}")))?;
            bytes += client
                .download(&s.file, Some((s.size, "the manifest")), &mut f)?
                .0
                .size;
        }
        let whole = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let mut rbytes = 0u64;
        for e in &entries {
            let file = &manifest.shards[e.shard as usize].file;
            rbytes += client.get_range(file, e.offset..e.offset + e.length)?.len() as u64;
        }
        let ranged = t0.elapsed().as_secs_f64();
        println!(
            "round {round}: whole shards: {} requests, {:.1} MB in {whole:.3} s = {:.1} MB/s, \
             {:.0} samples/s | ranged records: {} requests, {:.1} MB in {ranged:.3} s = {:.1} \
             MB/s, {:.0} samples/s",
            manifest.shards.len(),
            bytes as f64 / 1e6,
            bytes as f64 / 1e6 / whole,
            entries.len() as f64 / whole,
            entries.len(),
            rbytes as f64 / 1e6,
            rbytes as f64 / 1e6 / ranged,
            entries.len() as f64 / ranged,
        );
    }
    Ok(())
}
