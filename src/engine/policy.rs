//! The engine's policy for a failed sample ([`OnError`]) and where a run stands
//! ([`State`]), which is also where a resumed run starts.

use serde::{Deserialize, Serialize};

/// What to do with a sample that fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum OnError {
    /// The batch holding it is delivered as `Err` (naming the file, stage and reason),
    /// and the epoch ends. `fail` is accepted as another name.
    #[default]
    #[serde(alias = "fail")]
    #[value(alias = "fail")]
    Error,
    /// Leave it out and report it in [`crate::Batch::skipped`]; the following samples fill the
    /// batch, so batches stay full, but the epoch may come out shorter than announced
    /// (with `drop_remainder`, a short last batch is dropped as usual).
    #[value(
        help = "leave it out and list it; the following samples fill the batch, so \
                    the epoch may come out shorter"
    )]
    Skip,
    /// Fill its slot with another sample of the same shard, chosen from the seed, the
    /// epoch and the failed sample's index (so every worker count picks the same one), and
    /// report it in [`crate::Batch::skipped`]. Every shard yields exactly the batches announced
    /// before the epoch: the distributed-safe mode.
    #[value(
        help = "fill its slot with another sample of the same shard (the same one \
                    whatever the worker count) and list it; every shard yields the batches \
                    announced: the distributed-safe mode"
    )]
    Replace,
}

/// Attempts at finding a good replacement for a bad sample before the batch fails.
pub const REPLACE_ATTEMPTS: u64 = 16;

/// Where a run stands: the epoch and the next batch it will yield.
///
/// [`crate::Epoch::state`] reads it; [`crate::Pipeline::resume`] starts there and yields exactly
/// the batches the first run would have yielded next, with any worker count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The epoch.
    pub epoch: u64,
    /// The next batch's number in the epoch.
    pub batch: usize,
    /// Position in this shard's order of the next batch's first sample. It is
    /// `batch × batch_size` unless `on_error = "skip"` left samples out earlier in the
    /// epoch; `None` (a state typed in by hand) means `batch × batch_size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<usize>,
}

impl State {
    /// The start of `epoch`.
    pub fn epoch_start(epoch: u64) -> State {
        State {
            epoch,
            batch: 0,
            sample: Some(0),
        }
    }
}
