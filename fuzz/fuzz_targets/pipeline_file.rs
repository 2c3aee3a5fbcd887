#![no_main]
//! Any text as a pipeline file: parsed or a config error, never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = imgfeed::PipelineConfig::parse(&text, std::path::Path::new("fuzz.toml")) {
        assert!(e.is_usage());
    }
});
