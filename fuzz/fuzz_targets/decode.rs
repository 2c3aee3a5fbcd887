#![no_main]
//! Any bytes through the image decoders (format sniffed from the magic bytes) and the
//! header inspector: Ok or an error, never a panic or a huge buffer.
use imgfeed::codec::Decoder;
use imgfeed::ops::Decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut d = Decoder::new(&Decode::default().max_pixels(1 << 22));
    let mut out = Vec::new();
    if let Ok((h, w)) = d.decode(data, &mut out) {
        assert!(h * w <= 1 << 22);
        assert!(out.len() >= h * w * 3);
    }
    let _ = imgfeed::codec::inspect::inspect(data);
});
