#!/usr/bin/env python3
"""Runs `imgfeed bench --json` and a Python reference alternately, pair after pair, and
prints each pair's images/s and the median ratio (the machine is noisy: one run of each,
interleaved, cancels slow drifts).

  python3 benches/ratio.py imagefolder DATA/imagenet_like [--pairs 7] [--workers 2]
  python3 benches/ratio.py cifar DATA/cifar10/cifar-10-batches-bin [--pairs 7]

imagefolder compares pipelines/resnet50_eval.toml with benches/decode_limit.py (decode
only, libjpeg-turbo through Pillow); cifar compares pipelines/cifar10_eval.toml (--usage
train) with benches/cifar_numpy.py. The data: `python3 benches/make_data.py imagefolder
--out DATA/imagenet_like` and `python3 benches/make_data.py cifar --out DATA/cifar10`.
Build first: cargo build --release
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


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
    ap.add_argument("--pipeline", action="append", default=None,
                    help="imagefolder: a pipeline to time (default pipelines/resnet50_eval.toml); "
                         "give several to alternate them with the reference in every pair")
    a = ap.parse_args()
    if a.what == "imagefolder":
        pipelines = a.pipeline or [os.path.join(ROOT, "pipelines", "resnet50_eval.toml")]
        ours = [[a.binary, "bench", p, "--data", a.data, "--workers", str(a.workers), "--json"] for p in pipelines]
        ref = [sys.executable, os.path.join(HERE, "decode_limit.py"), a.data, "--workers", str(a.workers), "--json"]
    else:
        pipelines = [os.path.join(ROOT, "pipelines", "cifar10_eval.toml")]
        ours = [[a.binary, "bench", pipelines[0], "--data", a.data, "--usage", "train", "--workers", str(a.workers),
                 "--json", "--no-profile"]]
        ref = [sys.executable, os.path.join(HERE, "cifar_numpy.py"), a.data, "--json"]
    ratios = [[] for _ in ours]
    run_json(ref)  # warm-up, not counted: the first run reads the files into the page cache
    for i in range(a.pairs):
        r = run_json(ref)
        line = [f"reference {r['images_per_s']:.0f}/s"]
        for k, cmd in enumerate(ours):
            o = run_json(cmd)
            ratio = o["images_per_s"] / r["images_per_s"]
            ratios[k].append(ratio)
            line.append(f"{os.path.basename(pipelines[k])} {o['images_per_s']:.0f}/s "
                        f"(peak RSS {o.get('peak_rss_mb')} MB, {o.get('jpeg_decoder')}) ratio {ratio:.2f}")
        print(f"pair {i + 1}: " + "; ".join(line), flush=True)
    for k, p in enumerate(pipelines):
        rs = ratios[k]
        print(f"{os.path.basename(p)}: median ratio {statistics.median(rs):.2f} over {len(rs)} pairs "
              f"(min {min(rs):.2f}, max {max(rs):.2f})")


if __name__ == "__main__":
    main()
