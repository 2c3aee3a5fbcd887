#![no_main]
//! Any bytes as a MindRecord file: an index whose entries lie inside the bytes (and its
//! group's names), or a typed error naming the file; never a panic, a hang or an
//! allocation past the input's size.
use imgfeed::formats::mindrecord::{group, index, read_header, MindRecordOptions};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let file = Path::new("d/fuzz.mindrecord");
    if let Ok(h) = read_header(data) {
        let _ = group(&h, file);
    }
    match index(data, &MindRecordOptions::default()) {
        Ok(entries) => {
            for e in entries {
                assert!(e.offset + e.len <= data.len() as u64);
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
