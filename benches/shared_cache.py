#!/usr/bin/env python3
"""Ranks of one node sharing a cache folder in range mode: what each rank keeps for its next
epoch, the requests it makes, and the epoch of the slowest rank (what a synchronous trainer
waits for).

Run as root inside a network namespace holding only loopback (nothing leaves the machine):

  unshare -n sh -c 'ip link set lo up && python3 benches/shared_cache.py --tree TREE --work WORK'

TREE is an ImageFolder tree (``python3 benches/make_data.py imagefolder --num 2000 --classes 20
--out TREE``). The script converts it to jpeg shards of 4 MB with the release binary
(``--imgfeed``), starts a store server on loopback (``--server gcs``: fake-gcs-server, or
``moto``; as ``benches/store_cache.py`` does), uploads them, and for each cache size
(``--fractions`` of the shards' bytes, plus the index and the names) starts ``--ranks``
processes at once: ``imgfeed run`` of the shuffled training pipeline (batch 32, ``--workers``
each, ``--epochs``), ``--num-shards RANKS --shard-id I``, ``--fetch ranges``, one cache folder
(emptied before each run) for all of them, as the ranks of one node share
``~/.cache/imgfeed``.

Each row gives, per rank, the samples read from the kept ranges (and how many of them another
rank wrote there: a rank writes the samples it reads that another rank keeps) and the range requests of
each epoch, and the epoch's time; then, per epoch, the slowest rank's time. ``--before BIN``
runs every row a second time with another build, alternated in each round; ``--rounds``
repeats; the table gives the medians of the epochs after the first. The ranks and the
server share the machine's cores: compare the rows of one run, not across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from store_cache import REPO, TRAIN, Server, convert, dataset_files, loopback_only  # noqa: E402


def per_epoch(lines: list[str], what: str) -> list[int]:
    out = []
    for line in lines:
        if line.startswith("epoch ") and "object store:" in line:
            m = re.search(r"([0-9]+) " + re.escape(what), line)
            out.append(int(m.group(1)) if m else 0)
    return out


def run_ranks(binary: str, data: str, endpoint: str, ranks: int, size: int, cache: Path, a,
              env: dict) -> list[dict]:
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    procs = []
    for rank in range(ranks):
        args = [binary, "run", TRAIN, "--data", data, "--epochs", str(a.epochs), "--workers", str(a.workers),
                "--batch-size", "32", "--endpoint", endpoint, "--shuffle", "--fetch", "ranges", "--cache-dir", str(cache),
                "--cache-size", str(size), "--num-shards", str(ranks), "--shard-id", str(rank)]
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env={**os.environ, **env}))
    out = []
    for rank, p in enumerate(procs):
        stdout, stderr = p.communicate(timeout=3600)
        if p.returncode != 0:
            sys.exit(f"rank {rank}: {(stderr or stdout).strip().splitlines()[-1:]}")
        lines = stdout.splitlines()
        out.append({
            "rank": rank,
            "epochs": [float(m.group(1)) for l in lines if (m := re.search(r"; ([0-9.]+) s, [0-9.]+ images/s", l))],
            "kept": per_epoch(lines, "samples from the kept ranges"),
            "by_others": per_epoch(lines, "written by other ranks"),
            "requests": per_epoch(lines, "range requests"),
        })
    shutil.rmtree(cache, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--server", choices=["moto", "gcs"], default="gcs")
    ap.add_argument("--imgfeed", default=str(REPO / "target/release/imgfeed"))
    ap.add_argument("--before", help="another build: every row also runs with it, alternated")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--fractions", default="0.1,0.2")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if not loopback_only():
        sys.exit("run inside `unshare -n sh -c 'ip link set lo up && ...'`: this namespace has more than loopback")
    a.work.mkdir(parents=True, exist_ok=True)
    folder = a.work / "jpeg-4MB"
    convert(a.imgfeed, "convert_jpeg256.toml", a.tree, folder, "4MB")
    manifest = json.loads((folder / "manifest.json").read_text())
    shards = sum(s["size"] for s in manifest["shards"])
    small = manifest["index"]["size"] + manifest["names"]["size"]
    server = Server(a.server)
    results = []
    try:
        server.create("bench")
        for f in dataset_files(folder):
            server.put("bench", f"jpeg/{f.name}", f.read_bytes())
        data = server.url("bench", "jpeg")
        env = {**server.env()}
        builds = [(a.imgfeed, "after")] + ([(a.before, "before")] if a.before else [])
        for rnd in range(a.rounds):
            for frac in [float(x) for x in a.fractions.split(",")]:
                size = small + int(shards * frac)
                for binary, label in builds[::-1] if rnd % 2 else builds:
                    t0 = time.perf_counter()
                    ranks = run_ranks(binary, data, server.endpoint(), a.ranks, size, a.work / "cache",
                                      a, env)
                    results.append({"round": rnd, "fraction": frac, "build": label, "cache_size": size,
                                    "wall": time.perf_counter() - t0, "ranks": ranks})
                    print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    finally:
        server.close()
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    print(f"server: {a.server}; {a.ranks} ranks, {a.workers} worker(s) each, one cache folder; "
          f"{len(manifest['shards'])} shards, {shards / 1e6:.1f} MB")
    print("| cache | build | rank | kept samples, each epoch (of them written by other ranks) | range requests, each epoch | epoch s (median after the first) | slowest rank's epoch s |")
    print("|---|---|---|---|---|---|---|")
    for frac in sorted({r["fraction"] for r in results}):
        for label in [b[1] for b in builds]:
            rows = [r for r in results if r["fraction"] == frac and r["build"] == label]
            slowest = statistics.median(
                max(rk["epochs"][e] for rk in r["ranks"]) for r in rows for e in range(1, a.epochs))
            for rank in range(a.ranks):
                mine = [r["ranks"][rank] for r in rows]
                kept = " / ".join(",".join(f"{k}({o})" if o else str(k)
                                           for k, o in zip(m["kept"], m.get("by_others") or [0] * len(m["kept"])))
                                  for m in mine)
                req = " / ".join(",".join(str(k) for k in m["requests"]) for m in mine)
                ep = statistics.median(e for m in mine for e in m["epochs"][1:])
                print(f"| {frac:.0%} | {label} | {rank} | {kept} | {req} | {ep:.3f} | "
                      f"{f'{slowest:.3f}' if rank == 0 else ''} |")


if __name__ == "__main__":
    main()
