//! A worker's per-sample loop: the program's kernels in order on the working image, then
//! the final write into the sample's batch slot, with the buffers, decoder and resizer
//! reused from sample to sample.

use super::program::{Program, WritePath};
use crate::error::{Fault, SampleErrorKind};
use crate::ops::geometry::flip_horizontal;
use crate::ops::image::{bug, Held, Sample, Tools};
use crate::ops::pointwise::{
    write, write_mirrored, write_planes_streaming, write_rgbx, Interleaved,
};
use crate::ops::pointwise::{Dst, Pixels, View};
use crate::rng::SplitMix64;
use crate::source::Raw;
use crate::spec::{DType, Layout};
use std::time::Instant;

/// Name of the final stage in timings.
pub(crate) const WRITE_STAGE: &str = "write";

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

/// A worker's reusable state: the working image and the kernels' tools.
pub(crate) struct Worker {
    img: Held,
    tools: Tools,
    pub(crate) profile: bool,
    pub(crate) times: StageTimes,
}

/// A failed stage: its name and why.
pub(crate) type StepError = (&'static str, Fault);

impl Worker {
    pub(crate) fn new(profile: bool) -> Worker {
        Worker {
            img: Held::default(),
            tools: Tools::default(),
            profile,
            times: StageTimes::default(),
        }
    }

    /// Run the kernels of `program` on one sample. Returns the source's own pixels when no
    /// kernel had to copy them (the result is then those, not the working buffers).
    fn apply<'r>(
        &mut self,
        program: &Program,
        raw: Raw<'r>,
        rng: &mut SplitMix64,
    ) -> Result<Option<&'r [u8]>, StepError> {
        let (input, encoded) = match raw {
            Raw::Encoded(bytes) => {
                self.img.begin(0, 0, Layout::Hwc);
                (None, Some(bytes))
            }
            Raw::Planar {
                data,
                height,
                width,
            } => (Some(self.load(data, height, width, Layout::Chw)?), None),
            Raw::Pixels {
                data,
                height,
                width,
            } => (Some(self.load(data, height, width, Layout::Hwc)?), None),
        };
        let mut s = Sample {
            img: &mut self.img,
            input,
            encoded,
            rng,
            tools: &mut self.tools,
        };
        for k in &program.kernels {
            let t0 = self.profile.then(Instant::now);
            s.img.flip_pending(&mut s.input);
            if s.img.stride == 4 && !k.reads_rgbx() {
                s.img.pack_rgb();
            }
            k.run(&mut s).map_err(|e| (k.name(), e))?;
            if !k.holds_region() {
                s.img.settle();
            }
            if let Some(t0) = t0 {
                self.times.add(k.name(), t0.elapsed().as_nanos() as u64);
            }
        }
        Ok(s.input)
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
                let reason = format!(
                    "{} bytes do not hold {height}x{width} RGB pixels",
                    data.len()
                );
                ("read", Fault::new(SampleErrorKind::Corrupt, reason))
            })?;
        self.img.begin(height, width, layout);
        Ok(pixels)
    }

    /// Run `program` on one sample and leave the result in `out` as RGB u8 HWC (what a
    /// conversion stores); returns `(height, width)`. The program must not end in float
    /// pixels.
    pub(crate) fn run_image(
        &mut self,
        program: &Program,
        raw: Raw<'_>,
        rng: &mut SplitMix64,
        out: &mut Vec<u8>,
    ) -> Result<(usize, usize), StepError> {
        let mut borrowed = self.apply(program, raw, rng)?;
        let img = &mut self.img;
        img.flip_pending(&mut borrowed);
        if img.stride == 4 {
            img.pack_rgb();
        }
        if img.dtype != DType::U8 {
            return Err((WRITE_STAGE, bug("the samples are float pixels, not u8")));
        }
        let view = View {
            pixels: Pixels::U8(borrowed.unwrap_or(&img.a8)),
            height: img.h,
            width: img.w,
            layout: img.layout,
        };
        out.resize(img.h * img.w * 3, 0); // fully overwritten by `write`
        write(&view, None, Layout::Hwc, Dst::U8(&mut out[..])).map_err(|e| (WRITE_STAGE, e))?;
        Ok((img.h, img.w))
    }

    /// Run `program` on one sample and write the result into `dst`. With `hash`, returns
    /// the fingerprint of the written bytes when the write computed it on the way (`None`:
    /// the caller hashes the written sample).
    pub(crate) fn run(
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
        let img = &mut self.img;
        if (img.h, img.w) != (eh, ew) {
            let reason = format!(
                "sample is {}x{} but the batch holds {eh}x{ew} images",
                img.h, img.w
            );
            return Err((WRITE_STAGE, Fault::new(SampleErrorKind::Shape, reason)));
        }
        let fp = write_tail(img, program, borrowed, dst, hash).map_err(|e| (WRITE_STAGE, e))?;
        if let Some(t0) = t0 {
            self.times.add(WRITE_STAGE, t0.elapsed().as_nanos() as u64);
        }
        Ok(fp)
    }
}

/// The final write of the held image (or of `borrowed`, the source's own pixels) into
/// `dst`, along the program's [`WritePath`], with the pending flip applied.
fn write_tail(
    img: &mut Held,
    program: &Program,
    borrowed: Option<&[u8]>,
    mut dst: Dst<'_>,
    hash: bool,
) -> Result<Option<u64>, Fault> {
    let tail = &program.tail;
    let (h, w) = (img.h, img.w);
    let (pixels, stride) = match borrowed {
        Some(b) => (b, 3),
        None => (&img.a8[..], img.stride),
    };
    if tail.path == WritePath::U8ToFloatPlanes {
        if img.dtype != DType::U8 || img.layout != Layout::Hwc {
            return Err(bug("the final write expected u8 HWC pixels"));
        }
        let Dst::F32(d) = &mut dst else {
            return Err(bug("the final write expected a float batch"));
        };
        let affine = tail.affine.as_ref();
        let src = Interleaved {
            data: pixels,
            stride,
            height: h,
            width: w,
        };
        if let Some(fp) = write_planes_streaming(src, affine, img.mirror, d, hash) {
            img.mirror = false;
            return Ok(fp);
        }
        if img.mirror && write_mirrored(src, affine, tail.layout, &mut dst) {
            img.mirror = false;
            return Ok(None);
        }
    }
    if img.stride == 4 {
        if write_rgbx(&img.a8, h, w, tail.affine.as_ref(), tail.layout, &mut dst) {
            mirror_written(img, &mut dst, tail.layout);
            return Ok(None);
        }
        img.pack_rgb();
    }
    let pixels = match (borrowed, img.dtype) {
        (Some(b), _) => Pixels::U8(b),
        (None, DType::U8) => Pixels::U8(&img.a8),
        (None, DType::F32) => Pixels::F32(&img.af),
    };
    let view = View {
        pixels,
        height: h,
        width: w,
        layout: img.layout,
    };
    let reborrowed = match &mut dst {
        Dst::U8(d) => Dst::U8(&mut d[..]),
        Dst::F32(d) => Dst::F32(&mut d[..]),
    };
    write(&view, tail.affine.as_ref(), tail.layout, reborrowed)?;
    mirror_written(img, &mut dst, tail.layout);
    Ok(None)
}

/// Mirror the sample just written into `dst` when a flip is pending.
fn mirror_written(img: &mut Held, dst: &mut Dst<'_>, layout: Layout) {
    if !std::mem::take(&mut img.mirror) {
        return;
    }
    let (h, w) = (img.h, img.w);
    let n = h * w * 3;
    match dst {
        Dst::U8(d) => flip_horizontal(&mut d[..n], h, w, 3, layout),
        Dst::F32(d) => flip_horizontal(&mut d[..n], h, w, 3, layout),
    }
}
