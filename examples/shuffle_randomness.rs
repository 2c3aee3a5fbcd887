//! How random the shard-aware shuffle (`shuffle_window`) is next to the global shuffle, on
//! the worst case: a labelled dataset converted to shards in label order (an ImageFolder
//! converted as it lists: class after class). Prints one row per order — no shuffle, the
//! shard-aware shuffle with windows of 1, 2, 4, 8, 32 and 128 files, the global shuffle —
//! averaged over a few epochs:
//!
//! * the mean length of a run of equal labels in the epoch's order;
//! * the share of neighbouring samples from the same file, and with the same label;
//! * the distinct labels in a batch (mean over the epoch's batches).
//!
//! Only the order is computed (`Sampling::permutation`, what every epoch reads); no data.
//!
//!   cargo run --release --example shuffle_randomness [CLASSES] [PER_CLASS] [PER_FILE] [BATCH]
//!
//! The defaults are ImageNet's training set: 1000 classes of 1281 images, 1024 a shard file
//! (about 110 MB of JPEGs), batches of 256.

use imgfeed::Sampling;

/// One order's measures.
struct Row {
    mean_run: f64,
    same_file: f64,
    same_label: f64,
    labels_per_batch: f64,
}

fn measure(order: &[usize], label: impl Fn(usize) -> usize, file: &[u32], batch: usize) -> Row {
    let n = order.len();
    let (mut runs, mut same_file, mut same_label) = (1usize, 0usize, 0usize);
    for w in order.windows(2) {
        if label(w[0]) == label(w[1]) {
            same_label += 1;
        } else {
            runs += 1;
        }
        if file[w[0]] == file[w[1]] {
            same_file += 1;
        }
    }
    let mut distinct = 0usize;
    let mut batches = 0usize;
    let mut seen: Vec<usize> = Vec::with_capacity(batch);
    for b in order.chunks(batch) {
        seen.clear();
        seen.extend(b.iter().map(|&i| label(i)));
        seen.sort_unstable();
        seen.dedup();
        distinct += seen.len();
        batches += 1;
    }
    let pairs = n.saturating_sub(1).max(1) as f64;
    Row {
        mean_run: n as f64 / runs as f64,
        same_file: same_file as f64 / pairs,
        same_label: same_label as f64 / pairs,
        labels_per_batch: distinct as f64 / batches.max(1) as f64,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut arg = |default: usize| {
        args.next()
            .and_then(|a| a.parse::<usize>().ok())
            .unwrap_or(default)
    };
    let (classes, per_class, per_file, batch) = (arg(1000), arg(1281), arg(1024), arg(256));
    let n = classes * per_class;
    // Written in label order: sample i has label i / per_class and sits in file i / per_file.
    let label = |i: usize| i / per_class;
    let file: Vec<u32> = (0..n).map(|i| (i / per_file) as u32).collect();
    let epochs = 3u64;
    println!(
        "{n} samples, {classes} labels written in label order, {} files of {per_file}, \
         batches of {batch} ({epochs} epochs averaged)",
        n.div_ceil(per_file)
    );
    println!(
        "| order | mean label run | neighbours from the same file | neighbours with the same \
         label | labels per batch |"
    );
    println!("|---|---|---|---|---|");
    let mut orders: Vec<(String, Sampling)> = vec![("no shuffle".into(), Sampling::default())];
    for w in [1, 2, 4, 8, 32, 128] {
        let mut s = Sampling::default();
        s.shuffle = true;
        s.shuffle_window = Some(w);
        orders.push((format!("shuffle_window = {w}"), s));
    }
    let mut global = Sampling::default();
    global.shuffle = true;
    orders.push(("global shuffle".into(), global));
    for (name, mut s) in orders {
        let mut sum = [0.0f64; 4];
        for epoch in 0..epochs {
            s.seed = 1;
            let order = s.permutation(n, epoch, Some(&file));
            let r = measure(&order, label, &file, batch);
            for (acc, v) in
                sum.iter_mut()
                    .zip([r.mean_run, r.same_file, r.same_label, r.labels_per_batch])
            {
                *acc += v / epochs as f64;
            }
        }
        println!(
            "| {name} | {:.2} | {:.4} | {:.4} | {:.1} |",
            sum[0], sum[1], sum[2], sum[3]
        );
    }
}
