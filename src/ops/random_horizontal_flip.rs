//! `random_horizontal_flip`: mirror the image left-right with probability `prob`, drawn
//! from the sample's own random stream.

use crate::spec::Spec;
use serde::{Deserialize, Serialize};

fn half() -> f64 {
    0.5
}

/// The `random_horizontal_flip` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomHorizontalFlip {
    /// Probability of a flip (default 0.5).
    #[serde(default = "half")]
    pub prob: f64,
}

impl RandomHorizontalFlip {
    /// Same spec out.
    pub fn output_spec(&self, input: &Spec) -> Result<Spec, String> {
        if !(0.0..=1.0).contains(&self.prob) {
            return Err(format!(
                "random_horizontal_flip: prob {} is not in [0, 1]",
                self.prob
            ));
        }
        Ok(input.clone())
    }
}
