#!/usr/bin/env python3
"""The Python package against the CLI and against torchvision, on the canonical eval
pipeline (ImageFolder -> Decode -> Resize(256) -> CenterCrop(224) -> Normalize -> HWC2CHW ->
TypeCast(int32) -> batch(32, drop_remainder)), alternating runs, one epoch each, every
contender in a fresh process:

* `bench`    -- `imgfeed bench pipelines/resnet50_eval.toml --workers W --json`
* `loader`   -- a Python loop over `imgfeed.Loader(...)` touching one value per batch
* `dataset`  -- the same loop over MindSpore's `create_dataset` with imgfeed's imports
* `torch`    -- torchvision `ImageFolder` + the same transforms (PIL path) in
                `DataLoader(num_workers=W, batch_size=32, drop_last=True)` (skipped with a
                message when torch/torchvision are not importable)

Prints each round's images/s and peak RSS of the main process, the medians and the ratios
(loader / bench, loader / torch, computed per round); then, in one more run of each Python
contender, the peak PSS of its whole process tree (DataLoader's worker processes
included, shared pages counted once).

  python3 benches/python_loader.py DATA_ROOT [--rounds 5] [--workers 2] [--binary target/release/imgfeed]

Run it with a Python that has the package installed (`pip install ./python`), and torch +
torchvision for the last contender. Timing: from the first request for a batch to the last
batch of the epoch; listing the dataset is not timed (as `imgfeed bench` does not time it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EVAL = os.path.join(ROOT, "pipelines", "resnet50_eval.toml")
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class TreeMemory:
    """Peak memory of this process and its child processes (DataLoader's workers), as the
    sum of their proportional set sizes (PSS: a page shared by k processes counts 1/k in
    each, so the sum is the tree's real footprint), sampled every 20 ms."""

    def __init__(self) -> None:
        import threading

        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _pss_kb(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    @staticmethod
    def _children(pid: int) -> list:
        out = []
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out.extend(int(c) for c in f.read().split())
        except OSError:
            pass
        return out

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.02):
            total = self._pss_kb(me) + sum(self._pss_kb(c) for c in self._children(me))
            self.peak_kb = max(self.peak_kb, total)

    def stop_mb(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_kb / 1024.0


def timed_epoch(batches, mem) -> dict:
    """One epoch of (images, labels), touching one value a batch, timed from the first
    request for a batch to the last."""
    n, touched = 0, 0.0
    t0 = time.perf_counter()
    for images, labels in batches:
        touched += float(images[0, 0, 0, 0])
        n += len(labels)
    secs = time.perf_counter() - t0
    return {"images": n, "secs": secs, "peak_rss_mb": peak_rss_mb(), "peak_pss_mb": mem.stop_mb() if mem else None}


def child_loader(data: str, workers: int, pss: bool) -> dict:
    import imgfeed

    mem = TreeMemory() if pss else None
    loader = imgfeed.Loader(EVAL, data=data, workers=workers)
    return timed_epoch(loader, mem)


def child_dataset(data: str, workers: int, pss: bool) -> dict:
    import imgfeed.dataset as ds
    import imgfeed.dataset.transforms as C2
    import imgfeed.dataset.vision as C
    from imgfeed import dtype as mstype

    data_set = ds.ImageFolderDataset(data, num_parallel_workers=workers, shuffle=False)
    trans = [C.Decode(), C.Resize(256), C.CenterCrop(224), C.Normalize(mean=MEAN, std=STD), C.HWC2CHW()]
    data_set = data_set.map(operations=trans, input_columns="image", num_parallel_workers=workers)
    data_set = data_set.map(operations=C2.TypeCast(mstype.int32), input_columns="label")
    data_set = data_set.batch(32, drop_remainder=True)
    mem = TreeMemory() if pss else None
    it = data_set.create_tuple_iterator(output_numpy=True, num_epochs=1)
    return timed_epoch(it, mem)


def child_torch(data: str, workers: int, pss: bool) -> dict:
    import torch
    from torchvision import datasets, transforms

    torch.set_num_threads(1)
    tf = transforms.Compose([
        transforms.Resize(256),
        transforms.CenterCrop(224),
        transforms.ToTensor(),
        transforms.Normalize(mean=[m / 255 for m in MEAN], std=[s / 255 for s in STD]),
    ])
    dataset = datasets.ImageFolder(data, transform=tf)
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=False, num_workers=workers, drop_last=True)
    mem = TreeMemory() if pss else None
    # The workers are separate processes: peak_pss_mb is the whole tree's.
    return timed_epoch(loader, mem)


CHILDREN = {"loader": child_loader, "dataset": child_dataset, "torch": child_torch}


def run_child(kind: str, data: str, workers: int, pss: bool = False) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, data, "--workers", str(workers)] + (["--pss"] if pss else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    r["images_per_s"] = r["images"] / r["secs"]
    return r


def run_bench(binary: str, data: str, workers: int) -> dict:
    out = subprocess.run([binary, "bench", EVAL, "--data", data, "--workers", str(workers), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "imgfeed"))
    ap.add_argument("--child", choices=sorted(CHILDREN))
    ap.add_argument("--pss", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(CHILDREN[a.child](a.data, a.workers, a.pss)))
        return
    contenders = ["bench", "loader", "dataset", "torch"]
    # Checked in a child: importing torch here would grow this process, and Linux carries a
    # parent's peak RSS over into the children it starts (fork keeps it, exec preserves it).
    probe = subprocess.run([sys.executable, "-c", "import torch, torchvision"], capture_output=True)
    if probe.returncode != 0:
        print("torch/torchvision not importable: the DataLoader comparison is skipped", flush=True)
        contenders.remove("torch")
    results: dict = {c: [] for c in contenders}
    for i in range(a.rounds):
        line = []
        for c in contenders:
            r = run_bench(a.binary, a.data, a.workers) if c == "bench" else run_child(c, a.data, a.workers)
            results[c].append(r)
            line.append(f"{c} {r['images_per_s']:.0f}/s (RSS {r['peak_rss_mb']:.0f} MB)")
        print(f"round {i + 1}: " + ", ".join(line), flush=True)

    def med(c: str, key: str = "images_per_s") -> float:
        return statistics.median(r[key] for r in results[c])

    for c in contenders:
        print(f"median {c}: {med(c):.0f} images/s, peak RSS {med(c, 'peak_rss_mb'):.0f} MB")
    # Memory of the whole process tree, in runs of their own: sampling /proc costs the
    # workers time (it takes the lock their page faults need), so no throughput is quoted.
    for c in contenders:
        if c != "bench":
            r = run_child(c, a.data, a.workers, pss=True)
            print(f"memory {c}: peak PSS of the process tree {r['peak_pss_mb']:.0f} MB")
    for num, den in (("loader", "bench"), ("dataset", "bench"), ("loader", "torch"), ("dataset", "torch")):
        if num in results and den in results:
            ratios = [x["images_per_s"] / y["images_per_s"] for x, y in zip(results[num], results[den])]
            print(f"{num} / {den}: median {statistics.median(ratios):.3f} "
                  f"(per round {' '.join(f'{q:.3f}' for q in ratios)})")


if __name__ == "__main__":
    main()
