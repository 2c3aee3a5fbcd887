//! A pipeline's ops compiled for the workers. Each op lowers itself
//! ([`crate::ops::Op::lower`]) to a kernel, an affine map, a layout change or a label
//! change; then the passes below fuse, asking the kernels' hints, never naming an op:
//!
//! * a kernel that can take the center crop after it into its own pass does (`resize`
//!   then `center_crop` → one resize computing only the crop window);
//! * a decode followed by a kernel that reads only a rectangle of the image decodes only
//!   that rectangle, where its decoder can (libjpeg-turbo);
//! * runs of affine maps and layout changes (`rescale` / `normalize` / `hwc_to_chw`) fold
//!   into one [`Affine`] and an output layout, applied while writing the sample into its
//!   batch slot ([`Tail`]) — or, when a kernel follows them, while writing a working image
//!   ([`Pointwise`]);
//! * label changes (`type_cast`) are the label type of the batch buffer.
//!
//! The final write's path is chosen here once, from what is known before any sample
//! ([`WritePath`]); a [`super::worker::Worker`] runs the program on one sample at a time.

use super::pointwise::Pointwise;
use crate::error::{Error, Result};
use crate::imgproc::Affine;
use crate::ops::kernel::{Kernel, Lowered};
use crate::ops::Op;
use crate::spec::{DType, Layout, Spec};
use std::sync::Arc;

/// The compiled pipeline.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    /// The kernels, in order.
    pub(crate) kernels: Vec<Arc<dyn Kernel>>,
    /// The final write.
    pub(crate) tail: Tail,
    /// The checked output spec.
    pub(crate) out: Spec,
    /// Human-readable list of the fusions made (for `imgfeed check`).
    pub(crate) fusions: Vec<String>,
}

/// How the sample is written into its batch slot.
#[derive(Clone, Debug)]
pub(crate) struct Tail {
    /// The pointwise ops after the last kernel, folded (`None`: a copy).
    pub(crate) affine: Option<Affine>,
    /// The layout written.
    pub(crate) layout: Layout,
    /// The path, from the facts known at compile time.
    pub(crate) path: WritePath,
}

/// The final write's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WritePath {
    /// u8 interleaved pixels (RGB, or RGBX from a region decode) into float planes
    /// (float32, or float16/bfloat16 rounded in the same pass): the ImageNet pipelines. AVX2 streaming stores where the CPU, the width and the slot's
    /// alignment allow (checked per sample), else the scalar write; deferred work
    /// (`ops::kernel::Deferred`) is done on the way, reading the rows in its order.
    U8ToFloatPlanes,
    /// Anything else: the general write, then the deferred work on the written sample.
    General,
}

/// One op lowered, with its name (for the list of fusions).
struct Item {
    name: &'static str,
    lowered: Lowered,
}

impl Program {
    /// Compile `ops` for a source producing `input`, whose decoded samples lie in memory as
    /// `stored` (see `Source::stored_layout`); `out` is the checked output spec.
    /// Without `fuse`, the kernel fusions are off (resize + center_crop, decoding only a
    /// region): to check and measure them.
    pub(crate) fn compile(
        input: &Spec,
        stored: Layout,
        ops: &[Op],
        out: &Spec,
        fuse: bool,
    ) -> Result<Program> {
        let mut fusions = Vec::new();
        let mut items = Vec::with_capacity(ops.len());
        let mut spec = input.clone();
        for (index, op) in ops.iter().enumerate() {
            let lowered = op.lower(&spec);
            spec = op.output_spec(&spec).map_err(|reason| {
                Error::Internal(format!(
                    "ops[{index}] ({}) was checked but does not compile: {reason}",
                    op.name()
                ))
            })?;
            match lowered {
                Lowered::Labels => {}
                Lowered::Nothing(note) => fusions.push(note.to_string()),
                lowered => items.push(Item {
                    name: op.name(),
                    lowered,
                }),
            }
        }
        if fuse {
            fuse_center_crops(&mut items, &mut fusions);
        }
        // Without `fuse` a decode still serves a resize for its `draft` (which changes the
        // pixels on purpose), but decodes no region.
        serve_after_decode(&mut items, &mut fusions, fuse);
        kernel_notes(&items, &mut fusions);
        let phys = if input.encoded { Layout::Hwc } else { stored };
        Ok(fold_pointwise(items, phys, input.layout, out, fusions))
    }
}

/// The kernel of `item`, if it is one.
fn kernel(item: &Item) -> Option<&Arc<dyn Kernel>> {
    match &item.lowered {
        Lowered::Kernel(k) => Some(k),
        _ => None,
    }
}

/// A kernel followed by a center crop it can compute in its own pass becomes one kernel.
fn fuse_center_crops(items: &mut Vec<Item>, fusions: &mut Vec<String>) {
    let mut i = 0;
    while i + 1 < items.len() {
        let crop = kernel(&items[i + 1]).and_then(|k| k.center_crop());
        let fused = crop.and_then(|c| kernel(&items[i])?.with_center_crop(c));
        if let Some(f) = fused {
            fusions.push(format!(
                "{} + {}: one {0} computing only the crop window",
                items[i].name,
                items[i + 1].name
            ));
            items[i].lowered = Lowered::Kernel(f);
            items.remove(i + 1);
        }
        i += 1;
    }
}

/// A decode followed by a kernel that reads a rectangle decodes only that (with `region`),
/// and before one that resizes at a DCT scale where the decode's `draft` asks for it: the
/// decode says whether it serves the kernel after it.
fn serve_after_decode(items: &mut [Item], fusions: &mut Vec<String>, region: bool) {
    for i in 0..items.len().saturating_sub(1) {
        let Some(next) = kernel(&items[i + 1]) else {
            continue;
        };
        let Some(dec) = kernel(&items[i]) else {
            continue;
        };
        if let Some(fused) = dec.with_region_of(Arc::clone(next), region) {
            if fused.decodes_regions() {
                fusions.extend(next.region_note().map(String::from));
            }
            items[i].lowered = Lowered::Kernel(fused);
        }
    }
}

/// What the kernels say of themselves (a decode's opt-in settings), for `imgfeed check`.
fn kernel_notes(items: &[Item], fusions: &mut Vec<String>) {
    for item in items {
        fusions.extend(kernel(item).map(|k| k.notes()).unwrap_or_default());
    }
}

/// Fold runs of affine maps and layout changes: into a [`Pointwise`] kernel before the
/// next kernel, and the last run into the final write.
fn fold_pointwise(
    items: Vec<Item>,
    mut phys: Layout,
    mut logical: Layout,
    out: &Spec,
    mut fusions: Vec<String>,
) -> Program {
    let mut kernels: Vec<Arc<dyn Kernel>> = Vec::new();
    let mut pending: Option<Affine> = None;
    let mut pending_names: Vec<&str> = Vec::new();
    let mut dtype = DType::U8;
    for item in items {
        match item.lowered {
            Lowered::Kernel(k) => {
                if let Some(affine) = pending.take() {
                    kernels.push(Arc::new(Pointwise {
                        affine: Some(affine),
                        layout: logical,
                    }));
                    phys = logical;
                    dtype = DType::F32;
                    pending_names.clear();
                }
                if k.needs_hwc() && phys != Layout::Hwc {
                    kernels.push(Arc::new(Pointwise {
                        affine: None,
                        layout: Layout::Hwc,
                    }));
                    phys = Layout::Hwc;
                }
                kernels.push(k);
            }
            Lowered::Affine(a) => {
                pending = Some(pending.unwrap_or_else(Affine::identity).then(a));
                pending_names.push(item.name);
            }
            Lowered::Layout(l) => {
                logical = l;
                pending_names.push(item.name);
            }
            Lowered::Labels | Lowered::Nothing(_) => {}
        }
    }
    if !pending_names.is_empty() {
        fusions.push(format!(
            "{}: one pass written into the batch buffer",
            pending_names.join(" + ")
        ));
    }
    let path = if dtype == DType::U8
        && phys == Layout::Hwc
        && logical == Layout::Chw
        && out.dtype != DType::U8
    {
        WritePath::U8ToFloatPlanes
    } else {
        WritePath::General
    };
    Program {
        kernels,
        tail: Tail {
            affine: pending,
            layout: logical,
            path,
        },
        out: out.clone(),
        fusions,
    }
}
