//! Why a saved job state cannot be resumed, and the version of its format.

/// The format's version, written in every state.
pub const STATE_VERSION: u32 = 1;

/// Why a job state (`pipeline::JobState`) cannot be resumed here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    /// Taken from another dataset, pipeline or seed (the differences, in words).
    #[error("the state was taken from another run: its {0} differ")]
    Foreign(String),
    /// A sampling rule of the epoch that cannot change mid-epoch.
    #[error("the state's epoch was split with {setting} = {state}, this pipeline has {here}: set it back to {state} to resume that epoch")]
    Sampling {
        /// `uneven` or `num_samples`.
        setting: &'static str,
        /// The state's value.
        state: String,
        /// This pipeline's.
        here: String,
    },
    /// Written by a later version of the format.
    #[error("state version {0} is not known (this imgfeed reads version {STATE_VERSION})")]
    Version(u32),
    /// Not a state: bad JSON, a missing field.
    #[error("not an imgfeed state: {0}")]
    NotState(#[source] serde_json::Error),
    /// Fields that contradict each other.
    #[error("not an imgfeed state: {0}")]
    Inconsistent(&'static str),
}
