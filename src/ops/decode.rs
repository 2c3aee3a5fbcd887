//! `decode`: encoded bytes → RGB, 8 bits per channel, HWC, through the decoders of
//! [`crate::codec`]. Pixels a source stores decoded (`raw` shards, [`Spec::source_pixels`])
//! pass through: there is nothing to decode. A second `decode`, or one on CIFAR records, is
//! still an error. The format is read from the magic bytes, not from the file name;
//! `max_pixels` (default 89 478 485, Pillow's `MAX_IMAGE_PIXELS`) is checked on the header
//! before any pixel buffer is allocated. With libjpeg-turbo, the decode can decode just the
//! rectangle a following resize+crop needs.

use super::image::{bug, Elem, Sample};
use super::kernel::{Kernel, Lowered, OpDef};
use crate::error::Fault;
use crate::spec::{DType, Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::codec::decoder::{Decoder, DecoderConfig, JpegBackend, DEFAULT_MAX_PIXELS};

fn default_max_pixels() -> u64 {
    DEFAULT_MAX_PIXELS
}

/// The `decode` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Decode {
    /// JPEG decoder.
    #[serde(default)]
    pub decoder: JpegBackend,
    /// Largest `width × height` accepted.
    #[serde(default = "default_max_pixels")]
    pub max_pixels: u64,
}

setters!(Decode {
    decoder: JpegBackend,
    max_pixels: u64,
});

impl Default for Decode {
    fn default() -> Decode {
        Decode {
            decoder: JpegBackend::Auto,
            max_pixels: DEFAULT_MAX_PIXELS,
        }
    }
}

impl OpDef for Decode {
    /// Encoded bytes in, RGB u8 HWC of varying size out; RGB u8 HWC pixels as a source
    /// stores them ([`Spec::source_pixels`]) pass through unchanged.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        if !input.encoded {
            // Pixels a source stores decoded (raw shards) are what decode would make of
            // them: RGB u8 HWC. Decode is then the identity (the engine compiles it to
            // nothing), so a pipeline written for encoded files runs unchanged on a decoded
            // copy of the data.
            let stored = input.source_pixels
                && input.dtype == DType::U8
                && input.layout == Layout::Hwc
                && input.channels == 3;
            if stored {
                return Ok(input.clone());
            }
            return Err(SpecError::input(
                "decode needs encoded bytes, but the samples are already pixels",
            ));
        }
        if self.decoder == JpegBackend::Turbo && !cfg!(feature = "turbojpeg") {
            return Err(SpecError::Unavailable(
                "decoder = \"turbo\" needs imgfeed built with `--features turbojpeg`".into(),
            ));
        }
        if self.decoder == JpegBackend::Libjpeg && !cfg!(imgfeed_libjpeg) {
            return Err(SpecError::Unavailable(
                "decoder = \"libjpeg\" needs the system libjpeg-turbo's headers when imgfeed is \
                 built (and not the `turbojpeg` feature)"
                    .into(),
            ));
        }
        if self.max_pixels == 0 {
            return Err(SpecError::param("max_pixels", "must be positive"));
        }
        Ok(Spec {
            encoded: false,
            height: None,
            width: None,
            channels: 3,
            layout: Layout::Hwc,
            dtype: DType::U8,
            ..input.clone()
        })
    }

    fn lower(&self, input: &Spec) -> Lowered {
        if !input.encoded {
            return Lowered::Nothing("decode: the source stores decoded pixels; nothing to decode");
        }
        Lowered::Kernel(Arc::new(DecodeKernel {
            cfg: self.clone(),
            serves: None,
        }))
    }

    fn takes_encoded(&self) -> bool {
        true
    }
}

impl Decode {
    /// Whether this decode's decoder can decode a rectangle only (libjpeg-turbo on JPEG).
    pub fn decodes_regions(&self) -> bool {
        cfg!(imgfeed_turbo) && self.decoder != JpegBackend::Zune
    }
}

/// The kernel: decode into the working image; with `serves` (the kernel after it), only
/// the rectangle that kernel reads, where the decoder can, as RGBX for it.
#[derive(Debug)]
struct DecodeKernel {
    cfg: Decode,
    serves: Option<Arc<dyn Kernel>>,
}

impl Kernel for DecodeKernel {
    fn name(&self) -> &'static str {
        "decode"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let bytes = s.encoded.ok_or_else(|| bug("decode: the sample is not encoded"))?;
        let dec = s
            .tools
            .decoder
            .get_or_insert_with(|| Decoder::new(&self.cfg));
        let (rng, img) = (&mut *s.rng, &mut *s.img);
        let mut drawn = None;
        let want = |h: usize, w: usize| {
            let (rect, b) = self.serves.as_ref()?.region(h, w, rng);
            drawn = b;
            rect
        };
        let rgbx = self.serves.as_ref().is_some_and(|k| k.reads_rgbx());
        let d = dec.decode_region(bytes, want, rgbx, &mut img.a8)?;
        img.drawn = drawn;
        img.stride = d.channels;
        (img.h, img.w) = d.region.size();
        img.full = d.full;
        img.origin = (d.region.top, d.region.left);
        img.layout = Layout::Hwc;
        img.elem = Elem::U8;
        Ok(())
    }

    fn reads_rgbx(&self) -> bool {
        true
    }

    fn holds_region(&self) -> bool {
        true
    }

    fn with_region_of(&self, next: Arc<dyn Kernel>) -> Option<Arc<dyn Kernel>> {
        Some(Arc::new(DecodeKernel {
            cfg: self.cfg.clone(),
            serves: Some(next),
        }))
    }

    fn decodes_regions(&self) -> bool {
        self.cfg.decodes_regions()
    }
}

impl From<&Decode> for DecoderConfig {
    fn from(d: &Decode) -> DecoderConfig {
        DecoderConfig {
            backend: d.decoder,
            max_pixels: d.max_pixels,
        }
    }
}
