#![no_main]
//! Bytes after a PNG signature through the PNG decoder: Ok within the pixel limit, or a
//! typed error; never a panic, a hang or a huge buffer.
use imgfeed::codec::Decoder;
use imgfeed::ops::Decode;
use libfuzzer_sys::fuzz_target;

const SIG: &[u8] = b"\x89PNG\r\n\x1a\n";

fuzz_target!(|data: &[u8]| {
    let mut bytes = Vec::with_capacity(data.len() + SIG.len());
    if !data.starts_with(SIG) {
        bytes.extend_from_slice(SIG);
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
    // The header inspector (imgfeed validate) must not panic either.
    let _ = imgfeed::codec::inspect::inspect(&bytes);
});
