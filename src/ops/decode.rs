//! `decode`: encoded bytes → RGB, 8 bits per channel, HWC, through the decoders of
//! [`crate::codec`]. Pixels a source stores decoded (`raw` shards, [`Spec::source_pixels`])
//! pass through: there is nothing to decode. A second `decode`, or one on CIFAR records, is
//! still an error. The format is read from the magic bytes, not from the file name;
//! `max_pixels` (default 89 478 485, Pillow's `MAX_IMAGE_PIXELS`) is checked on the header
//! before any pixel buffer is allocated. With libjpeg-turbo, the decode can decode just the
//! rectangle a following resize+crop needs.
//!
//! Two opt-in settings change the pixels, as Pillow users change them:
//! * `exif_transpose = true` shows a JPEG or PNG as its EXIF orientation tag says
//!   (Pillow's `ImageOps.exif_transpose`, right after decoding: before any crop or resize);
//!   missing or unreadable EXIF leaves the image as stored.
//! * `draft = true` decodes a JPEG at 1/2, 1/4 or 1/8 of its size in the DCT domain when
//!   the `resize` right after `decode` targets at most half of it: the largest scale `s`
//!   with `s <= min(W // target_w, H // target_h)`, Pillow's `draft` rule, then the same
//!   resize from the smaller image (libjpeg-turbo only; zune-jpeg has no DCT scaling and
//!   decodes at full size).

use super::image::{bug, Elem, Sample};
use super::kernel::{Kernel, Lowered, OpDef};
use crate::error::Fault;
use crate::spec::{DType, Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::codec::decoder::{Decoder, DecoderConfig, JpegBackend, DEFAULT_MAX_PIXELS};
use crate::codec::exif::{self, Orientation};
use crate::imgproc::orient::orient;

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
    /// Show the image in its EXIF orientation (Pillow's `ImageOps.exif_transpose`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub exif_transpose: bool,
    /// Decode JPEGs at a DCT scale (1/2, 1/4, 1/8) when the resize after `decode` targets
    /// at most half the image (Pillow's `draft`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub draft: bool,
}

/// Off-by-default settings are left out of a written pipeline (and of the fingerprint a
/// saved job state checks), so pipelines that do not set them read and hash as before.
fn is_false(b: &bool) -> bool {
    !*b
}

setters!(Decode {
    decoder: JpegBackend,
    max_pixels: u64,
    exif_transpose: bool,
    draft: bool,
});

impl Default for Decode {
    fn default() -> Decode {
        Decode {
            decoder: JpegBackend::Auto,
            max_pixels: DEFAULT_MAX_PIXELS,
            exif_transpose: false,
            draft: false,
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
            region: false,
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

    /// Whether this decode's decoder scales in the DCT domain (libjpeg-turbo on JPEG):
    /// what `draft` needs.
    pub fn decodes_scaled(&self) -> bool {
        self.decodes_regions()
    }
}

/// Pillow's `draft` rule: the DCT scale (1, 2, 4 or 8) an `h × w` image decodes at before
/// a resize to `target = (height, width)`: the largest `s` with
/// `s <= min(w / target_w, h / target_h)` (integer division).
pub fn draft_scale((h, w): (usize, usize), (th, tw): (usize, usize)) -> usize {
    let room = (w / tw.max(1)).min(h / th.max(1));
    [8, 4, 2].into_iter().find(|&s| room >= s).unwrap_or(1)
}

/// The kernel: decode into the working image; with `serves` (the kernel after it), only
/// the rectangle that kernel reads, where the decoder can, as RGBX for it.
#[derive(Debug)]
struct DecodeKernel {
    cfg: Decode,
    serves: Option<Arc<dyn Kernel>>,
    /// Decode only the rectangle `serves` reads (else `serves` is there for `draft`).
    region: bool,
}

impl Kernel for DecodeKernel {
    fn name(&self) -> &'static str {
        "decode"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let bytes = s.encoded.ok_or_else(|| bug("decode: the sample is not encoded"))?;
        let orientation = if self.cfg.exif_transpose {
            exif::orientation(bytes)
        } else {
            Orientation::NORMAL
        };
        let dec = s
            .tools
            .decoder
            .get_or_insert_with(|| Decoder::new(&self.cfg));
        let (rng, img) = (&mut *s.rng, &mut *s.img);
        let serves = self.serves.as_deref();
        // The scale is chosen on the image as shown, the resize's target likewise.
        let scale = |h: usize, w: usize| {
            let shown = orientation.shown((h, w));
            match serves.and_then(|k| k.resize_target(shown.0, shown.1)) {
                Some(target) if self.cfg.draft => draft_scale(shown, target),
                _ => 1,
            }
        };
        let mut drawn = None;
        // A turned or mirrored image decodes whole: the next kernel reads it (and draws
        // its box) in the orientation shown.
        let want = |h: usize, w: usize| {
            let region = self.region && orientation.is_normal();
            let (rect, b) = serves.filter(|_| region)?.region(h, w, rng);
            drawn = b;
            rect
        };
        let rgbx = serves.is_some_and(|k| k.reads_rgbx());
        let d = dec.decode_region(bytes, scale, want, rgbx, &mut img.a8)?;
        img.drawn = drawn;
        img.stride = d.channels;
        (img.h, img.w) = d.region.size();
        img.full = d.full;
        img.origin = (d.region.top, d.region.left);
        img.layout = Layout::Hwc;
        img.elem = Elem::U8;
        if !orientation.is_normal() {
            let size = (img.h, img.w);
            let shown = orient(&img.a8, img.stride, size, orientation.value(), &mut img.b8);
            img.swap();
            (img.h, img.w) = shown;
            img.full = shown;
        }
        Ok(())
    }

    fn reads_rgbx(&self) -> bool {
        true
    }

    fn holds_region(&self) -> bool {
        true
    }

    /// Serves a kernel that reads a rectangle (with `region`), and with `draft` one that
    /// resizes.
    fn with_region_of(&self, next: Arc<dyn Kernel>, region: bool) -> Option<Arc<dyn Kernel>> {
        let region = region && next.region_note().is_some();
        let draft = self.cfg.draft && next.resize_target(1, 1).is_some();
        (region || draft).then(|| {
            Arc::new(DecodeKernel {
                cfg: self.cfg.clone(),
                serves: Some(next),
                region,
            }) as Arc<dyn Kernel>
        })
    }

    fn decodes_regions(&self) -> bool {
        self.cfg.decodes_regions() && self.region
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.cfg.exif_transpose {
            notes.push(
                "decode: exif_transpose: JPEGs and PNGs shown as their EXIF orientation says \
                 (Pillow's exif_transpose), before any crop or resize; turned or mirrored \
                 images decode whole"
                    .to_string(),
            );
        }
        let Some(next) = self.serves.as_ref().filter(|_| self.cfg.draft) else {
            return notes;
        };
        if !self.cfg.decodes_scaled() {
            notes.push(
                "decode: draft ignored: this build decodes JPEGs with zune-jpeg, which has \
                 no DCT scaling (images decode at full size)"
                    .to_string(),
            );
            return notes;
        }
        let examples = [(3024, 4032), (2448, 3264), (1080, 1920), (768, 1024), (375, 500)]
            .map(|(h, w)| {
                let s = next.resize_target(h, w).map_or(1, |t| draft_scale((h, w), t));
                if s == 1 {
                    format!("{w}x{h} full size")
                } else {
                    let (sh, sw) = (h.div_ceil(s), w.div_ceil(s));
                    format!("{w}x{h} at 1/{s} ({sw}x{sh})")
                }
            });
        notes.push(format!(
            "decode: draft: JPEGs at least 2, 4 or 8 times the resize's target on both sides \
             decode at 1/2, 1/4 or 1/8 (DCT scaling, Pillow's draft): {}",
            examples.join(", ")
        ));
        notes
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
