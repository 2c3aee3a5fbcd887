#![no_main]
//! Bytes after a JPEG SOI marker through the JPEG decoder: Ok within the pixel limit, or a
//! typed error; never a panic, a hang or a huge buffer.
use imgfeed::codec::Decoder;
use imgfeed::ops::Decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut bytes = Vec::with_capacity(data.len() + 3);
    if !data.starts_with(&[0xFF, 0xD8, 0xFF]) {
        bytes.extend_from_slice(&[0xFF, 0xD8, 0xFF]);
    }
    bytes.extend_from_slice(data);
    let mut d = Decoder::new(&Decode::default().max_pixels(1 << 22));
    let mut out = Vec::new();
    match d.decode(&bytes, &mut out) {
        Ok((h, w)) => {
            assert!(h * w <= 1 << 22);
            assert!(out.len() >= h * w * 3);
        }
        Err(f) => assert!(!f.reason.is_empty()),
    }
});
