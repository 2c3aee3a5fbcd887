//! The engine's side of the policy for a failed sample ([`crate::error::OnError`]: how
//! often a replacement is tried) and where a run stands ([`State`]), which is also where a
//! resumed run starts.

use serde::{Deserialize, Serialize};

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
