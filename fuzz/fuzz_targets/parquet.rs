#![no_main]
//! Any bytes as a Parquet file: unpacked into a copy whose index's entries lie inside it,
//! or a typed error; any bytes as an unpacked copy: an index inside them or an error; never
//! a panic that escapes (the `parquet` crate's own are caught and reported), or a hang.
use imgfeed::formats::parquet::{index, unpack, ParquetOptions};
use libfuzzer_sys::fuzz_target;
use std::sync::Once;

/// libFuzzer's panic hook aborts on any panic, before `imgfeed`'s guard around the
/// `parquet` crate can catch it and report `ParquetError::Malformed`. Wrap it: a panic
/// raised inside the `parquet` crate's own files unwinds to that guard (the behaviour a
/// user gets); any other panic (ours) still aborts and is a crash.
fn let_the_guard_catch_parquets_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_crate = info
                .location()
                .is_some_and(|l| l.file().contains("/parquet-"));
            if !in_crate {
                abort(info);
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    let_the_guard_catch_parquets_panics();
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
