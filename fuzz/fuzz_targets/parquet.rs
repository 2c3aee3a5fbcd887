#![no_main]
//! Any bytes as a Parquet file: unpacked into a copy whose index's entries lie inside it,
//! or a typed error; any bytes as an unpacked copy: an index inside them or an error; never
//! a panic that escapes (the `parquet` crate's own are caught and reported), or a hang.
use imgfeed::formats::parquet::{index, unpack, ParquetOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut copy = Vec::new();
    if unpack(data, &ParquetOptions::default(), &mut copy).is_ok() {
        let entries = index(&copy).expect("an unpacked copy indexes");
        for e in entries {
            assert!(e.offset + e.len <= copy.len() as u64);
        }
    }
    if let Ok(entries) = index(data) {
        for e in entries {
            assert!(e.offset + e.len <= data.len() as u64);
        }
    }
});
