#![no_main]
//! Any bytes as a WebDataset tar: an index whose every entry lies inside the input (keys
//! non-empty, in file order), or a typed error; never a panic, a hang or an allocation
//! past the input's size.
use imgfeed::formats::tar::WebDataset;
use imgfeed::formats::RecordFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match WebDataset::default().index(data) {
        Ok(entries) => {
            let mut last = 0;
            for e in &entries {
                assert!(e.offset.checked_add(e.len).is_some_and(|end| end <= data.len() as u64));
                assert!(e.offset >= last);
                last = e.offset;
                assert!(!e.key.is_empty());
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
