#!/usr/bin/env python3
"""imgfeed on Ray Data against imgfeed.Loader in one process and against Ray Data's own PIL
path, on the canonical eval pipeline (Decode -> Resize(256) -> CenterCrop(224) ->
Normalize -> HWC2CHW, batches of 32), one epoch per run, alternating rounds:

* `loader`       -- `imgfeed.Loader(pipeline, data=DIR, workers=2)` in the driver process
* `ray`          -- `imgfeed.ray.read(pipeline, data=DIR)` (rows = batches, float32),
                    consumed with `iter_batches(batch_size=1)`
* `ray-samples`  -- the same with `rows="samples"`, consumed with `iter_batches(batch_size=32)`
* `ray-uint8`    -- `uint8=True` (no normalize in the engine; the consumer's map is not timed)
* `ray-pil`      -- Ray Data's `read_images(DIR, mode="RGB")` + `map_batches` doing the
                    same transforms with Pillow (torchvision's Resize(256) is Pillow's
                    bilinear resize of the shorter side to 256), `iter_batches(batch_size=32)`

on a two-node `ray.cluster_utils.Cluster` of one CPU per node (`--cpus-per-node`) and a 2 GB
object store per node (`--object-store-mb`) on this machine. Run it as root inside a network namespace holding only loopback (Ray binds the
machine's interface address otherwise):

  unshare -n sh -c 'ip link set lo up && exec python benches/ray_read.py DIR [--rounds 3]'

with a Python that has the package and `ray[data]` (`bash python/envs.sh ray`, then install
the wheel). Prints, per run, images/s (first request to last batch, Ray's planning
included), the image bytes the consumer received, and the peak of the summed RSS of every
process of the machine whose command line names ray (the cluster; shared pages counted in
each process: an upper bound), with the driver's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "pipelines" / "resnet50_eval.toml"
MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


class PeakRss:
    """Samples the summed RSS of the cluster's processes (and this one) every 50 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._page = os.sysconf("SC_PAGE_SIZE")

    def _sample(self) -> int:
        total = 0
        me = str(os.getpid())
        for e in Path("/proc").iterdir():
            if not e.name.isdigit():
                continue
            try:
                cmd = (e / "cmdline").read_bytes()
                if e.name != me and b"ray" not in cmd:
                    continue
                total += int((e / "statm").read_text().split()[1]) * self._page
            except (OSError, ValueError, IndexError):
                continue
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            time.sleep(0.05)

    def __enter__(self) -> "PeakRss":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def run_loader(data: str, workers: int):
    import imgfeed

    loader = imgfeed.Loader(EVAL, data=data, workers=workers)
    n = nbytes = 0
    t = time.perf_counter()
    for images, labels in loader:
        float(images[0, 0, 0, 0])
        n += len(images)
        nbytes += images.nbytes
    return n, nbytes, time.perf_counter() - t


def run_ray(data: str, parallelism, rows: str = "batches", uint8: bool = False):
    import imgfeed.ray

    t = time.perf_counter()
    ds = imgfeed.ray.read(EVAL, data=data, parallelism=parallelism, rows=rows, uint8=uint8)
    n = nbytes = 0
    if rows == "batches":
        for images, labels, _ in imgfeed.ray.batches(ds.iter_batches(batch_size=1)):
            float(images[0, 0, 0, 0])
            n += len(images)
            nbytes += images.nbytes
    else:
        for b in ds.iter_batches(batch_size=32, drop_last=True):
            float(b["image"][0, 0, 0, 0])
            n += len(b["image"])
            nbytes += b["image"].nbytes
    return n, nbytes, time.perf_counter() - t


def pil_transform(batch):
    import numpy as np
    from PIL import Image

    mean = np.array(MEAN, np.float32)
    inv = 1 / np.array(STD, np.float32)
    out = np.empty((len(batch["image"]), 3, 224, 224), np.float32)
    for i, arr in enumerate(batch["image"]):
        img = Image.fromarray(arr)
        w, h = img.size
        if w <= h:
            size = (256, int(256 * h / w))
        else:
            size = (int(256 * w / h), 256)
        img = img.resize(size, Image.BILINEAR)
        left, top = int(round((size[0] - 224) / 2.0)), int(round((size[1] - 224) / 2.0))
        img = img.crop((left, top, left + 224, top + 224))
        out[i] = ((np.asarray(img, np.float32) - mean) * inv).transpose(2, 0, 1)
    return {"image": out, "label": np.zeros(len(out), np.int32)}


def run_ray_pil(data: str):
    import ray.data

    t = time.perf_counter()
    ds = ray.data.read_images(data, mode="RGB").map_batches(pil_transform, batch_size=32)
    n = nbytes = 0
    for b in ds.iter_batches(batch_size=32, drop_last=True):
        float(b["image"][0, 0, 0, 0])
        n += len(b["image"])
        nbytes += b["image"].nbytes
    return n, nbytes, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="the Loader's workers (default 2)")
    ap.add_argument("--cpus-per-node", type=int, default=1)
    ap.add_argument("--object-store-mb", type=int, default=2000,
                    help="each node's object store (ray.cluster_utils.Cluster's default, about 150 MB, spills a float32 epoch to disk)")
    ap.add_argument("--parallelism", type=int, default=None, help="imgfeed.ray.read's read tasks (Ray's choice otherwise)")
    ap.add_argument("--only", default="loader,ray,ray-samples,ray-uint8,ray-pil")
    args = ap.parse_args()
    import socket

    ifaces = sorted(n for _, n in socket.if_nameindex())
    if ifaces != ["lo"]:
        print(f"run inside a loopback-only network namespace (interfaces here: {ifaces}); see the docstring", file=sys.stderr)
        return 2
    import ray
    from ray.cluster_utils import Cluster

    node = {"num_cpus": args.cpus_per_node, "object_store_memory": args.object_store_mb * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args=node)
    try:
        cluster.add_node(**node)
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        cluster.wait_for_nodes(timeout=60)
        ray.data.DataContext.get_current().enable_progress_bars = False
        contenders = {
            "loader": lambda: run_loader(args.data, args.workers),
            "ray": lambda: run_ray(args.data, args.parallelism),
            "ray-samples": lambda: run_ray(args.data, args.parallelism, rows="samples"),
            "ray-uint8": lambda: run_ray(args.data, args.parallelism, uint8=True),
            "ray-pil": lambda: run_ray_pil(args.data),
        }
        names = [n for n in args.only.split(",") if n]
        # one warm-up run each: Ray's workers start and import, the page cache fills
        for name in names:
            contenders[name]()
        rates = {n: [] for n in names}
        peaks = {n: [] for n in names}
        for r in range(args.rounds):
            for name in names:
                with PeakRss() as peak:
                    n, nbytes, dt = contenders[name]()
                rates[name].append(n / dt)
                peaks[name].append(peak.peak)
                print(f"round {r} {name:12s} {n} images {n / dt:8.1f} images/s  {nbytes / 1e6:8.1f} MB of images"
                      f"  peak RSS (cluster + driver) {peak.peak / 1e6:7.0f} MB", flush=True)
        print("\nmedians:")
        base = statistics.median(rates["loader"]) if "loader" in rates else None
        for name in names:
            med = statistics.median(rates[name])
            ratio = f"  {med / base:.2f}x loader" if base else ""
            print(f"  {name:12s} {med:8.1f} images/s  peak RSS {statistics.median(peaks[name]) / 1e6:7.0f} MB{ratio}")
    finally:
        ray.shutdown()
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
