#![no_main]
//! Any bytes as CIFAR-10 and CIFAR-100 records (every label choice): labels in range and
//! 3072 pixel bytes, or a typed error; never a panic.
use imgfeed::source::{parse_record, CifarKind, CifarLabel, PIXELS_PER_RECORD};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for kind in [CifarKind::Cifar10, CifarKind::Cifar100] {
        for label in [CifarLabel::Fine, CifarLabel::Coarse, CifarLabel::Both] {
            // Whole records, then the leftover (a short record must be an error).
            let rs = kind.record_size();
            let mut chunks = data.chunks(rs);
            for rec in &mut chunks {
                match parse_record(kind, label, rec) {
                    Ok((labels, pixels)) => {
                        assert_eq!(rec.len(), rs);
                        assert_eq!(pixels.len(), PIXELS_PER_RECORD);
                        let max = if kind == CifarKind::Cifar10 { 10 } else { 100 };
                        assert!(labels[0] < max && labels[1] < max);
                    }
                    Err(f) => assert!(!f.reason.is_empty()),
                }
            }
        }
    }
});
