//! A training loop fed by imgfeed: build the canonical pipeline in code (the same as
//! `pipelines/resnet50_eval.toml`), consume batches, and stop early — dropping the epoch
//! stops every worker thread at once — then resume the interrupted epoch from the state it
//! reported, as a trainer restarting from a checkpoint would.
//!
//!   cargo run --release --example train_loop [DATA_ROOT] [STEPS]

use imgfeed::ops::{CenterCrop, Decode, HwcToChw, Normalize, Op, Resize, TypeCast};
use imgfeed::{LabelType, Pipeline, SourceConfig, SourceKind};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let root = args
        .next()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/imagefolder").into());
    let steps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(2);

    let source = SourceConfig::new(SourceKind::ImageFolder, root)
        .shuffle(true)
        .seed(7);
    let pipeline = Pipeline::builder(source)
        .op(Op::Decode(Decode::default()))
        .op(Op::Resize(Resize::new(256)))
        .op(Op::CenterCrop(CenterCrop::new(224)))
        .op(Op::Normalize(Normalize::new(
            [123.675, 116.28, 103.53],
            [58.395, 57.12, 57.375],
        )))
        .op(Op::HwcToChw(HwcToChw::new()))
        .op(Op::TypeCast(TypeCast::new(LabelType::I32)))
        .batch(4, true)
        .workers(2)
        .build()?;
    println!("{}", pipeline.source().describe());

    let mut checkpoint = None;
    for epoch in 0..2 {
        let t0 = Instant::now();
        let mut batches = pipeline.epoch(epoch);
        // Stopping early: the rest of the epoch is never decoded.
        for _ in 0..steps {
            let Some(batch) = batches.next() else { break };
            let batch = batch?;
            let images = batch.images_f32()?; // [n, 3, 224, 224]
            let labels = batch.labels_i32()?; // [n]
                                              // "Train": a stand-in for a forward pass.
            let mean = images.iter().map(|&v| v as f64).sum::<f64>() / images.len().max(1) as f64;
            println!(
                "epoch {epoch} step {}: shape {:?}, labels {labels:?}, mean activation {mean:+.4}",
                batch.number(),
                batch.shape()
            );
        }
        // What a checkpoint would save next to the weights.
        checkpoint = Some(batches.state());
        drop(batches);
        println!(
            "epoch {epoch}: stopped after {steps} steps in {:.3} s",
            t0.elapsed().as_secs_f64()
        );
    }
    // Restart: the same batches the interrupted epoch would have yielded next.
    if let Some(state) = checkpoint {
        println!("resuming at epoch {} batch {}", state.epoch, state.batch);
        for batch in pipeline.resume(state)? {
            let batch = batch?;
            println!(
                "epoch {} step {}: {:?}",
                state.epoch,
                batch.number(),
                batch.indices()
            );
        }
    }
    Ok(())
}
