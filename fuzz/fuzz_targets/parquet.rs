#![no_main]
//! Any bytes as a Parquet file: unpacked into a copy whose index's entries lie inside it,
//! or a typed error; any bytes as an unpacked copy: an index inside them or an error; never
//! a panic that escapes (the `parquet` crate's own are caught and reported), or a hang.
//! The images read in place from the file's pages (range mode's index) lie inside it and
//! decode or fail; any bytes as a Snappy stream: scanned, located and decoded, or an error.
use imgfeed::formats::parquet::{index, unpack, Parquet, ParquetOptions};
use imgfeed::formats::snappy::{decode_within, Elements};
use imgfeed::formats::RecordFormat;
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
        for e in &entries {
            assert!(e.offset + e.len <= copy.len() as u64);
        }
        for e in Parquet::default().in_place(data, &entries).unwrap_or_default() {
            let end = e.offset + e.len;
            assert!(end <= data.len() as u64);
            let mut buf = data[e.offset as usize..end as usize].to_vec();
            let n = buf.len();
            let _ = e.stored.image(&mut buf, 0..n);
        }
    }
    if let Ok(el) = Elements::scan(data) {
        let len = el.len();
        for (a, b) in [(0, len), (len / 3, len / 2), (len / 2, len)] {
            if let Some(l) = el.locate(a..b) {
                let mut buf = data[l.start..l.end].to_vec();
                let n = buf.len();
                let got = decode_within(&mut buf, 0..n, l.lead, l.skip + (b - a));
                assert!(got.is_ok(), "a located slice decodes");
            }
        }
    }
    if let Ok(entries) = index(data) {
        for e in entries {
            assert!(e.offset + e.len <= data.len() as u64);
        }
    }
});
