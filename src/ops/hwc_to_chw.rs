//! `hwc_to_chw`: interleaved pixels to channel planes. Never a pass of its own: the engine
//! writes the planes while normalizing into the batch buffer (see `pointwise`).

use super::kernel::{Lowered, OpDef};
use crate::spec::{Layout, Spec};
use serde::{Deserialize, Serialize};

/// The `hwc_to_chw` op (no parameters).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HwcToChw {}

impl OpDef for HwcToChw {
    /// HWC in, CHW out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, String> {
        if input.layout != Layout::Hwc {
            return Err("hwc_to_chw: the image is already CHW".into());
        }
        Ok(Spec {
            layout: Layout::Chw,
            ..input.clone()
        })
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Layout(Layout::Chw)
    }
}
