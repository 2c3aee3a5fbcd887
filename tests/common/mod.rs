//! Helpers shared by the integration tests: tiny hand-written BMP images, ImageFolder trees
//! in temporary folders, and ways to run a pipeline and collect what comes out.

#![allow(dead_code)]

use imgfeed::{Batch, EngineConfig, Labels, OnError, Pipeline, SourceConfig, SourceKind};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's `fixtures/` folder.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// An RGB u8 image, HWC.
#[derive(Clone, Debug, PartialEq)]
pub struct Img {
    pub w: usize,
    pub h: usize,
    pub rgb: Vec<u8>,
}

impl Img {
    pub fn from_fn(w: usize, h: usize, f: impl Fn(usize, usize) -> [u8; 3]) -> Img {
        let mut rgb = Vec::with_capacity(w * h * 3);
        for y in 0..h {
            for x in 0..w {
                rgb.extend_from_slice(&f(x, y));
            }
        }
        Img { w, h, rgb }
    }

    /// Every pixel `c`.
    pub fn uniform(w: usize, h: usize, c: [u8; 3]) -> Img {
        Img::from_fn(w, h, |_, _| c)
    }

    /// Values that identify the position: R = 1 + y*w + x (unique up to 254 pixels),
    /// G = 255 - 2y - x... B = `tag`. No value is 0, so zero padding is recognisable.
    pub fn pattern(w: usize, h: usize, tag: u8) -> Img {
        assert!(w * h <= 254, "pattern images must have at most 254 pixels");
        Img::from_fn(w, h, |x, y| {
            [(1 + y * w + x) as u8, (255 - 3 * y - 2 * x) as u8, tag]
        })
    }

    pub fn get(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.w + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// The image as a 24-bit uncompressed BMP (BITMAPINFOHEADER, bottom-up rows, BGR,
    /// rows padded to 4 bytes).
    pub fn to_bmp(&self) -> Vec<u8> {
        let row = (self.w * 3).div_ceil(4) * 4;
        let data_len = row * self.h;
        let file_len = 14 + 40 + data_len;
        let mut b = Vec::with_capacity(file_len);
        b.extend_from_slice(b"BM");
        b.extend_from_slice(&(file_len as u32).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // reserved
        b.extend_from_slice(&54u32.to_le_bytes()); // pixel data offset
        b.extend_from_slice(&40u32.to_le_bytes()); // BITMAPINFOHEADER
        b.extend_from_slice(&(self.w as i32).to_le_bytes());
        b.extend_from_slice(&(self.h as i32).to_le_bytes()); // positive: bottom-up
        b.extend_from_slice(&1u16.to_le_bytes()); // planes
        b.extend_from_slice(&24u16.to_le_bytes()); // bits per pixel
        b.extend_from_slice(&0u32.to_le_bytes()); // BI_RGB
        b.extend_from_slice(&(data_len as u32).to_le_bytes());
        b.extend_from_slice(&2835i32.to_le_bytes()); // 72 dpi
        b.extend_from_slice(&2835i32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // palette colours
        b.extend_from_slice(&0u32.to_le_bytes()); // important colours
        for y in (0..self.h).rev() {
            let start = b.len();
            for x in 0..self.w {
                let [r, g, bl] = self.get(x, y);
                b.extend_from_slice(&[bl, g, r]);
            }
            b.resize(start + row, 0);
        }
        assert_eq!(b.len(), file_len);
        b
    }

    pub fn write_bmp(&self, path: &Path) {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create image folder");
        }
        std::fs::write(path, self.to_bmp()).expect("write BMP");
    }

    /// Left-right mirror.
    pub fn mirrored(&self) -> Img {
        Img::from_fn(self.w, self.h, |x, y| self.get(self.w - 1 - x, y))
    }
}

/// A temporary ImageFolder tree: `(root-relative path, image)` written as BMP files.
pub fn bmp_folder(files: &[(&str, &Img)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (rel, img) in files {
        img.write_bmp(&dir.path().join(rel));
    }
    dir
}

/// Copy a file into `root/rel` (creating folders).
pub fn copy_into(root: &Path, rel: &str, from: &Path) {
    let to = root.join(rel);
    std::fs::create_dir_all(to.parent().expect("parent")).expect("create folder");
    std::fs::copy(from, &to)
        .unwrap_or_else(|e| panic!("copy {} -> {}: {e}", from.display(), to.display()));
}

/// An ImageFolder source config at `root`.
pub fn folder_source(root: &Path) -> SourceConfig {
    SourceConfig::new(SourceKind::ImageFolder, root)
}

/// An engine table with `workers` threads, everything else default.
pub fn engine(workers: usize) -> EngineConfig {
    EngineConfig::default().workers(workers)
}

/// An engine table that skips bad samples.
pub fn skipping(workers: usize) -> EngineConfig {
    EngineConfig::default()
        .workers(workers)
        .on_error(OnError::Skip)
}

/// Every batch of epoch `epoch`, failing the test on an error.
pub fn batches(p: &Pipeline, epoch: u64) -> Vec<Batch> {
    p.epoch(epoch)
        .enumerate()
        .map(|(i, b)| b.unwrap_or_else(|e| panic!("batch {i} of epoch {epoch} failed: {e}")))
        .collect()
}

/// All u8 image bytes of an epoch, per sample.
pub fn samples_u8(p: &Pipeline, epoch: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for b in batches(p, epoch) {
        let imgs = b.images_u8().expect("pipeline should end in uint8");
        let per = imgs.len() / b.len().max(1);
        out.extend(imgs.chunks(per.max(1)).map(|c| c.to_vec()));
    }
    out
}

/// All f32 image values of an epoch, per sample.
pub fn samples_f32(p: &Pipeline, epoch: u64) -> Vec<Vec<f32>> {
    let mut out = Vec::new();
    for b in batches(p, epoch) {
        let imgs = b.images_f32().expect("pipeline should end in float32");
        let per = imgs.len() / b.len().max(1);
        out.extend(imgs.chunks(per.max(1)).map(|c| c.to_vec()));
    }
    out
}

/// Labels of a batch as i64, whatever their type.
pub fn labels_i64(b: &Batch) -> Vec<i64> {
    let l = b.labels();
    let n = match l {
        Labels::U32(v) => v.len(),
        Labels::I32(v) => v.len(),
        Labels::I64(v) => v.len(),
        Labels::F32(v) => v.len(),
    };
    (0..n).map(|i| l.get(i).expect("label in range")).collect()
}

/// Max and mean absolute difference of two u8 slices of the same length.
pub fn diff_u8(a: &[u8], b: &[u8]) -> (u8, f64) {
    assert_eq!(a.len(), b.len(), "compared images differ in size");
    let mut max = 0u8;
    let mut sum = 0u64;
    for (x, y) in a.iter().zip(b) {
        let d = x.abs_diff(*y);
        max = max.max(d);
        sum += d as u64;
    }
    (max, sum as f64 / a.len().max(1) as f64)
}

// ---- op shorthands -------------------------------------------------------------------

use imgfeed::imgproc::Filter;
use imgfeed::ops::{
    CenterCrop, Decode, HwcToChw, Normalize, Op, RandomCrop, RandomHorizontalFlip, Rescale, Resize,
    Size, TypeCast,
};
use imgfeed::LabelType;

pub fn decode() -> Op {
    Op::Decode(Decode::default())
}

/// `center_crop` to `h × w`.
pub fn center_crop(h: usize, w: usize) -> Op {
    Op::CenterCrop(CenterCrop::new(Size::Two([h, w])))
}

/// `resize` of the shorter side to `s`.
pub fn resize_short(s: usize, filter: Filter) -> Op {
    Op::Resize(Resize::new(Size::One(s)).filter(filter))
}

/// `resize` to exactly `h × w`.
pub fn resize_exact(h: usize, w: usize, filter: Filter) -> Op {
    Op::Resize(Resize::new(Size::Two([h, w])).filter(filter))
}

pub fn normalize(mean: [f32; 3], std: [f32; 3]) -> Op {
    Op::Normalize(Normalize::new(mean.to_vec(), std.to_vec()))
}

pub fn rescale(rescale: f32, shift: f32) -> Op {
    Op::Rescale(Rescale::new(rescale, shift))
}

pub fn hwc_to_chw() -> Op {
    Op::HwcToChw(HwcToChw::new())
}

pub fn type_cast(dtype: LabelType) -> Op {
    Op::TypeCast(TypeCast::new(dtype))
}

pub fn flip(prob: f64) -> Op {
    Op::RandomHorizontalFlip(RandomHorizontalFlip::new(prob))
}

pub fn random_crop(h: usize, w: usize, padding: usize, fill: u8) -> Op {
    Op::RandomCrop(
        RandomCrop::new(Size::Two([h, w]))
            .padding(padding)
            .fill(fill),
    )
}

/// Build a pipeline over the ImageFolder at `root`.
pub fn build(root: &Path, ops: Vec<Op>, batch: usize, workers: usize) -> Pipeline {
    let mut b = Pipeline::builder(folder_source(root))
        .batch(batch, false)
        .workers(workers);
    for op in ops {
        b = b.op(op);
    }
    b.build()
        .unwrap_or_else(|e| panic!("pipeline should build: {e}"))
}

/// An engine table with explicit queue depths, built through the pipeline-file parser so
/// it does not depend on how `EngineConfig` spells optional fields in Rust.
pub fn engine_with(workers: usize, prefetch: usize, queue: usize) -> EngineConfig {
    let text = format!(
        "[source]\nkind = \"image_folder\"\nroot = \"unused\"\n[batch]\nsize = 1\n[engine]\nworkers = {workers}\nprefetch = {prefetch}\nqueue = {queue}\n"
    );
    imgfeed::PipelineConfig::parse(&text, Path::new("engine.toml"))
        .expect("engine table parses")
        .engine
}

// ---- running the binary and reading what `convert` writes ----

/// Run the `imgfeed` binary from the repository root.
pub fn imgfeed(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_imgfeed"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run the imgfeed binary")
}

/// The subcommands `imgfeed --help` lists (`help` left out): the tests that go over every
/// subcommand take them from here, so a new one is never forgotten.
pub fn subcommands() -> Vec<String> {
    let o = imgfeed(&["--help"]);
    assert!(o.status.success(), "imgfeed --help");
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let names: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect();
    assert!(
        names.len() >= 5,
        "no command list in imgfeed --help:\n{help}"
    );
    names
}

pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally (not by a signal)")
}

/// `(header dict, data bytes)` of a `.npy` file, checking the version-1.0 framing.
pub fn read_npy(path: &Path) -> (String, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &bytes[..8],
        b"\x93NUMPY\x01\x00",
        "{}: npy magic and version",
        path.display()
    );
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let data_at = 10 + hlen;
    assert_eq!(data_at % 64, 0, "npy data must start 64-byte aligned");
    let header = String::from_utf8(bytes[10..data_at].to_vec()).expect("ascii header");
    assert!(header.ends_with('\n'));
    (header.trim_end().to_string(), bytes[data_at..].to_vec())
}
