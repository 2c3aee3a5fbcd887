#!/usr/bin/env python3
"""imgfeed on Ray Data against imgfeed.Loader in one process and against Ray Data's own PIL
path, on the canonical eval pipeline (Decode -> Resize(256) -> CenterCrop(224) ->
Normalize -> HWC2CHW, batches of 32), one epoch per run, alternating rounds:

* `loader`       -- `imgfeed.Loader(pipeline, data=DIR, workers=CPUS)` in the driver process
                    (as many engine threads as the cluster has CPUs; the cluster idles)
* `ray`          -- `imgfeed.ray.read(pipeline, data=DIR)` (rows = batches, float32),
                    consumed with `imgfeed.ray.batches(ds)` (each block's batches as views)
* `ray-numpy`    -- the same consumed with `imgfeed.ray.batches(ds.iter_batches(batch_size=None))`
                    (Ray's numpy format: each block's batches concatenated into one array)
* `ray-queue2`   -- `ray` with the read tasks' engine queue left at the pipeline's 2 batches
                    (`ImgfeedDatasource.hold_block_batches = False`) instead of a Ray block's
* `ray-samples`  -- the same with `rows="samples"`, consumed with `iter_batches(batch_size=32)`
* `ray-uint8`    -- `uint8=True` (no normalize in the engine; the consumer's map is not timed)
* `ray-pil`      -- Ray Data's `read_images(DIR, mode="RGB")` + `map_batches` doing the
                    same transforms with Pillow (torchvision's Resize(256) is Pillow's
                    bilinear resize of the shorter side to 256), `iter_batches(batch_size=32)`

on a `ray.cluster_utils.Cluster` on this machine: `--nodes 1` (one node of `--cpus` CPUs:
the "one node" comparison) or `--nodes 2` (`--cpus` split over two nodes, whose batches
cross between the nodes' object stores), each with a `--object-store-mb` object store. Run
it as root inside a network namespace holding only loopback (Ray binds the machine's
interface address otherwise):

  unshare -n sh -c 'ip link set lo up && exec python benches/ray_read.py DIR [--nodes 1] [--rounds 3]'

with a Python that has the package and `ray[data]` (`bash python/envs.sh ray`, then install
the wheel). Prints, per run, images/s (first request to last batch, Ray's planning and task
start-up included) and the CPU seconds each part of the cluster spent in that run (from
/proc: the driver, the Ray workers running the read tasks, the raylets, the GCS, Ray's
agents), then medians. `--memory-rounds N` (default 1) then runs each contender N times
more while sampling, every 100 ms, the summed PSS (`/proc/PID/smaps_rollup`: shared pages,
the object store's included, split between the processes mapping them, so counted once)
of the driver and every process it started (the cluster) and the object store's bytes in
use on each node (the raylets' `GetNodeStats`, which needs `grpcio`): their peaks, the
PSS without its shared-memory part (`Pss_Shmem`: the object stores' pages, which stay
allocated once touched, so the cluster's PSS idle before a run holds what earlier runs
touched), and the cluster's PSS idle before the run. Sampling costs CPU, so those runs are
not timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "pipelines" / "resnet50_eval.toml"
MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]
TICK = os.sysconf("SC_CLK_TCK")


def _children() -> Dict[int, List[int]]:
    kids: Dict[int, List[int]] = defaultdict(list)
    for e in Path("/proc").iterdir():
        if e.name.isdigit():
            try:
                stat = (e / "stat").read_text()
                ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids[ppid].append(int(e.name))
    return kids


def cluster_pids() -> List[int]:
    """This process and every process it started, transitively (the cluster's GCS,
    raylets, agents and workers: ray.cluster_utils.Cluster starts them from here)."""
    kids = _children()
    out, todo = [], [os.getpid()]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, ()))
    return out


def role(pid: int) -> str:
    """What a cluster process is, from its command line."""
    if pid == os.getpid():
        return "driver"
    try:
        cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    first = cmd[0].decode(errors="replace")
    if first.startswith("ray::"):
        return "workers"
    name = os.path.basename(first)
    if name in ("gcs_server", "raylet"):
        return name
    return "agents"  # dashboard, its agents, the log monitor, the runtime-env agent


def cpu_by_role() -> Dict[str, float]:
    """CPU seconds (user + system) each role's processes have used so far."""
    out: Dict[str, float] = defaultdict(float)
    for pid in cluster_pids():
        try:
            stat = (Path("/proc") / str(pid) / "stat").read_text()
            f = stat[stat.rindex(")") + 2:].split()
            out[role(pid)] += (int(f[11]) + int(f[12])) / TICK
        except (OSError, ValueError, IndexError):
            continue
    return out


def pss_bytes() -> Tuple[int, int]:
    """(summed PSS, the shared-memory part of it: the object store's pages, /dev/shm)."""
    total = shmem = 0
    for pid in cluster_pids():
        try:
            for line in (Path("/proc") / str(pid) / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                elif line.startswith("Pss_Shmem:"):
                    shmem += int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
    return total, shmem


def store_used_bytes() -> int:
    """Bytes in use in the object stores of all alive nodes."""
    import ray
    from ray._private.internal_api import node_stats

    total = 0
    for n in ray.nodes():
        if n["Alive"]:
            s = node_stats(n["NodeManagerAddress"], n["NodeManagerPort"], include_memory_info=False)
            total += s.store_stats.object_store_bytes_used
    return total


class Peaks:
    """Samples the cluster's summed PSS and the object stores' used bytes every 100 ms."""

    def __init__(self) -> None:
        self.pss = self.private = self.store = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            pss, shmem = pss_bytes()
            self.pss = max(self.pss, pss)
            self.private = max(self.private, pss - shmem)
            self.store = max(self.store, store_used_bytes())
            time.sleep(0.1)

    def __enter__(self) -> "Peaks":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def run_loader(data: str, workers: int):
    import imgfeed

    t = time.perf_counter()
    loader = imgfeed.Loader(EVAL, data=data, workers=workers)
    n = nbytes = 0
    for images, labels in loader:
        float(images[0, 0, 0, 0])
        n += len(images)
        nbytes += images.nbytes
    return n, nbytes, time.perf_counter() - t


def run_ray(data: str, parallelism, rows: str = "batches", uint8: bool = False, numpy_blocks: bool = False,
            hold_block: bool = True):
    import imgfeed.ray

    t = time.perf_counter()
    imgfeed.ray.ImgfeedDatasource.hold_block_batches = hold_block
    try:
        ds = imgfeed.ray.read(EVAL, data=data, parallelism=parallelism, rows=rows, uint8=uint8)
    finally:
        imgfeed.ray.ImgfeedDatasource.hold_block_batches = True
    n = nbytes = 0
    if rows == "batches":
        # the blocks' batches as views (the default), or Ray's numpy blocks (a block's batches
        # concatenated into one array first)
        it = ds.iter_batches(batch_size=None) if numpy_blocks else ds
        for images, labels, _ in imgfeed.ray.batches(it):
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


ROLES = ("driver", "workers", "raylet", "gcs_server", "agents")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memory-rounds", type=int, default=1)
    ap.add_argument("--nodes", type=int, choices=(1, 2), default=1)
    ap.add_argument("--cpus", type=int, default=2, help="the cluster's CPUs (split over the nodes) and the Loader's workers")
    ap.add_argument("--object-store-mb", type=int, default=2000,
                    help="each node's object store (ray.cluster_utils.Cluster's default, about 150 MB, spills a float32 epoch to disk)")
    ap.add_argument("--parallelism", type=int, default=None, help="imgfeed.ray.read's read tasks (its default otherwise)")
    ap.add_argument("--only", default="loader,ray,ray-samples,ray-uint8,ray-pil")
    args = ap.parse_args()
    import socket

    ifaces = sorted(n for _, n in socket.if_nameindex())
    if ifaces != ["lo"]:
        print(f"run inside a loopback-only network namespace (interfaces here: {ifaces}); see the docstring", file=sys.stderr)
        return 2
    if args.cpus % args.nodes:
        print("--cpus must split evenly over --nodes", file=sys.stderr)
        return 2
    import ray
    from ray.cluster_utils import Cluster

    node = {"num_cpus": args.cpus // args.nodes, "object_store_memory": args.object_store_mb * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args=node)
    try:
        for _ in range(args.nodes - 1):
            cluster.add_node(**node)
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        cluster.wait_for_nodes(timeout=60)
        import logging

        logging.getLogger("ray.data").setLevel(logging.WARNING)
        ray.data.DataContext.get_current().enable_progress_bars = False
        contenders = {
            "loader": lambda: run_loader(args.data, args.cpus),
            "ray": lambda: run_ray(args.data, args.parallelism),
            "ray-numpy": lambda: run_ray(args.data, args.parallelism, numpy_blocks=True),
            "ray-queue2": lambda: run_ray(args.data, args.parallelism, hold_block=False),
            "ray-samples": lambda: run_ray(args.data, args.parallelism, rows="samples"),
            "ray-uint8": lambda: run_ray(args.data, args.parallelism, uint8=True),
            "ray-pil": lambda: run_ray_pil(args.data),
        }
        names = [n for n in args.only.split(",") if n]
        print(f"{args.nodes} node(s), {args.cpus} CPUs, {args.object_store_mb} MB object store per node; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        # one warm-up run each: Ray's workers start and import, the page cache fills
        for name in names:
            contenders[name]()
        rates: Dict[str, List[float]] = {n: [] for n in names}
        cpus: Dict[str, Dict[str, List[float]]] = {n: defaultdict(list) for n in names}
        for r in range(args.rounds):
            for name in names:
                before = cpu_by_role()
                n, nbytes, dt = contenders[name]()
                after = cpu_by_role()
                rates[name].append(n / dt)
                spent = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in ROLES}
                for k, v in spent.items():
                    cpus[name][k].append(v)
                parts = " ".join(f"{k} {v:.2f}" for k, v in spent.items())
                print(f"round {r} {name:12s} {n} images {n / dt:8.1f} images/s {dt:6.2f} s  {nbytes / 1e6:6.0f} MB of images"
                      f"  CPU s: {parts}  (load {os.getloadavg()[0]:.1f})", flush=True)
        print("\nmedians:")
        base = statistics.median(rates["loader"]) if "loader" in rates else None
        for name in names:
            med = statistics.median(rates[name])
            ratio = f"  {med / base:.2f}x loader" if base else ""
            parts = " ".join(f"{k} {statistics.median(v):.2f}" for k, v in cpus[name].items())
            print(f"  {name:12s} {med:8.1f} images/s{ratio}  CPU s: {parts}")
        if args.memory_rounds:
            print("\npeak memory (sampled every 100 ms; runs not timed):")
            for name in names:
                for _ in range(args.memory_rounds):
                    time.sleep(1.0)
                    idle, idle_shm = pss_bytes()
                    with Peaks() as peak:
                        contenders[name]()
                    print(f"  {name:12s} cluster + driver PSS: idle {idle / 1e6:6.0f} MB, peak {peak.pss / 1e6:6.0f} MB; "
                          f"without shared memory: idle {(idle - idle_shm) / 1e6:6.0f} MB, peak {peak.private / 1e6:6.0f} MB; "
                          f"object store in use, peak {peak.store / 1e6:6.0f} MB", flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
