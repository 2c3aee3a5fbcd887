#!/usr/bin/env python3
"""Makes the benchmark data of BENCHMARKS.md from the photographs in benches/photos.

Needs Pillow and numpy only (pip install pillow numpy). Two data sets:

  python3 benches/make_data.py imagefolder --out DIR [--num 4000] [--classes 20]
      DIR/<wnid>/<wnid>_<index>.JPEG: ImageNet-like JPEGs cut from the photos (random
      crop, scale and horizontal flip, a little colour and exposure jitter, sensor-like
      grain), ImageNet's sizes and shapes: most long sides 500 px, aspect ratios 4:3,
      3:2, 1:1, 3:4, 2:3, 16:9, 5:4, so the shorter side is mostly 333-500 px; about 2.5%
      are large (long side 1000-2000 px). Baseline JPEG, quality 85-95, 4:2:0.

  python3 benches/make_data.py cifar --out DIR [--per-file 10000]
      DIR/cifar-10-batches-bin/{data_batch_1..5,test_batch}.bin: 10 000 records each
      (CIFAR-10's size; --per-file makes smaller sets for quick checks),
      a record = 1 label byte + 1024 R + 1024 G + 1024 B bytes (row-major 32x32), plus
      batches.meta.txt; DIR/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}:
      the same records in the pickle layout torchvision reads (protocol 2, as the
      official files: b"data" uint8 [N, 3072], b"labels", b"filenames",
      b"batch_label"; strings written as Python 2 str, so pickle.load(f,
      encoding="latin1") gives str keys and encoding="bytes" gives bytes keys).
      Labels are balanced (5000 per class in training, 1000 in test), shuffled.

  python3 benches/make_data.py large --out DIR [--num 40]
      DIR/large/large_<index>.jpg: 12-megapixel camera-like JPEGs (4000 x 3000, one in
      four 3000 x 4000), each a mosaic of 12 tiles cut from random photos (random crop,
      scale and flip, the same colour jitter and grain as imagefolder), quality 92,
      4:2:0: the set for `decode`'s `draft` and for large-photo figures.
  python3 benches/make_data.py tars --out DIR [--num 100000] [--per-tar 1000]
      DIR/train-000000.tar ...: WebDataset tars (KEY.jpg + KEY.cls, plain ustar members as
      Python's tarfile writes them) of small JPEGs (48x48 photo crops, about 1.5 KB): many
      members in few bytes, to measure how fast an index of the tars is built (members/s).

  python3 benches/make_data.py stats --out DIR      # sizes of an imagefolder tree

Every image is drawn from its own random stream, numpy's SeedSequence of (--seed, data
set, index), so the files depend on the seed only: not on --jobs nor on the order in
which the worker processes finish. Same seed, same Pillow/libjpeg and numpy -> same
bytes (a different libjpeg or resampler version may change the encoded bytes).

The whole 4000-image set takes about a minute on 2 cores, the CIFAR set (60 000 records
in both layouts) well under one.
"""
import argparse
import os
import struct
import sys
import time
from multiprocessing import Pool

import numpy as np
from PIL import Image, ImageFilter

HERE = os.path.dirname(os.path.abspath(__file__))
PHOTOS = os.path.join(HERE, "photos")
SEED = 16_0009  # issue 16, item 9

# Data-set tags in each item's SeedSequence, so the two sets never share streams.
STREAM_IMAGEFOLDER = 1
STREAM_CIFAR = 2
STREAM_CIFAR_LABELS = 3
STREAM_LARGE = 4

# ImageNet's shapes (width:height), weighted roughly as in its training set: mostly
# 4:3 and 3:2 landscapes, then squares and portraits, a few wide ones.
SHAPES = [((4, 3), 0.42), ((3, 2), 0.14), ((1, 1), 0.12), ((3, 4), 0.14),
          ((2, 3), 0.08), ((16, 9), 0.05), ((5, 4), 0.05)]

# Camera-like detail on the imagefolder set: the share of images sharpened, the range of
# the grain's standard deviation (0-255 scale). With these the JPEGs carry about 3.7 bits
# per pixel, as the earlier benchmark data did (ImageNet's own are denser still).
SHARPEN_P = 0.7
GRAIN = (4.0, 11.0)

CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer",
                 "dog", "frog", "horse", "ship", "truck"]


def stream(seed, tag, index):
    """The random generator of one item: independent of every other item."""
    return np.random.default_rng(np.random.SeedSequence([seed, tag, index]))


# ---------------------------------------------------------------- photos
_photos = None  # this process's decoded photos: [(name, PIL RGB image)]


def photo_names(folder):
    names = sorted(n for n in os.listdir(folder)
                   if n.lower().endswith((".png", ".jpg", ".jpeg")))
    if not names:
        raise SystemExit(f"no photos (*.png, *.jpg) in {folder}")
    return names


def load_photos(folder):
    global _photos
    out = []
    for n in photo_names(folder):
        with Image.open(os.path.join(folder, n)) as im:
            out.append((n, im.convert("RGB")))
    _photos = out


def crop_box(rng, w, h, aspect, min_area, max_area=1.0):
    """A random window of the given width/height ratio inside a w x h photo, whose area
    is min_area..max_area of the largest such window (floats: Pillow resamples from
    a fractional box)."""
    full_w, full_h = (h * aspect, h) if w / h > aspect else (w, w / aspect)
    side = np.sqrt(rng.uniform(min_area, max_area))
    cw, ch = full_w * side, full_h * side
    x0 = rng.uniform(0.0, w - cw)
    y0 = rng.uniform(0.0, h - ch)
    return (x0, y0, x0 + cw, y0 + ch)


def colour_jitter(rng, a):
    """Exposure, white balance and contrast moves, on a float32 HxWx3 array in 0..255."""
    gain = rng.uniform(0.85, 1.15) * rng.uniform(0.94, 1.06, size=3).astype(np.float32)
    contrast = np.float32(rng.uniform(0.85, 1.2))
    mean = a.mean()
    return ((a - mean) * contrast + mean) * gain


# ----------------------------------------------------------- imagefolder
def imagenet_size(rng):
    aw, ah = SHAPES[rng.choice(len(SHAPES), p=[p for _, p in SHAPES])][0]
    u = rng.random()
    if u < 0.025:
        long_side = int(rng.integers(1000, 2001))   # the few big camera originals
    elif u < 0.75:
        long_side = 500                             # ImageNet's usual size
    elif u < 0.90:
        long_side = int(rng.integers(360, 500))
    else:
        long_side = int(rng.integers(501, 700))
    if aw >= ah:
        return long_side, max(1, round(long_side * ah / aw))
    return max(1, round(long_side * aw / ah)), long_side


def make_jpeg(job):
    """Writes one ImageNet-like JPEG; returns (bytes, width, height)."""
    seed, index, path = job
    rng = stream(seed, STREAM_IMAGEFOLDER, index)
    _, photo = _photos[rng.integers(len(_photos))]
    w, h = imagenet_size(rng)
    box = crop_box(rng, photo.width, photo.height, w / h, 0.3)
    im = photo.resize((w, h), Image.Resampling.LANCZOS, box=box)
    if rng.random() < 0.5:
        im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    # In-camera sharpening, on most images: the film scans are soft once rescaled.
    if rng.random() < SHARPEN_P:
        im = im.filter(ImageFilter.UnsharpMask(radius=float(rng.uniform(0.8, 1.6)),
                                               percent=int(rng.integers(40, 141)), threshold=2))
    a = colour_jitter(rng, np.asarray(im, dtype=np.float32))
    # Sensor grain, mostly in luminance: the Kodak scans are softer and cleaner than
    # the camera JPEGs of ImageNet, and would otherwise compress (and decode) faster.
    sigma = rng.uniform(*GRAIN)
    noise = rng.standard_normal((h, w, 1), dtype=np.float32) * np.float32(sigma)
    noise = noise + rng.standard_normal((h, w, 3), dtype=np.float32) * np.float32(sigma * 0.25)
    a = np.clip(a + noise + 0.5, 0, 255).astype(np.uint8)
    quality = int(rng.integers(85, 96))
    Image.fromarray(a).save(path, "JPEG", quality=quality, subsampling="4:2:0")
    return os.path.getsize(path), w, h


# ----------------------------------------------------------- large
LARGE = (4000, 3000)
LARGE_GRID = (4, 3)  # tiles across, down (landscape)


def make_large(job):
    """Writes one 12 MP mosaic JPEG; returns (bytes, width, height)."""
    seed, index, path = job
    rng = stream(seed, STREAM_LARGE, index)
    portrait = rng.random() < 0.25
    (w, h), (gx, gy) = (LARGE, LARGE_GRID) if not portrait else (LARGE[::-1], LARGE_GRID[::-1])
    tw, th = w // gx, h // gy
    canvas = Image.new("RGB", (w, h))
    for ty in range(gy):
        for tx in range(gx):
            _, photo = _photos[rng.integers(len(_photos))]
            box = crop_box(rng, photo.width, photo.height, tw / th, 0.4)
            tile = photo.resize((tw, th), Image.Resampling.LANCZOS, box=box)
            if rng.random() < 0.5:
                tile = tile.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            tile = tile.filter(ImageFilter.UnsharpMask(radius=float(rng.uniform(0.8, 1.6)),
                                                       percent=int(rng.integers(40, 141)), threshold=2))
            canvas.paste(tile, (tx * tw, ty * th))
    a = colour_jitter(rng, np.asarray(canvas, dtype=np.float32))
    sigma = np.float32(rng.uniform(*GRAIN))
    a += rng.standard_normal((h, w, 1), dtype=np.float32) * sigma
    a += rng.standard_normal((h, w, 3), dtype=np.float32) * (sigma * np.float32(0.25))
    a = np.clip(a + 0.5, 0, 255).astype(np.uint8)
    Image.fromarray(a).save(path, "JPEG", quality=92, subsampling="4:2:0")
    return os.path.getsize(path), w, h


def cmd_large(a):
    num = a.num if a.num is not None else 40
    folder = os.path.join(a.out, "large")
    os.makedirs(folder, exist_ok=True)
    jobs = [(a.seed, i, os.path.join(folder, f"large_{i:04d}.jpg")) for i in range(num)]
    t0 = time.perf_counter()
    res = run_jobs(a, make_large, jobs, chunk=1)
    print(f"wrote {len(res)} 12 MP JPEGs under {folder} "
          f"({time.perf_counter() - t0:.1f} s, {a.jobs} processes)")
    report(res)


def wnids(n):
    # WordNet-id-like folder names, sorted in class order
    return [f"n{1440764 + 1000 * k:08d}" for k in range(n)]


def cmd_imagefolder(a):
    classes = wnids(a.classes)
    for c in classes:
        os.makedirs(os.path.join(a.out, c), exist_ok=True)
    num = a.num if a.num is not None else 4000
    jobs = [(a.seed, i, os.path.join(a.out, classes[i % a.classes],
                                     f"{classes[i % a.classes]}_{i:06d}.JPEG"))
            for i in range(num)]
    t0 = time.perf_counter()
    res = run_jobs(a, make_jpeg, jobs, chunk=8)
    print(f"wrote {len(res)} JPEGs in {len(classes)} classes under {a.out} "
          f"({time.perf_counter() - t0:.1f} s, {a.jobs} processes)")
    report(res)


def report(res):
    size = np.array([r[0] for r in res], np.float64)
    w = np.array([r[1] for r in res], np.float64)
    h = np.array([r[2] for r in res], np.float64)
    short, long_ = np.minimum(w, h), np.maximum(w, h)
    print(f"  files: mean {size.mean() / 1e3:.1f} KB, median {np.median(size) / 1e3:.1f} KB, "
          f"total {size.sum() / 1e6:.1f} MB; {8 * size.sum() / (w * h).sum():.2f} bits/pixel")
    print(f"  mean size {w.mean():.0f} x {h.mean():.0f} (W x H); shorter side 333-500 px: "
          f"{100 * np.mean((short >= 333) & (short <= 500)):.1f}%; long side >= 1000 px: "
          f"{100 * np.mean(long_ >= 1000):.1f}%")


def cmd_stats(a):
    res = []
    for root, _, files in sorted(os.walk(a.out)):
        for f in sorted(files):
            if f.lower().endswith((".jpeg", ".jpg", ".png")):
                p = os.path.join(root, f)
                with Image.open(p) as im:
                    res.append((os.path.getsize(p), im.width, im.height))
    if not res:
        raise SystemExit(f"no images under {a.out}")
    print(f"{len(res)} images under {a.out}")
    report(res)


# ----------------------------------------------------------------- cifar
def make_cifar(job):
    """Records first..last-1 as one bytes object of 3072-byte CHW rows."""
    seed, first, last = job
    out = np.empty((last - first, 3, 32, 32), np.uint8)
    for k, index in enumerate(range(first, last)):
        rng = stream(seed, STREAM_CIFAR, index)
        _, photo = _photos[rng.integers(len(_photos))]
        # an object-sized square window (1-25% of the photo's largest square)
        box = crop_box(rng, photo.width, photo.height, rng.uniform(0.9, 1.1), 0.01, 0.25)
        im = photo.resize((32, 32), Image.Resampling.BICUBIC, box=box, reducing_gap=3.0)
        if rng.random() < 0.5:
            im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        a = colour_jitter(rng, np.asarray(im, dtype=np.float32))
        out[k] = np.clip(a + 0.5, 0, 255).astype(np.uint8).transpose(2, 0, 1)
    return out.tobytes()


def cifar_labels(seed, train, test):
    rng = stream(seed, STREAM_CIFAR_LABELS, 0)
    return np.concatenate([rng.permutation(np.arange(train) % 10),
                           rng.permutation(np.arange(test) % 10)]).astype(np.uint8)


class Py2Pickle:
    """A protocol-2 pickle writer for the few types of the CIFAR-10 python files, laid out
    as the official files are (written by Python 2): strings as BINSTRING opcodes and the
    array through numpy.core.multiarray._reconstruct, so that Python 3 reads them with
    encoding="latin1" (torchvision) or encoding="bytes"."""

    def __init__(self):
        self.out = bytearray(b"\x80\x02")           # PROTO 2

    def value(self, v):
        o = self.out
        if v is None:
            o += b"N"
        elif isinstance(v, bool):
            o += b"\x88" if v else b"\x89"          # NEWTRUE / NEWFALSE
        elif isinstance(v, int):
            if 0 <= v < 256:
                o += b"K" + bytes([v])               # BININT1
            elif 0 <= v < 65536:
                o += b"M" + struct.pack("<H", v)     # BININT2
            else:
                o += b"J" + struct.pack("<i", v)     # BININT
        elif isinstance(v, (bytes, str)):
            b = v.encode("latin1") if isinstance(v, str) else v
            if len(b) < 256:
                o += b"U" + bytes([len(b)]) + b      # SHORT_BINSTRING
            else:
                o += b"T" + struct.pack("<i", len(b)) + b   # BINSTRING
        elif isinstance(v, tuple):
            o += b"("                                # MARK
            for x in v:
                self.value(x)
            o += b"t"                                # TUPLE
        elif isinstance(v, list):
            o += b"]("                               # EMPTY_LIST, MARK
            for x in v:
                self.value(x)
            o += b"e"                                # APPENDS
        elif isinstance(v, dict):
            o += b"}("                               # EMPTY_DICT, MARK
            for k, x in v.items():
                self.value(k)
                self.value(x)
            o += b"u"                                # SETITEMS
        elif isinstance(v, np.ndarray) and v.dtype == np.uint8:
            self.array_u8(v)
        else:
            raise TypeError(type(v))

    def array_u8(self, a):
        o = self.out
        o += b"cnumpy.core.multiarray\n_reconstruct\n"      # GLOBAL
        o += b"(cnumpy\nndarray\n"                  # args: (ndarray, (0,), b"b")
        self.value((0,))
        self.value(b"b")
        o += b"tR"                                   # TUPLE, REDUCE
        o += b"("                                    # state: (1, shape, dtype, False, data)
        self.value(1)
        self.value(tuple(a.shape))
        o += b"cnumpy\ndtype\n"
        self.value(("u1", 0, 1))
        o += b"R"
        self.value((3, b"|", None, None, None, -1, -1, 0))
        o += b"b"                                    # BUILD (the dtype's state)
        self.value(False)
        self.value(np.ascontiguousarray(a).tobytes())
        o += b"t"
        o += b"b"                                    # BUILD (the array's state)

    def dump(self, obj, path):
        self.value(obj)
        self.out += b"."                             # STOP
        with open(path, "wb") as f:
            f.write(self.out)


def cmd_cifar(a):
    per_file = a.per_file
    n_train = 5 * per_file
    n = n_train + per_file
    t0 = time.perf_counter()
    step = 500
    parts = run_jobs(a, make_cifar, [(a.seed, i, min(i + step, n)) for i in range(0, n, step)], chunk=1)
    pixels = np.frombuffer(b"".join(parts), np.uint8).reshape(n, 3072)
    labels = cifar_labels(a.seed, n_train, per_file)
    bin_dir = os.path.join(a.out, "cifar-10-batches-bin")
    py_dir = os.path.join(a.out, "cifar-10-batches-py")
    os.makedirs(bin_dir, exist_ok=True)
    os.makedirs(py_dir, exist_ok=True)
    files = [(f"data_batch_{k}", f"training batch {k} of 5") for k in range(1, 6)]
    files.append(("test_batch", "testing batch 1 of 1"))
    for k, (name, batch_label) in enumerate(files):
        lo, hi = k * per_file, (k + 1) * per_file
        records = np.empty((per_file, 3073), np.uint8)
        records[:, 0] = labels[lo:hi]
        records[:, 1:] = pixels[lo:hi]
        records.tofile(os.path.join(bin_dir, name + ".bin"))
        Py2Pickle().dump({
            b"batch_label": batch_label.encode(),
            b"labels": [int(x) for x in labels[lo:hi]],
            b"data": pixels[lo:hi],
            b"filenames": [f"{CIFAR_CLASSES[labels[i]]}_s_{i:06d}.png".encode() for i in range(lo, hi)],
        }, os.path.join(py_dir, name))
    with open(os.path.join(bin_dir, "batches.meta.txt"), "w") as f:
        f.write("".join(c + "\n" for c in CIFAR_CLASSES) + "\n")
    Py2Pickle().dump({b"num_cases_per_batch": per_file,
                      b"label_names": [c.encode() for c in CIFAR_CLASSES],
                      b"num_vis": 3072}, os.path.join(py_dir, "batches.meta"))
    print(f"wrote {n_train} training + {per_file} test records to {bin_dir} and {py_dir} "
          f"({time.perf_counter() - t0:.1f} s, {a.jobs} processes); "
          f"mean pixel {pixels.mean() / 255:.4f}")


# ------------------------------------------------------------------ main
STREAM_TARS = 3


def make_tar(job):
    """Writes one WebDataset tar of small JPEGs; returns its sample count."""
    import io
    import tarfile

    seed, first, count, classes, path = job
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(first, first + count):
            rng = stream(seed, STREAM_TARS, i)
            _, photo = _photos[rng.integers(len(_photos))]
            box = crop_box(rng, photo.width, photo.height, 1.0, 0.05, 0.3)
            buf = io.BytesIO()
            photo.resize((48, 48), Image.Resampling.NEAREST, box=box).save(buf, "JPEG", quality=85)
            for name, data in ((f"{i:09d}.jpg", buf.getvalue()), (f"{i:09d}.cls", str(i % classes).encode())):
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(data), 1700000000
                tar.addfile(info, io.BytesIO(data))
    return count


def cmd_tars(a):
    os.makedirs(a.out, exist_ok=True)
    num = a.num if a.num is not None else 4000
    jobs = [(a.seed, first, min(a.per_tar, num - first), a.classes,
             os.path.join(a.out, f"train-{first // a.per_tar:06d}.tar"))
            for first in range(0, num, a.per_tar)]
    t0 = time.perf_counter()
    res = run_jobs(a, make_tar, jobs, chunk=1)
    print(f"wrote {sum(res)} samples in {len(res)} tars under {a.out} "
          f"({time.perf_counter() - t0:.1f} s, {a.jobs} processes)")


def run_jobs(a, fn, jobs, chunk):
    """fn over jobs, results in job order, in a.jobs processes (1: this process)."""
    if a.jobs <= 1:
        load_photos(a.photos)
        return [fn(j) for j in jobs]
    with Pool(a.jobs, initializer=load_photos, initargs=(a.photos,)) as pool:
        return pool.map(fn, jobs, chunksize=chunk)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["imagefolder", "cifar", "large", "tars", "stats"])
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--photos", default=PHOTOS, help="source photos (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=SEED, help="default: %(default)s")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="worker processes (the output does not depend on it; default: %(default)s)")
    ap.add_argument("--num", type=int, default=None,
                    help="imagefolder: images (default: 4000); large: images (default: 40); "
                         "tars: samples (default: 4000)")
    ap.add_argument("--per-tar", type=int, default=1000, help="tars: samples per tar (default: %(default)s)")
    ap.add_argument("--classes", type=int, default=20, help="imagefolder: classes (default: %(default)s)")
    ap.add_argument("--per-file", type=int, default=10_000,
                    help="cifar: records per batch file (default: %(default)s, as CIFAR-10)")
    a = ap.parse_args()
    if (a.num is not None and a.num < 1) or a.classes < 1 or a.per_file < 1 or a.per_tar < 1:
        ap.error("--num, --classes, --per-file and --per-tar must be positive")
    if a.what != "stats":
        photo_names(a.photos)  # fail early, before starting workers
    {"imagefolder": cmd_imagefolder, "cifar": cmd_cifar, "large": cmd_large, "tars": cmd_tars,
     "stats": cmd_stats}[a.what](a)


if __name__ == "__main__":
    sys.exit(main())
