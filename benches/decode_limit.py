#!/usr/bin/env python3
"""The decode-only reference of BENCHMARKS.md: decode every image of an ImageFolder tree
into RGB with Pillow (libjpeg-turbo for JPEGs) and nothing else, in N worker processes.

It is a yardstick, not the hardware's limit: Pillow adds overhead of its own around
libjpeg-turbo, so a native pipeline that decodes, resizes, crops and normalizes can beat
it. BENCHMARKS.md quotes a pipeline's images/s divided by this figure, the two run
alternately (benches/ratio.py does that).

  pip install pillow
  python3 benches/decode_limit.py DATA_ROOT [--workers 2] [--json]

DATA_ROOT is an ImageFolder tree (DATA_ROOT/<class>/<image>), e.g. the one that
`python3 benches/make_data.py imagefolder --out DATA_ROOT` writes. The clock starts
before the worker processes do and stops when the last image is decoded. Prints
images/s, or with --json one line: {"what", "images", "wall_s", "images_per_s",
"mpix_per_s"}.
"""
import argparse
import json
import os
import time
from multiprocessing import Pool

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


def image_paths(root):
    """Every image under root's class folders, classes and files in sorted order."""
    paths = []
    for cls in sorted(os.listdir(root)):
        cls_dir = os.path.join(root, cls)
        if not os.path.isdir(cls_dir):
            continue
        for dirpath, dirnames, files in os.walk(cls_dir):
            dirnames.sort()
            paths += [os.path.join(dirpath, f) for f in sorted(files)
                      if f.lower().endswith(IMAGE_EXTS)]
    return paths


def decode(path):
    """Decodes one file to RGB; returns its pixel count."""
    from PIL import Image
    with Image.open(path) as im:
        rgb = im.convert("RGB")  # convert() loads (decodes) the image
    return rgb.width * rgb.height


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", help="ImageFolder tree")
    ap.add_argument("--workers", type=int, default=2, help="decoding processes (default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    a = ap.parse_args()
    paths = image_paths(a.root)
    if not paths:
        raise SystemExit(f"no images in class folders under {a.root}")
    start = time.perf_counter()
    with Pool(a.workers) as pool:
        pixels = sum(pool.imap_unordered(decode, paths, chunksize=8))
    wall = time.perf_counter() - start
    result = {"what": "pillow-decode", "images": len(paths), "wall_s": round(wall, 3),
              "images_per_s": round(len(paths) / wall, 1),
              "mpix_per_s": round(pixels / wall / 1e6, 1)}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"decoded {len(paths)} images in {wall:.2f} s with {a.workers} processes: "
              f"{result['images_per_s']:.0f} images/s, {result['mpix_per_s']:.1f} Mpixel/s")


if __name__ == "__main__":
    main()
