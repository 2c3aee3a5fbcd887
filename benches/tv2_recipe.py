#!/usr/bin/env python3
"""torchvision's ResNet-50 v2 training recipe: imgfeed against torchvision's DataLoader,
alternating runs, one epoch each, every contender in a fresh process:

* `imgfeed` -- `imgfeed bench pipelines/resnet50_train_tv2.toml --workers W --json`:
  RandomResizedCrop(176) -> flip -> TrivialAugmentWide -> Normalize -> CHW ->
  RandomErasing(0.1) -> batch 128 -> one_hot(1000, smoothing 0.1) -> MixUp(0.2)/CutMix(1.0)
* `torch`   -- torchvision's reference recipe: `ImageFolder` + (PIL) RandomResizedCrop(176),
  RandomHorizontalFlip, TrivialAugmentWide, PILToTensor, ConvertImageDtype(float),
  Normalize, RandomErasing(0.1) in `DataLoader(num_workers=W, batch_size=128,
  drop_last=True)`, with `v2.RandomChoice([v2.MixUp(alpha=0.2), v2.CutMix(alpha=1.0)])`
  applied to each batch in the collate function (in the worker processes, as torchvision's
  `references/classification/train.py` does; label smoothing is in its loss).

Prints each round's images/s, the medians and the ratio imgfeed / torch.

  python3 benches/tv2_recipe.py DATA_ROOT [--rounds 3] [--workers 2] [--binary target/release/imgfeed]

Needs torch and torchvision for the second contender (skipped with a message without them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

TORCH = textwrap.dedent(
    """
    import sys, time, torch
    from torch.utils.data import DataLoader, default_collate
    from torchvision import datasets, transforms as T
    from torchvision.transforms import v2
    root, workers = sys.argv[1], int(sys.argv[2])
    tf = T.Compose([
        T.RandomResizedCrop(176), T.RandomHorizontalFlip(), T.TrivialAugmentWide(),
        T.PILToTensor(), T.ConvertImageDtype(torch.float),
        T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        T.RandomErasing(p=0.1),
    ])
    data = datasets.ImageFolder(root, tf)
    mix = v2.RandomChoice([v2.MixUp(alpha=0.2, num_classes=1000), v2.CutMix(alpha=1.0, num_classes=1000)])
    def collate(batch):
        return mix(*default_collate(batch))
    loader = DataLoader(data, batch_size=128, shuffle=True, num_workers=workers, drop_last=True,
                        collate_fn=collate, persistent_workers=False)
    t0 = None
    n = 0
    for x, y in loader:
        if t0 is None:
            t0 = time.perf_counter()  # from the first batch: the workers' start is not timed
            continue
        n += x.shape[0]
        float(x[0, 0, 0, 0])
    dt = time.perf_counter() - t0
    print(n / dt)
    """
)


def run_imgfeed(binary: str, data: str, workers: int) -> float:
    out = subprocess.run(
        [binary, "bench", str(REPO / "pipelines" / "resnet50_train_tv2.toml"), "--data", data,
         "--workers", str(workers), "--json"],
        check=True, capture_output=True, text=True,
    ).stdout
    return float(json.loads(out)["images_per_s"])


def run_torch(data: str, workers: int) -> float | None:
    p = subprocess.run([sys.executable, "-c", TORCH, data, str(workers)], capture_output=True, text=True)
    if p.returncode != 0:
        if "ModuleNotFoundError" in p.stderr:
            return None
        raise RuntimeError(p.stderr[-2000:])
    return float(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--binary", default=str(REPO / "target" / "release" / "imgfeed"))
    a = ap.parse_args()
    ours, theirs = [], []
    for r in range(a.rounds):
        ours.append(run_imgfeed(a.binary, a.data, a.workers))
        t = run_torch(a.data, a.workers)
        if t is None:
            print("torch/torchvision are not importable: the DataLoader contender is skipped")
        else:
            theirs.append(t)
        print(f"round {r}: imgfeed {ours[-1]:.1f} images/s" + (f", torch {theirs[-1]:.1f}" if theirs else ""))
        time.sleep(1)
    mo = statistics.median(ours)
    print(f"imgfeed median {mo:.1f} images/s")
    if theirs:
        mt = statistics.median(theirs)
        print(f"torch DataLoader median {mt:.1f} images/s; ratio {mo / mt:.2f}x")


if __name__ == "__main__":
    main()
