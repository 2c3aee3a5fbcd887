#![no_main]
//! Any bytes as a torchvision CIFAR-10 / CIFAR-100 pickle file: a parsed batch whose every
//! record is 3072 bytes of the input (or of the decoded text) with one label row per
//! record, or a typed error; never a panic, a hang or an allocation past the input's size.
use imgfeed::source::{parse_cifar_pickle, CifarKind, Pixels, PIXELS_PER_RECORD};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for kind in [CifarKind::Cifar10, CifarKind::Cifar100] {
        match parse_cifar_pickle(data, kind) {
            Ok(p) => {
                assert!(!p.is_empty());
                match &p.pixels {
                    Pixels::InFile(r) => {
                        assert!(r.end <= data.len());
                        assert_eq!(r.len(), p.len() * PIXELS_PER_RECORD);
                    }
                    Pixels::Decoded(v) => {
                        assert!(v.len() <= data.len());
                        assert_eq!(v.len(), p.len() * PIXELS_PER_RECORD);
                    }
                }
                for r in 0..p.len() {
                    assert_eq!(p.record(data, r).map(<[u8]>::len), Some(PIXELS_PER_RECORD));
                }
                assert!(p.record(data, p.len()).is_none());
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
});
