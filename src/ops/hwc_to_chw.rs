//! `hwc_to_chw`: interleaved pixels to channel planes. Never a pass of its own: the engine
//! writes the planes while normalizing into the batch buffer (see `pointwise`).

use super::kernel::{Lowered, OpDef, Undo};
use crate::spec::{Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};

/// The `hwc_to_chw` op (no parameters).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct HwcToChw {}

impl OpDef for HwcToChw {
    /// HWC in, CHW out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        if input.layout != Layout::Hwc {
            return Err(SpecError::input("the image is already CHW"));
        }
        Ok(Spec {
            layout: Layout::Chw,
            ..input.clone()
        })
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Layout(Layout::Chw)
    }

    /// Back to interleaved pixels.
    fn undo(&self, input: &Spec) -> Undo {
        Undo::Layout(input.layout)
    }
}

impl HwcToChw {
    /// HWC to CHW.
    pub fn new() -> HwcToChw {
        HwcToChw {}
    }
}
