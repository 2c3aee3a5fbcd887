//! A worker's per-sample loop: the program's kernels in order on the working image, then
//! the final write into the sample's batch slot, with the buffers, decoder and resizer
//! reused from sample to sample.

use super::program::{Program, WritePath};
use crate::error::{Fault, SampleErrorKind};
use crate::imgproc::half_float::narrow;
use crate::imgproc::write::{write, write_rgbx};
use crate::imgproc::write_mirrored::write_mirrored;
use crate::imgproc::write_planes::{write_planes_narrow, write_planes_streaming};
use crate::imgproc::{ColumnOrder, Dst, Interleaved, Pixels, View};
use crate::ops::image::{bug, Elem, Held, Sample, Tools};
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
    /// The float32 sample a 16-bit output is rounded from (reused).
    wide: Vec<f32>,
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
            wide: Vec::new(),
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
            s.img.apply_deferred(&mut s.input);
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
        img.apply_deferred(&mut borrowed);
        if img.stride == 4 {
            img.pack_rgb();
        }
        if img.elem != Elem::U8 {
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
        dst: Out<'_>,
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
        let fp = match dst {
            Out::Plain(d) => write_tail(img, program, borrowed, d, hash, true),
            Out::Narrow(d, dtype) => {
                write_narrow(img, program, borrowed, (d, dtype), &mut self.wide)
            }
        };
        let fp = fp.map_err(|e| (WRITE_STAGE, e))?;
        if let Some(t0) = t0 {
            self.times.add(WRITE_STAGE, t0.elapsed().as_nanos() as u64);
        }
        Ok(fp)
    }
}

/// Where [`Worker::run`] writes a sample: a batch slot of the pixels' own type, or a slot
/// of 16-bit floats (`type_cast` of the image to float16 or bfloat16: the bits, `DType`
/// saying which).
pub(crate) enum Out<'a> {
    Plain(Dst<'a>),
    Narrow(&'a mut [u16], DType),
}

/// The final write into a 16-bit float slot: the float32 values rounded in the same pass
/// where the AVX2 plane write applies (the ImageNet pipelines); else written as float32
/// into the worker's `wide` buffer, still in cache, and rounded from there.
fn write_narrow(
    img: &mut Held,
    program: &Program,
    borrowed: Option<&[u8]>,
    (dst, dtype): (&mut [u16], DType),
    wide: &mut Vec<f32>,
) -> Result<Option<u64>, Fault> {
    if program.tail.path == WritePath::U8ToFloatPlanes
        && img.elem == Elem::U8
        && img.layout == Layout::Hwc
    {
        let (data, stride) = match borrowed {
            Some(b) => (b, 3),
            None => (&img.a8[..], img.stride),
        };
        let src = Interleaved {
            data,
            stride,
            height: img.h,
            width: img.w,
        };
        if write_planes_narrow(
            src,
            program.tail.affine.as_ref(),
            read_order(img),
            dst,
            dtype,
        ) {
            img.deferred = None;
            return Ok(None);
        }
    }
    wide.resize(dst.len(), 0.0); // fully overwritten by the write
    write_tail(img, program, borrowed, Dst::F32(wide), false, false)?;
    narrow(wide, dtype, dst)?;
    Ok(None)
}

/// The final write of the held image (or of `borrowed`, the source's own pixels) into
/// `dst`, along the program's [`WritePath`], with the deferred work done on the way or on
/// the written sample (`stream`: the plane write may use non-temporal stores, into a batch
/// slot, not a scratch buffer).
fn write_tail(
    img: &mut Held,
    program: &Program,
    borrowed: Option<&[u8]>,
    mut dst: Dst<'_>,
    hash: bool,
    stream: bool,
) -> Result<Option<u64>, Fault> {
    let tail = &program.tail;
    let (h, w) = (img.h, img.w);
    let (pixels, stride) = match borrowed {
        Some(b) => (b, 3),
        None => (&img.a8[..], img.stride),
    };
    if tail.path == WritePath::U8ToFloatPlanes {
        if img.elem != Elem::U8 || img.layout != Layout::Hwc {
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
        let order = read_order(img);
        let streamed = stream
            .then(|| write_planes_streaming(src, affine, order, d, hash))
            .flatten();
        if let Some(fp) = streamed {
            img.deferred = None;
            return Ok(fp);
        }
        if order == ColumnOrder::RightToLeft && write_mirrored(src, affine, tail.layout, &mut dst) {
            img.deferred = None;
            return Ok(None);
        }
    }
    if img.stride == 4 {
        if write_rgbx(&img.a8, h, w, tail.affine.as_ref(), tail.layout, &mut dst) {
            finish_written(img, &mut dst, tail.layout);
            return Ok(None);
        }
        img.pack_rgb();
    }
    let pixels = match (borrowed, img.elem) {
        (Some(b), _) => Pixels::U8(b),
        (None, Elem::U8) => Pixels::U8(&img.a8),
        (None, Elem::F32) => Pixels::F32(&img.af),
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
    finish_written(img, &mut dst, tail.layout);
    Ok(None)
}

/// The order in which the final write reads each row: the deferred work's, if any.
fn read_order(img: &Held) -> ColumnOrder {
    img.deferred
        .map_or(ColumnOrder::LeftToRight, |d| d.read_order())
}

/// Do the deferred work, if any, on the sample just written into `dst`.
fn finish_written(img: &mut Held, dst: &mut Dst<'_>, layout: Layout) {
    if let Some(d) = img.deferred.take() {
        d.apply_written(dst, img.h, img.w, layout);
    }
}
