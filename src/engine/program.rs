//! A pipeline's ops compiled for the workers, with the fusions applied:
//!
//! * `resize` directly followed by `center_crop` → one resize call that computes only the
//!   crop window;
//! * runs of `rescale` / `normalize` / `hwc_to_chw` → one [`Affine`] and an output layout,
//!   applied while writing the sample into its batch slot (or, when a geometric op follows
//!   them, while writing a float working image);
//! * `type_cast` → the label type of the batch buffer.
//!
//! A [`Worker`] runs the program on one sample at a time with buffers it keeps.

use crate::error::{Fault, SampleErrorKind};
use crate::ops::center_crop::offset;
use crate::ops::decode::Decoder;
use crate::ops::decode::{grow, Rect};
use crate::ops::geometry::{copy_window, flip_horizontal};
use crate::ops::pointwise::{
    write, write_mirrored, write_planes_streaming, write_rgbx, Affine, Dst, Pixels, View,
};
use crate::ops::resize::{pillow_arithmetic, Resizer};
use crate::ops::{Decode, Filter, Op, RandomCrop, RandomResizedCrop, Resize};
use crate::plan::SplitMix64;
use crate::source::Raw;
use crate::spec::{DType, Layout, Spec};
use std::time::Instant;

/// What a decode followed by a geometric op needs of the image.
#[derive(Clone, Debug)]
pub(crate) enum Roi {
    /// A resize and the center crop of that size after it.
    ResizeCrop(Resize, (usize, usize)),
    /// A random resized crop's box (drawn from the header's size).
    RandomBox(RandomResizedCrop),
}

/// One compiled step.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// Decode; with the resize and crop that follow, a decoder that can decodes only the
    /// rectangle they read.
    Decode(Decode, Option<Roi>),
    /// Resize, with the size of a center crop fused into it.
    Resize(Resize, Option<(usize, usize)>),
    CenterCrop(usize, usize),
    RandomCrop(RandomCrop),
    RandomResizedCrop(RandomResizedCrop),
    Flip(f64),
    /// Apply pending pointwise ops into a float (or re-laid-out u8) working image.
    Pointwise(Option<Affine>, Layout),
}

impl Step {
    pub fn name(&self) -> &'static str {
        match self {
            Step::Decode(..) => "decode",
            Step::Resize(_, Some(_)) => "resize+crop",
            Step::Resize(_, None) => "resize",
            Step::CenterCrop(..) => "center_crop",
            Step::RandomCrop(_) => "random_crop",
            Step::RandomResizedCrop(_) => "random_resized_crop",
            Step::Flip(_) => "flip",
            Step::Pointwise(..) => "pointwise",
        }
    }
}

/// The compiled pipeline.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub steps: Vec<Step>,
    pub tail_affine: Option<Affine>,
    pub tail_layout: Layout,
    pub out: Spec,
    /// Human-readable list of the fusions made (for `imgfeed check`).
    pub fusions: Vec<String>,
}

/// Name of the final stage in timings.
pub(crate) const WRITE_STAGE: &str = "write";

impl Program {
    /// Compile `ops` for a source producing `input`, whose decoded samples lie in memory as
    /// `stored` (see `Source::stored_layout`); `out` is the checked output spec.
    /// Without `fuse`, the geometric fusions are off (resize + center_crop, and decoding
    /// only a region): to check and measure them.
    pub fn compile(input: &Spec, stored: Layout, ops: &[Op], out: &Spec, fuse: bool) -> Program {
        let mut steps = Vec::new();
        let mut fusions = Vec::new();
        let mut pending: Option<Affine> = None;
        let mut pending_names: Vec<&str> = Vec::new();
        let mut logical = input.layout;
        // Record sources (CIFAR) hold planes: physically CHW while logically HWC.
        let mut phys = if input.encoded { Layout::Hwc } else { stored };
        let mut encoded = input.encoded;
        let mut i = 0;
        while i < ops.len() {
            let op = &ops[i];
            let geometric = matches!(
                op,
                Op::Resize(_)
                    | Op::CenterCrop(_)
                    | Op::RandomCrop(_)
                    | Op::RandomResizedCrop(_)
                    | Op::RandomHorizontalFlip(_)
            );
            if geometric && pending.is_some() {
                steps.push(Step::Pointwise(pending.take(), logical));
                phys = logical;
                pending_names.clear();
            }
            match op {
                Op::Decode(d) => {
                    if encoded {
                        steps.push(Step::Decode(d.clone(), None));
                        phys = Layout::Hwc;
                        encoded = false;
                    } else {
                        fusions.push(
                            "decode: the source stores decoded pixels; nothing to decode".into(),
                        );
                    }
                }
                Op::Resize(r) => {
                    if phys != Layout::Hwc {
                        steps.push(Step::Pointwise(None, Layout::Hwc));
                        phys = Layout::Hwc;
                    }
                    // The next op that touches pixels: type_cast only touches labels.
                    let next = ops[i + 1..]
                        .iter()
                        .position(|o| !matches!(o, Op::TypeCast(_)));
                    let continuous = matches!(r.filter, Filter::Bilinear | Filter::Linear);
                    match next.map(|k| (k, &ops[i + 1 + k])) {
                        Some((k, Op::CenterCrop(c))) if continuous && fuse => {
                            let crop = c.size.square();
                            if let Some(Step::Decode(d, roi)) = steps.last_mut() {
                                *roi = Some(Roi::ResizeCrop(r.clone(), crop));
                                if Decoder::new(d).decodes_regions() {
                                    fusions.push("decode: JPEGs decode only the rectangle resize + center_crop read (libjpeg-turbo region decode)".into());
                                }
                            }
                            steps.push(Step::Resize(r.clone(), Some(crop)));
                            fusions.push(
                                "resize + center_crop: one resize computing only the crop window"
                                    .into(),
                            );
                            // keep the type_casts in between (they only change labels)
                            i += 1 + k;
                        }
                        _ => steps.push(Step::Resize(r.clone(), None)),
                    }
                }
                Op::CenterCrop(c) => {
                    let (h, w) = c.size.square();
                    steps.push(Step::CenterCrop(h, w));
                }
                Op::RandomCrop(r) => steps.push(Step::RandomCrop(r.clone())),
                Op::RandomResizedCrop(r) => {
                    if phys != Layout::Hwc {
                        steps.push(Step::Pointwise(None, Layout::Hwc));
                        phys = Layout::Hwc;
                    }
                    if let (Some(Step::Decode(d, roi)), true) = (steps.last_mut(), fuse) {
                        *roi = Some(Roi::RandomBox(r.clone()));
                        if Decoder::new(d).decodes_regions() {
                            fusions.push("decode + random_resized_crop: JPEGs decode only the box (libjpeg-turbo region decode)".into());
                        }
                    }
                    steps.push(Step::RandomResizedCrop(r.clone()));
                }
                Op::RandomHorizontalFlip(f) => steps.push(Step::Flip(f.prob)),
                Op::Rescale(r) => {
                    pending = Some(pending.unwrap_or_else(Affine::identity).then(r.affine()));
                    pending_names.push("rescale");
                }
                Op::Normalize(n) => {
                    pending = Some(pending.unwrap_or_else(Affine::identity).then(n.affine()));
                    pending_names.push("normalize");
                }
                Op::HwcToChw(_) => {
                    logical = Layout::Chw;
                    pending_names.push("hwc_to_chw");
                }
                Op::TypeCast(_) => {}
            }
            i += 1;
        }
        if !pending_names.is_empty() {
            fusions.push(format!(
                "{}: one pass written into the batch buffer",
                pending_names.join(" + ")
            ));
        }
        Program {
            steps,
            tail_affine: pending,
            tail_layout: logical,
            out: out.clone(),
            fusions,
        }
    }
}

/// Pixels decoded around a box beyond what it needs: libjpeg-turbo upsamples chroma at
/// a region's edges from the edge itself, not from the neighbours outside it, so the
/// outer pixel of a region can differ from the same pixel of a whole decode (fancy 2:1
/// upsampling reaches one pixel). Measured: with a margin of 1 the training pipeline's
/// output on 4 000 4:2:0 photos and on 4:4:4, 4:2:2 and greyscale files is bit for bit
/// the margin-16 output, and with 0 it is not; 2 keeps one pixel of slack. (It was one
/// iMCU, 16 pixels: the extra rows and columns cost jpeg shards 4% of their time.)
const REGION_MARGIN: usize = 2;

/// Per-stage time and counts of one worker (or of an epoch, summed).
#[derive(Clone, Debug, Default)]
pub struct StageTimes {
    /// `(stage, nanoseconds)` in pipeline order.
    pub stages: Vec<(&'static str, u64)>,
    /// Samples processed.
    pub samples: u64,
    /// Bytes read from the source.
    pub bytes_in: u64,
}

impl StageTimes {
    pub(crate) fn add(&mut self, stage: &'static str, ns: u64) {
        match self.stages.iter_mut().find(|(s, _)| *s == stage) {
            Some((_, t)) => *t += ns,
            None => self.stages.push((stage, ns)),
        }
    }

    /// Add another worker's times.
    pub fn merge(&mut self, other: &StageTimes) {
        for &(s, ns) in &other.stages {
            self.add(s, ns);
        }
        self.samples += other.samples;
        self.bytes_in += other.bytes_in;
    }
}

/// A worker's reusable state: decoder, resizer and ping-pong buffers.
pub(crate) struct Worker {
    decoder: Option<Decoder>,
    resizer: Resizer,
    a8: Vec<u8>,
    b8: Vec<u8>,
    af: Vec<f32>,
    bf: Vec<f32>,
    h: usize,
    w: usize,
    /// Size of the whole decoded image and where the held pixels sit in it (a region
    /// decode holds only a rectangle; every other step resets these).
    full: (usize, usize),
    origin: (usize, usize),
    /// Bytes per pixel of a u8 HWC image: 4 (RGBX) only between a region decode and the
    /// fused resize that follows it.
    stride: usize,
    /// The random_resized_crop box drawn while decoding, in whole-image coordinates.
    rrc_box: Option<Rect>,
    /// A horizontal flip drawn but not applied yet: the next step applies it first, or,
    /// when nothing follows, the final write mirrors the sample's rows in the batch slot
    /// (a flip commutes with the pointwise tail; reversing float rows that were just
    /// written is cheaper than swapping 3-byte pixels before).
    mirror: bool,
    phys: Layout,
    dtype: DType,
    pub profile: bool,
    pub times: StageTimes,
}

/// A failed step: its name and why.
pub(crate) type StepError = (&'static str, Fault);

impl Worker {
    pub fn new(program: &Program, profile: bool) -> Worker {
        let decoder = program.steps.iter().find_map(|s| match s {
            Step::Decode(d, _) => Some(Decoder::new(d)),
            _ => None,
        });
        Worker {
            decoder,
            resizer: Resizer::new(),
            a8: Vec::new(),
            b8: Vec::new(),
            af: Vec::new(),
            bf: Vec::new(),
            h: 0,
            w: 0,
            full: (0, 0),
            origin: (0, 0),
            stride: 3,
            rrc_box: None,
            mirror: false,
            phys: Layout::Hwc,
            dtype: DType::U8,
            profile,
            times: StageTimes::default(),
        }
    }

    fn swap(&mut self) {
        match self.dtype {
            DType::U8 => std::mem::swap(&mut self.a8, &mut self.b8),
            DType::F32 => std::mem::swap(&mut self.af, &mut self.bf),
        }
    }

    /// Take decoded pixels from the source as the working image (borrowed, not copied).
    fn load<'r>(
        &mut self,
        data: &'r [u8],
        height: usize,
        width: usize,
        layout: Layout,
    ) -> Result<&'r [u8], StepError> {
        let n = height.checked_mul(width).and_then(|p| p.checked_mul(3));
        let pixels = n
            .and_then(|n| data.get(..n))
            .filter(|_| height > 0 && width > 0)
            .ok_or_else(|| {
                (
                    "read",
                    Fault::new(
                        SampleErrorKind::Corrupt,
                        format!(
                            "{} bytes do not hold {height}x{width} RGB pixels",
                            data.len()
                        ),
                    ),
                )
            })?;
        self.h = height;
        self.w = width;
        self.full = (height, width);
        self.origin = (0, 0);
        self.stride = 3;
        self.phys = layout;
        self.dtype = DType::U8;
        Ok(pixels)
    }

    /// Run the steps of `program` on one sample. Returns the source's own pixels when no
    /// step had to copy them (the result is then those, not the working buffers).
    fn apply<'r>(
        &mut self,
        program: &Program,
        raw: Raw<'r>,
        rng: &mut SplitMix64,
    ) -> Result<Option<&'r [u8]>, StepError> {
        let mut input: Option<&'r [u8]> = None;
        let mut encoded: Option<&[u8]> = None;
        self.mirror = false;
        match raw {
            Raw::Encoded(bytes) => encoded = Some(bytes),
            Raw::Planar {
                data,
                height,
                width,
            } => input = Some(self.load(data, height, width, Layout::Chw)?),
            Raw::Pixels {
                data,
                height,
                width,
            } => input = Some(self.load(data, height, width, Layout::Hwc)?),
        }
        for step in &program.steps {
            let t0 = self.profile.then(Instant::now);
            self.step(step, encoded, &mut input, rng)
                .map_err(|e| (step.name(), e))?;
            if let Some(t0) = t0 {
                self.times.add(step.name(), t0.elapsed().as_nanos() as u64);
            }
        }
        Ok(input)
    }

    /// Run the steps of `program` on one sample and leave the result in `out` as RGB u8
    /// HWC (what a conversion stores); returns `(height, width)`. The program must not end
    /// in float pixels.
    pub fn run_image(
        &mut self,
        program: &Program,
        raw: Raw<'_>,
        rng: &mut SplitMix64,
        out: &mut Vec<u8>,
    ) -> Result<(usize, usize), StepError> {
        let mut borrowed = self.apply(program, raw, rng)?;
        self.flip_pending(&mut borrowed);
        if self.stride == 4 {
            self.pack_rgb();
        }
        if self.dtype != DType::U8 {
            return Err((
                WRITE_STAGE,
                Fault::from("the samples are float pixels, not u8".to_string()),
            ));
        }
        let n = self.h * self.w * 3;
        let view = View {
            pixels: Pixels::U8(borrowed.unwrap_or(&self.a8)),
            height: self.h,
            width: self.w,
            layout: self.phys,
        };
        out.resize(n, 0); // fully overwritten by `write`
        write(&view, None, Layout::Hwc, Dst::U8(&mut out[..]))
            .map_err(|e| (WRITE_STAGE, Fault::from(e)))?;
        Ok((self.h, self.w))
    }

    /// Run `program` on one sample and write the result into `dst`. With `hash`, returns
    /// the fingerprint of the written bytes when the write computed it on the way (`None`:
    /// the caller hashes the written sample).
    pub fn run(
        &mut self,
        program: &Program,
        raw: Raw<'_>,
        rng: &mut SplitMix64,
        dst: Dst<'_>,
        hash: bool,
    ) -> Result<Option<u64>, StepError> {
        let borrowed = self.apply(program, raw, rng)?;
        let t0 = self.profile.then(Instant::now);
        let (eh, ew) = program.out.fixed_size().unwrap_or((0, 0));
        if (self.h, self.w) != (eh, ew) {
            return Err((
                WRITE_STAGE,
                Fault::new(
                    SampleErrorKind::Shape,
                    format!(
                        "sample is {}x{} but the batch holds {eh}x{ew} images",
                        self.h, self.w
                    ),
                ),
            ));
        }
        let mut dst = dst;
        // A flip drawn last is applied by the write itself (u8 pixels into float CHW).
        let (pixels, stride) = match borrowed {
            Some(b) => (b, 3),
            None => (&self.a8[..], self.stride),
        };
        if self.dtype == DType::U8 && self.phys == Layout::Hwc && program.tail_layout == Layout::Chw
        {
            if let Dst::F32(d) = &mut dst {
                let (h, w, affine) = (self.h, self.w, program.tail_affine.as_ref());
                if let Some(fp) =
                    write_planes_streaming(pixels, stride, h, w, affine, self.mirror, d, hash)
                {
                    self.mirror = false;
                    if let Some(t0) = t0 {
                        self.times.add(WRITE_STAGE, t0.elapsed().as_nanos() as u64);
                    }
                    return Ok(fp);
                }
            }
        }
        if self.mirror
            && self.dtype == DType::U8
            && self.phys == Layout::Hwc
            && write_mirrored(
                pixels,
                stride,
                self.h,
                self.w,
                program.tail_affine.as_ref(),
                program.tail_layout,
                &mut dst,
            )
        {
            self.mirror = false;
            if let Some(t0) = t0 {
                self.times.add(WRITE_STAGE, t0.elapsed().as_nanos() as u64);
            }
            return Ok(None);
        }
        if self.stride == 4 {
            if write_rgbx(
                &self.a8,
                self.h,
                self.w,
                program.tail_affine.as_ref(),
                program.tail_layout,
                &mut dst,
            ) {
                self.mirror_written(&mut dst, program.tail_layout);
                if let Some(t0) = t0 {
                    self.times.add(WRITE_STAGE, t0.elapsed().as_nanos() as u64);
                }
                return Ok(None);
            }
            self.pack_rgb();
        }
        let pixels = match (borrowed, self.dtype) {
            (Some(b), _) => Pixels::U8(b),
            (None, DType::U8) => Pixels::U8(&self.a8),
            (None, DType::F32) => Pixels::F32(&self.af),
        };
        let view = View {
            pixels,
            height: self.h,
            width: self.w,
            layout: self.phys,
        };
        let reborrowed = match &mut dst {
            Dst::U8(d) => Dst::U8(&mut d[..]),
            Dst::F32(d) => Dst::F32(&mut d[..]),
        };
        write(
            &view,
            program.tail_affine.as_ref(),
            program.tail_layout,
            reborrowed,
        )
        .map_err(|e| (WRITE_STAGE, Fault::from(e)))?;
        self.mirror_written(&mut dst, program.tail_layout);
        if let Some(t0) = t0 {
            self.times.add(WRITE_STAGE, t0.elapsed().as_nanos() as u64);
        }
        Ok(None)
    }

    fn step(
        &mut self,
        step: &Step,
        encoded: Option<&[u8]>,
        input: &mut Option<&[u8]>,
        rng: &mut SplitMix64,
    ) -> Result<(), Fault> {
        self.flip_pending(input);
        // RGBX passes through the steps that read 4-byte pixels (a flip mirrors whole
        // pixels); any other step gets RGB.
        if self.stride == 4
            && !matches!(
                step,
                Step::Decode(..) | Step::Resize(..) | Step::RandomResizedCrop(..) | Step::Flip(_)
            )
        {
            self.pack_rgb();
        }
        match step {
            Step::Decode(_, roi) => {
                let bytes = encoded.ok_or("decode: the sample is not encoded")?;
                let dec = self.decoder.as_mut().ok_or("decode: no decoder")?;
                let rng_cell = std::cell::RefCell::new(rng);
                let drawn = std::cell::Cell::new(None);
                let want = |h: usize, w: usize| match roi {
                    Some(Roi::ResizeCrop(r, crop)) => r.source_rect(h, w, *crop),
                    Some(Roi::RandomBox(rrc)) => {
                        let b = rrc.sample_box(h, w, &mut rng_cell.borrow_mut());
                        drawn.set(Some(b));
                        Some(grow(b, REGION_MARGIN, h, w))
                    }
                    None => None,
                };
                // RGBX only when a fused resize comes next (it reads 4-byte pixels).
                let d = dec.decode_region(bytes, want, roi.is_some(), &mut self.a8)?;
                self.rrc_box = drawn.get();
                self.stride = d.channels;
                (self.h, self.w) = d.size;
                self.full = d.full;
                self.origin = d.origin;
                self.phys = Layout::Hwc;
                self.dtype = DType::U8;
                return Ok(());
            }
            Step::Resize(r, crop) => {
                let (nh, nw) = r.target(self.full.0, self.full.1);
                let window = crop.and_then(|c| r.crop_window(self.full.0, self.full.1, c));
                // RGBX stays RGBX: the final write reads it (`write_rgbx`), and any other
                // step packs it to RGB first (`pack_rgb`).
                let (oh, ow) = self.resize_held(
                    input.take(),
                    (self.full, self.origin, (self.h, self.w)),
                    (r.filter, pillow_arithmetic(r.filter, r.exact)),
                    (nh, nw),
                    window,
                )?;
                if let (Some((ch, cw)), None) = (crop, window) {
                    // The crop is larger than the resized image: crop (pad) separately.
                    self.crop(offset(oh, *ch), offset(ow, *cw), *ch, *cw, 0);
                }
            }
            Step::RandomResizedCrop(rrc) => {
                // The box: drawn while decoding (from the header) or now, from the same
                // stream either way.
                let (top, left, bh, bw) = match self.rrc_box.take() {
                    Some(b) => b,
                    None => rrc.sample_box(self.full.0, self.full.1, rng),
                };
                let (top, left) = (
                    top as isize - self.origin.0 as isize,
                    left as isize - self.origin.1 as isize,
                );
                if top < 0 || left < 0 || top as usize + bh > self.h || left as usize + bw > self.w
                {
                    return Err(Fault::from(format!(
                        "random_resized_crop: box {bh}x{bw} at ({top}, {left}) is outside the \
                         decoded {}x{} pixels",
                        self.h, self.w
                    )));
                }
                let exact = pillow_arithmetic(rrc.filter, rrc.exact);
                if exact && self.dtype == DType::U8 && self.phys == Layout::Hwc {
                    // Pillow's arithmetic reads the box where it lies: in the decoded
                    // rectangle, or in the source's own pixels (raw shards).
                    let (src, stride) = match input.take() {
                        Some(b) => (b, 3),
                        None => (&self.a8[..], self.stride),
                    };
                    let bx = (top as usize, left as usize, bh, bw);
                    let size = (self.h, self.w);
                    let out = rrc.size.square();
                    self.resizer
                        .pillow_box(src, stride, size, bx, out, &mut self.b8)
                        .map_err(Fault::from)?;
                    self.swap();
                    (self.h, self.w) = out;
                } else {
                    // From the source's own pixels (raw shards) when no step copied them.
                    self.crop_from(input, top, left, bh, bw, 0);
                    let whole = (bh, bw);
                    self.resize_held(
                        input.take(),
                        (whole, (0, 0), whole),
                        (rrc.filter, exact),
                        rrc.size.square(),
                        None,
                    )?;
                }
            }
            Step::CenterCrop(ch, cw) => {
                let (top, left) = (offset(self.h, *ch), offset(self.w, *cw));
                self.crop_from(input, top, left, *ch, *cw, 0);
            }
            Step::RandomCrop(rc) => {
                let (top, left) = rc.place(self.h, self.w, |b| rng.below(b))?;
                let (ch, cw) = rc.size.square();
                self.crop_from(input, top, left, ch, cw, rc.fill);
            }
            Step::Flip(p) => {
                if rng.unit() < *p {
                    self.mirror = !self.mirror;
                }
            }
            Step::Pointwise(affine, layout) => {
                let n = self.h * self.w * 3;
                let to_f32 = affine.is_some() || self.dtype == DType::F32;
                let view_pixels = match (self.dtype, input.take()) {
                    (DType::U8, Some(data)) => Pixels::U8(data),
                    (DType::U8, None) => Pixels::U8(&self.a8),
                    (DType::F32, _) => Pixels::F32(&self.af),
                };
                let view = View {
                    pixels: view_pixels,
                    height: self.h,
                    width: self.w,
                    layout: self.phys,
                };
                if to_f32 {
                    self.bf.resize(n, 0.0); // fully overwritten by `write`
                    write(&view, affine.as_ref(), *layout, Dst::F32(&mut self.bf))?;
                    std::mem::swap(&mut self.af, &mut self.bf);
                    self.dtype = DType::F32;
                } else {
                    self.b8.resize(n, 0); // fully overwritten by `write`
                    write(&view, None, *layout, Dst::U8(&mut self.b8))?;
                    std::mem::swap(&mut self.a8, &mut self.b8);
                }
                self.phys = *layout;
            }
        }
        self.full = (self.h, self.w);
        self.origin = (0, 0);
        Ok(())
    }

    /// Apply a flip drawn earlier (`mirror`) to the working image.
    fn flip_pending(&mut self, input: &mut Option<&[u8]>) {
        if !std::mem::take(&mut self.mirror) {
            return;
        }
        if let Some(data) = input.take() {
            // Flipping is in place: the source's pixels are copied first.
            self.a8.clear();
            self.a8.extend_from_slice(data);
        }
        match self.dtype {
            // constant channel counts: each call is compiled for its own (a run-time count
            // made the RGB flip 3x slower)
            DType::U8 if self.stride == 4 => {
                flip_horizontal(&mut self.a8, self.h, self.w, 4, self.phys)
            }
            DType::U8 => flip_horizontal(&mut self.a8, self.h, self.w, 3, self.phys),
            DType::F32 => flip_horizontal(&mut self.af, self.h, self.w, 3, self.phys),
        }
    }

    /// Mirror the sample just written into `dst` when a flip is pending.
    fn mirror_written(&mut self, dst: &mut Dst<'_>, layout: Layout) {
        if !std::mem::take(&mut self.mirror) {
            return;
        }
        let n = self.h * self.w * 3;
        match dst {
            Dst::U8(d) => flip_horizontal(&mut d[..n], self.h, self.w, 3, layout),
            Dst::F32(d) => flip_horizontal(&mut d[..n], self.h, self.w, 3, layout),
        }
    }

    /// RGBX → RGB (u8 HWC), through the spare buffer.
    fn pack_rgb(&mut self) {
        let n = self.h * self.w;
        self.b8.resize(n * 3, 0);
        for (s, d) in self.a8[..n * 4]
            .chunks_exact(4)
            .zip(self.b8[..n * 3].chunks_exact_mut(3))
        {
            d.copy_from_slice(&s[..3]);
        }
        std::mem::swap(&mut self.a8, &mut self.b8);
        self.stride = 3;
    }

    fn crop(&mut self, top: isize, left: isize, ch: usize, cw: usize, fill: u8) {
        self.crop_from(&mut None, top, left, ch, cw, fill);
    }

    /// Resize the working image, or `input` (the source's pixels) when it is set, and make
    /// the result the working image; `geometry` is `(full, origin, size)` as
    /// [`Resizer::resize`] takes them. Returns the new size.
    fn resize_held(
        &mut self,
        input: Option<&[u8]>,
        geometry: ((usize, usize), (usize, usize), (usize, usize)),
        (filter, exact): (Filter, bool),
        out: (usize, usize),
        window: Option<crate::ops::resize::Window>,
    ) -> Result<(usize, usize), Fault> {
        let (full, origin, size) = geometry;
        self.resizer.rgbx = self.stride == 4 && self.dtype == DType::U8;
        self.resizer.exact = exact;
        let (oh, ow) = match self.dtype {
            DType::U8 => self.resizer.resize(
                input.unwrap_or(&self.a8),
                full,
                origin,
                size,
                DType::U8,
                filter,
                out,
                window,
                &mut self.b8,
            )?,
            DType::F32 => self.resizer.resize(
                &self.af,
                full,
                origin,
                size,
                DType::F32,
                filter,
                out,
                window,
                &mut self.bf,
            )?,
        };
        self.swap();
        self.h = oh;
        self.w = ow;
        Ok((oh, ow))
    }

    /// Crop the working image, or `input` (the source's pixels) when it is set.
    fn crop_from(
        &mut self,
        input: &mut Option<&[u8]>,
        top: isize,
        left: isize,
        ch: usize,
        cw: usize,
        fill: u8,
    ) {
        if top == 0 && left == 0 && (ch, cw) == (self.h, self.w) {
            return;
        }
        match self.dtype {
            DType::U8 => copy_window(
                input.take().unwrap_or(&self.a8),
                self.h,
                self.w,
                self.stride,
                self.phys,
                top,
                left,
                ch,
                cw,
                fill,
                &mut self.b8,
            ),
            DType::F32 => copy_window(
                &self.af,
                self.h,
                self.w,
                3,
                self.phys,
                top,
                left,
                ch,
                cw,
                fill as f32,
                &mut self.bf,
            ),
        }
        self.swap();
        self.h = ch;
        self.w = cw;
    }
}
