#!/usr/bin/env python3
"""The numpy reference for the CIFAR-10 pipeline of BENCHMARKS.md: what
pipelines/cifar10_eval.toml does (rescale 1/255, normalize with the CIFAR mean and std,
HWC -> CHW float32, int32 labels, batches of 128, the last partial batch dropped), done
by numpy in one thread: the records memory-mapped, one multiply and one add per batch.

  pip install numpy
  python3 benches/cifar_numpy.py DIR [--usage train|test|all] [--json]

DIR holds the binary batches (data_batch_1.bin .. data_batch_5.bin, test_batch.bin), e.g.
DATA/cifar10/cifar-10-batches-bin from `python3 benches/make_data.py cifar --out
DATA/cifar10`. The records of the chosen files are taken in file order as one sequence
(as the engine's `--usage train` does), so a batch may span two files. Prints images/s,
or with --json one line: {"what", "images", "wall_s", "images_per_s"}.
"""
import argparse
import json
import os
import time

import numpy as np

RECORD = 1 + 3 * 32 * 32
MEAN = np.array([0.4914, 0.4822, 0.4465], np.float32)
STD = np.array([0.2023, 0.1994, 0.2010], np.float32)
FILES = {"train": [f"data_batch_{k}.bin" for k in range(1, 6)], "test": ["test_batch.bin"]}
FILES["all"] = FILES["train"] + FILES["test"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", help="folder of the binary CIFAR-10 batches")
    ap.add_argument("--usage", choices=sorted(FILES), default="train", help="default: %(default)s")
    ap.add_argument("--batch", type=int, default=128, help="default: %(default)s")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    a = ap.parse_args()
    bs = a.batch
    # (x / 255 - mean) / std as x * scale + shift, per channel, broadcast over 32 x 32
    scale = (1.0 / (255.0 * STD)).reshape(1, 3, 1, 1).astype(np.float32)
    shift = (-MEAN / STD).reshape(1, 3, 1, 1).astype(np.float32)
    images = np.empty((bs, 3, 32, 32), np.float32)
    labels = np.empty(bs, np.int32)
    checksum = 0.0  # keeps each batch's results live

    start = time.perf_counter()
    files = [np.memmap(os.path.join(a.root, n), np.uint8, "r").reshape(-1, RECORD)
             for n in FILES[a.usage]]
    ends = np.cumsum([len(f) for f in files])  # global index one past each file's last record
    total = int(ends[-1])
    done = 0
    for lo in range(0, total - bs + 1, bs):
        hi = lo + bs
        k = int(np.searchsorted(ends, lo, side="right"))
        base = int(ends[k - 1]) if k else 0
        if hi <= ends[k]:
            rec = files[k][lo - base:hi - base]
        else:  # the batch spans two files: gather it
            rec = np.concatenate([files[k][lo - base:], files[k + 1][:hi - int(ends[k])]])
        labels[:] = rec[:, 0]
        np.multiply(rec[:, 1:].reshape(bs, 3, 32, 32), scale, out=images)
        images += shift
        checksum += float(images[-1, 2, 31, 31]) + int(labels[-1])
        done += bs
    wall = time.perf_counter() - start

    result = {"what": "numpy-cifar10-eval", "images": done, "wall_s": round(wall, 4),
              "images_per_s": round(done / wall, 1)}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"{done} images in {wall:.3f} s: {result['images_per_s']:.0f} images/s "
              f"(checksum {checksum:.3f})")


if __name__ == "__main__":
    main()
