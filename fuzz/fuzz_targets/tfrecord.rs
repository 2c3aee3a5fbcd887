#![no_main]
//! Any bytes as a TFRecord file: an index whose entries lie inside the bytes, or a typed
//! error naming the record; never a panic, a hang or an allocation past the input's size.
use imgfeed::formats::tfrecord::{index, TfRecordOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = TfRecordOptions::default();
    match index(data, &opts) {
        Ok(entries) => {
            for e in entries {
                assert!(e.offset + e.len <= data.len() as u64);
            }
        }
        Err(e) => assert!(e.to_string().starts_with("record ")),
    }
});
