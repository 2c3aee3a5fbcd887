#!/usr/bin/env python3
"""Runs `imgfeed bench --json` and a Python reference alternately, pair after pair, and
prints each pair's images/s and the median ratio (the machine is noisy: one run of each,
interleaved, cancels slow drifts).

  python3 benches/ratio.py imagefolder DATA_ROOT [--pairs 7] [--workers 2]
  python3 benches/ratio.py cifar DATA_ROOT/cifar-10-batches-bin [--pairs 7]

imagefolder compares pipelines/resnet50_eval.toml with ../shared/bench/decode_limit.py
(decode only, libjpeg-turbo through Pillow); cifar compares pipelines/cifar10_eval.toml
(--usage train) with ../shared/bench/cifar_numpy.py. Build first:
cargo build --release
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, "..", "shared", "bench")


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["imagefolder", "cifar"])
    ap.add_argument("data")
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "imgfeed"))
    ap.add_argument("--pipeline", default=None,
                    help="imagefolder: the pipeline to time (default pipelines/resnet50_eval.toml)")
    a = ap.parse_args()
    if a.what == "imagefolder":
        ours = [a.binary, "bench", a.pipeline or os.path.join(ROOT, "pipelines", "resnet50_eval.toml"),
                "--data", a.data, "--workers", str(a.workers), "--json"]
        ref = [sys.executable, os.path.join(SHARED, "decode_limit.py"), a.data, "--workers", str(a.workers)]
    else:
        ours = [a.binary, "bench", os.path.join(ROOT, "pipelines", "cifar10_eval.toml"),
                "--data", a.data, "--usage", "train", "--workers", str(a.workers), "--json", "--no-profile"]
        ref = [sys.executable, os.path.join(SHARED, "cifar_numpy.py"), a.data]
    ratios = []
    for i in range(a.pairs):
        r = run_json(ref)
        o = run_json(ours)
        ratio = o["images_per_s"] / r["images_per_s"]
        ratios.append(ratio)
        print(f"pair {i + 1}: imgfeed {o['images_per_s']:.0f}/s (peak RSS {o.get('peak_rss_mb')} MB), "
              f"reference {r['images_per_s']:.0f}/s, ratio {ratio:.2f}", flush=True)
    print(f"median ratio {statistics.median(ratios):.2f} over {len(ratios)} pairs "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
