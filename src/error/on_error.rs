//! [`OnError`]: what a sample that fails does to its batch and its epoch — a setting the
//! engine runs by and the batch ops check against (mixing refuses `skip`), so it lives on the
//! ground floor, beside the errors themselves.

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
