//! `imgfeed check`: the spec after every stage, without reading a pixel.

use super::Common;
use anyhow::Result;

/// `imgfeed check`: with `print_config`, the tables the flags make, as JSON, and nothing else.
pub fn check(c: &Common, print_config: bool) -> Result<i32> {
    if print_config {
        println!("{}", serde_json::to_string(&c.config()?)?);
        return Ok(0);
    }
    let p = c.pipeline()?;
    super::warn(&p, true);
    println!("{}", p.source().describe());
    for (name, spec) in p.stages() {
        println!("  {name:<24} -> {spec}");
    }
    let spec = p.output_spec();
    let cfg = p.config();
    let dims = spec.dims();
    println!(
        "  {:<24} -> {} [{}, {}, {}, {}], labels {} [{}{}]",
        format!(
            "batch({}, drop_remainder={})",
            cfg.batch.size, cfg.batch.drop_remainder
        ),
        spec.dtype.name(),
        cfg.batch.size,
        dims[0].unwrap_or(0),
        dims[1].unwrap_or(0),
        dims[2].unwrap_or(0),
        spec.label.name(),
        cfg.batch.size,
        if spec.label_columns > 1 {
            format!(", {}", spec.label_columns)
        } else {
            String::new()
        }
    );
    for f in p.fusions() {
        println!("fused: {f}");
    }
    if let Some(note) = super::dropped_note(&p) {
        println!("{note}");
    }
    let src = &cfg.source;
    println!(
        "epoch: {} samples in {} batches, {} workers; shard {} of {} (uneven {}); shuffle {}{}, seed {}; {} epoch(s); on_error {}",
        p.samples_per_epoch(),
        p.batches_per_epoch(),
        cfg.engine.workers,
        src.sampling.shard_id,
        src.sampling.num_shards,
        src.sampling.uneven,
        src.sampling.shuffle,
        src.sampling
            .shuffle_window
            .map(|w| format!(" (windows of {w} files)"))
            .unwrap_or_default(),
        src.sampling.seed,
        src.sampling.num_epochs,
        cfg.engine.on_error,
    );
    Ok(0)
}
