#!/usr/bin/env python3
"""imgfeed against the reference loaders of the formats it reads in place, on the same files
(issue 30): the canonical eval pipeline (Decode -> Resize(256) -> CenterCrop(224) ->
Normalize(ImageNet mean/std x255) -> HWC2CHW -> batch(32, drop_remainder)), 2 workers each,
one epoch a run, every contender in a fresh process, the contenders alternated in rounds.

  python3 benches/reference_loaders.py TREE --work DIR [--rounds 5] [--workers 2]
                                       [--binary target/release/imgfeed] [--only a,b,...]

TREE is an image tree (`python3 benches/make_data.py imagefolder --out TREE --num 2000`).
The first run prepares DIR (each part skipped when already there):
* DIR/wds/shard-*.tar: `imgfeed convert DIR/copy_original.toml --format webdataset
  --shard-size 10MB`, a pipeline without ops and `[store] mode = "original"` (the tree's
  files untouched, KEY.JPEG + KEY.cls);
* DIR/mr/data.mindrecord*: the same with `--format mindrecord` (columns data/label/file_name);
* DIR/hf/train-*.parquet: Hugging Face `datasets` writes the tars' samples, in their order,
  with their JPEG bytes and labels (`Dataset.from_dict(...)` with `Image()` and `ClassLabel`,
  `to_parquet`), then `load_dataset("parquet", ...)` builds its Arrow cache in DIR/hf/cache.
So every contender reads the same JPEG bytes in the same order.

The contenders (images/s = images delivered / seconds from the first request for a batch to
the last batch; listing/indexing is not timed, as `imgfeed bench` does not time it):
* `imgfeed-wds`  -- `imgfeed bench pipelines/resnet50_eval.toml --data DIR/wds --workers W --json`
* `imgfeed-mr`   -- the same with `--data DIR/mr` (the MindRecord files, read in place)
* `wds-torch`    -- `webdataset.WebDataset(tars).decode("pil").to_tuple(...)`, torchvision's
                    Resize(256) + CenterCrop(224) + ToTensor + Normalize on each sample,
                    `.batched(32, partial=False)`, in `torch.utils.data.DataLoader(batch_size=None,
                    num_workers=W)` (webdataset's documented pattern: each worker reads its tars)
* `hf-torch`     -- `datasets.load_dataset("parquet", ...)` with `set_transform` applying the
                    same torchvision transforms, in `DataLoader(batch_size=32, num_workers=W,
                    drop_last=True)`
* `mindspore`    -- `mindspore.dataset.MindDataset(DIR/mr/..., columns_list=["data", "label"],
                    num_parallel_workers=W)` + `vision.Decode/Resize(256)/CenterCrop(224)/
                    Normalize/HWC2CHW` in `map(num_parallel_workers=W)`, `batch(32,
                    drop_remainder=True)`, `create_tuple_iterator(output_numpy=True)`
Parquet is not read by imgfeed yet: `hf-torch` is compared with `imgfeed-wds` (the same JPEG
bytes, from the tars). Ratios are computed per round (imgfeed-wds / wds-torch, imgfeed-wds /
hf-torch, imgfeed-mr / mindspore) and their medians printed.

The interpreters, from python/envs.sh's cached environments (--torch-env, --formats-env,
--mindspore-env to override): `torch` (torch; torchvision is not in python/envs/torch.txt:
--torchvision-site names a folder holding it, e.g. made by `$(bash python/envs.sh --path
torch)/bin/pip install --no-deps --target target/refbench-site torchvision==0.29.2`, the
default), `formats` (webdataset, datasets, pyarrow; no torch), `mindspore`. The torch
contenders run the torch environment's Python with the torchvision folder and then the
formats environment's site-packages APPENDED to sys.path (the torch environment's own
packages come first; both environments pin the same numpy and Pillow), rather than a third
5 GB environment. The imgfeed contenders use the release binary (`cargo build --release`).
"""

from __future__ import annotations

import argparse
import glob
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
BATCH = 32
IMAGE_EXTS = "jpg;jpeg;JPEG;JPG;png;webp"

CONTENDERS = ["imgfeed-wds", "wds-torch", "hf-torch", "imgfeed-mr", "mindspore"]
RATIOS = [("imgfeed-wds", "wds-torch"), ("imgfeed-wds", "hf-torch"), ("imgfeed-mr", "mindspore")]
# Which interpreter runs each Python contender.
CHILD_ENV = {"wds-torch": "torch", "hf-torch": "torch", "mindspore": "mindspore"}


# ---------------------------------------------------------------- the children (timed code)

def torchvision_transform():
    from torchvision import transforms

    return transforms.Compose([
        transforms.Resize(256),
        transforms.CenterCrop(224),
        transforms.ToTensor(),
        transforms.Normalize(mean=[m / 255 for m in MEAN], std=[s / 255 for s in STD]),
    ])


def cpu_seconds() -> float:
    """CPU time of this process (all its threads) and of its reaped child processes
    (DataLoader's workers, joined when the epoch ends)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def timed_epoch(batches) -> dict:
    """One epoch of (images, labels), touching one value a batch; timed from the first request
    for a batch to the last batch (wall and CPU time, as `imgfeed bench` times its run)."""
    n, label_sum, touched = 0, 0, 0.0
    c0, t0 = cpu_seconds(), time.perf_counter()
    for images, labels in batches:
        touched += float(images[0, 0, 0, 0])
        n += len(labels)
        label_sum += int(labels.sum())
    secs = time.perf_counter() - t0
    cpu = cpu_seconds() - c0
    return {"images": n, "secs": secs, "cpu_s": cpu, "label_sum": label_sum, "shape": list(images.shape)}


def child_wds_torch(work: str, workers: int) -> dict:
    import torch
    import webdataset as wds

    torch.set_num_threads(1)
    tf = torchvision_transform()
    urls = sorted(glob.glob(os.path.join(work, "wds", "*.tar")))
    dataset = (
        wds.WebDataset(urls, shardshuffle=False, empty_check=False)
        .decode("pil")
        .to_tuple(IMAGE_EXTS, "cls")
        .map_tuple(tf, int)
        .batched(BATCH, partial=False)
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers)
    return timed_epoch(loader)


def child_hf_torch(work: str, workers: int) -> dict:
    import torch

    torch.set_num_threads(1)
    tf = torchvision_transform()
    ds = hf_load(work)

    def transform(batch):
        return {"pixel_values": [tf(im.convert("RGB")) for im in batch["image"]], "label": batch["label"]}

    ds.set_transform(transform)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=False, num_workers=workers, drop_last=True)
    return timed_epoch((b["pixel_values"], b["label"]) for b in loader)


def child_mindspore(work: str, workers: int) -> dict:
    import mindspore.dataset as ds
    import mindspore.dataset.vision as vision

    files = mindrecord_files(work)
    data_set = ds.MindDataset(files[0], columns_list=["data", "label"], shuffle=False, num_parallel_workers=workers)
    trans = [vision.Decode(), vision.Resize(256), vision.CenterCrop(224),
             vision.Normalize(mean=MEAN, std=STD), vision.HWC2CHW()]
    data_set = data_set.map(operations=trans, input_columns="data", num_parallel_workers=workers)
    data_set = data_set.batch(BATCH, drop_remainder=True)
    return timed_epoch(data_set.create_tuple_iterator(output_numpy=True, num_epochs=1))


CHILDREN = {"wds-torch": child_wds_torch, "hf-torch": child_hf_torch, "mindspore": child_mindspore}


# ---------------------------------------------------------------- data

def mindrecord_files(work: str) -> list:
    return sorted(f for f in glob.glob(os.path.join(work, "mr", "data.mindrecord*")) if not f.endswith(".db"))


def hf_load(work: str):
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from datasets import load_dataset

    files = sorted(glob.glob(os.path.join(work, "hf", "*.parquet")))
    return load_dataset("parquet", data_files=files, split="train", cache_dir=os.path.join(work, "hf", "cache"))


def child_make_hf(work: str, workers: int) -> dict:
    """Writes the tars' samples (their JPEG bytes and labels, in order) as HF Parquet."""
    import tarfile

    from datasets import ClassLabel, Dataset, Features, Image, Value

    images, labels, names = [], [], []
    pending = {}
    for tar in sorted(glob.glob(os.path.join(work, "wds", "*.tar"))):
        with tarfile.open(tar) as t:
            for m in t:
                if not m.isfile():
                    continue
                key, _, ext = m.name.partition(".")
                data = t.extractfile(m).read()
                s = pending.setdefault(key, {})
                if ext == "cls":
                    s["label"] = int(data)
                else:
                    s["image"], s["name"] = data, m.name
                if "label" in s and "image" in s:
                    images.append({"bytes": s["image"], "path": s["name"]})
                    labels.append(s["label"])
                    names.append(s["name"])
                    del pending[key]
    assert not pending, f"samples without image or label: {sorted(pending)[:5]}"
    classes = [str(c) for c in range(max(labels) + 1)]
    features = Features({"image": Image(), "label": ClassLabel(names=classes), "name": Value("string")})
    ds = Dataset.from_dict({"image": images, "label": labels, "name": names}, features=features)
    out = os.path.join(work, "hf")
    os.makedirs(out, exist_ok=True)
    half = (len(ds) + 1) // 2  # two files of one or more row groups, as the Hub stores splits
    ds.select(range(half)).to_parquet(os.path.join(out, "train-00000-of-00002.parquet"))
    ds.select(range(half, len(ds))).to_parquet(os.path.join(out, "train-00001-of-00002.parquet"))
    back = hf_load(work)  # builds the Arrow cache once
    first = back.cast_column("image", Image(decode=False))[0]["image"]["bytes"]
    assert first == images[0]["bytes"], "the Parquet copy does not hold the tars' bytes"
    return {"images": len(back), "label_sum": int(sum(labels))}


CHILDREN["make-hf"] = child_make_hf


def env_python(args, name: str) -> list:
    folder = getattr(args, f"{name}_env")
    return [os.path.join(folder, "bin", "python")]


def cached_env(name: str) -> str:
    r = subprocess.run(["bash", os.path.join(ROOT, "python", "envs.sh"), "--path", name], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def site_packages(env: str) -> str:
    found = glob.glob(os.path.join(env, "lib", "python3*", "site-packages"))
    return found[0] if found else ""


def run_child(args, kind: str, env: str) -> dict:
    extra = []
    if env == "torch":  # appended after the torch environment's own packages
        extra = [args.torchvision_site, site_packages(args.formats_env)]
    cmd = env_python(args, env) + [os.path.abspath(__file__), "--child", kind, args.tree, "--work", args.work,
                                   "--workers", str(args.workers)]
    envvars = dict(os.environ, REFBENCH_APPEND_PATH=os.pathsep.join(p for p in extra if p), GLOG_v="3",
                   HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=envvars)
    if r.returncode != 0:
        sys.exit(f"{kind} failed ({' '.join(cmd)}):\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if "secs" in out:
        out["images_per_s"] = out["images"] / out["secs"]
    return out


def run_imgfeed(args, data: str) -> dict:
    cmd = [args.binary, "bench", EVAL, "--data", data, "--workers", str(args.workers), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def prepare(args) -> None:
    wds_dir, mr_dir = os.path.join(args.work, "wds"), os.path.join(args.work, "mr")
    # `original` keeps the files untouched: a conversion pipeline without ops.
    convert = os.path.join(args.work, "copy_original.toml")
    with open(convert, "w") as f:
        f.write(f'[source]\nkind = "image_folder"\nroot = {json.dumps(args.tree)}\nshuffle = false\n'
                '[store]\nmode = "original"\n')
    for fmt, out in (("webdataset", wds_dir), ("mindrecord", mr_dir)):
        if os.path.isdir(out):
            continue
        cmd = [args.binary, "convert", convert, "--format", fmt, "--shard-size", args.shard_size, "--out", out]
        print("prepare: " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    if not glob.glob(os.path.join(args.work, "hf", "*.parquet")):
        print("prepare: Hugging Face datasets writes the tars' samples as Parquet", flush=True)
        r = run_child(args, "make-hf", "formats")
        print(f"prepare: {r['images']} rows in Parquet", flush=True)


# ---------------------------------------------------------------- the rounds

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree")
    ap.add_argument("--work", required=True, help="folder for the converted copies (made on the first run)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shard-size", default="10MB", help="tars' and MindRecord files' size (default: %(default)s)")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "imgfeed"))
    ap.add_argument("--only", default=",".join(CONTENDERS), help="comma-separated contenders (default: all)")
    ap.add_argument("--torch-env", default=None)
    ap.add_argument("--formats-env", default=None)
    ap.add_argument("--mindspore-env", default=None)
    ap.add_argument("--torchvision-site", default=os.path.join(ROOT, "target", "refbench-site"),
                    help="a folder holding torchvision, appended to the torch environment's path")
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        for p in filter(None, os.environ.get("REFBENCH_APPEND_PATH", "").split(os.pathsep)):
            sys.path.append(p)
        print(json.dumps(CHILDREN[a.child](a.work, a.workers)))
        return
    for name in ("torch", "formats", "mindspore"):
        if getattr(a, f"{name}_env") is None:
            setattr(a, f"{name}_env", cached_env(name))
    a.tree, a.work = os.path.abspath(a.tree), os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    prepare(a)

    contenders = [c for c in CONTENDERS if c in a.only.split(",")]
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {os.cpu_count()} CPUs", flush=True)
    # Warm-up, not counted: the first run of each reads its files into the page cache.
    for c in contenders:
        run_one(a, c)
    results: dict = {c: [] for c in contenders}
    loads = []
    for i in range(a.rounds):
        order = contenders if i % 2 == 0 else contenders[::-1]
        line = []
        for c in order:
            r = run_one(a, c)
            results[c].append(r)
            line.append(f"{c} {r['images_per_s']:.0f}/s {1e3 * r['cpu_s'] / r['images']:.2f} CPU ms/image "
                        f"({r['images']} images)")
        loads.append(os.getloadavg()[0])
        print(f"round {i + 1} (load {loads[-1]:.1f}): " + ", ".join(line), flush=True)

    print(f"\nload average (1 min) after each round: {' '.join(f'{x:.1f}' for x in loads)}")
    print("| contender | images/s, median | per round | CPU ms per image, median | per round |")
    print("|---|---|---|---|---|")
    for c in contenders:
        rs = [r["images_per_s"] for r in results[c]]
        cs = [1e3 * r["cpu_s"] / r["images"] for r in results[c]]
        print(f"| {c} | {statistics.median(rs):.0f} | {' '.join(f'{x:.0f}' for x in rs)} "
              f"| {statistics.median(cs):.2f} | {' '.join(f'{x:.2f}' for x in cs)} |")
    # Wall-clock ratios measure the share of 2 loaded cores each process tree wins as much as
    # its work; the CPU-time ratio (reference CPU per image / imgfeed's) is the work alone.
    print("\n| ratio | images/s: median | per round | CPU per image (reference / imgfeed): median | per round |")
    print("|---|---|---|---|---|")
    for num, den in RATIOS:
        if num in results and den in results:
            q = [x["images_per_s"] / y["images_per_s"] for x, y in zip(results[num], results[den])]
            w = [(y["cpu_s"] / y["images"]) / (x["cpu_s"] / x["images"]) for x, y in zip(results[num], results[den])]
            print(f"| {num} / {den} | {statistics.median(q):.2f} | {' '.join(f'{x:.2f}' for x in q)} "
                  f"| {statistics.median(w):.2f} | {' '.join(f'{x:.2f}' for x in w)} |")


def run_one(a, c: str) -> dict:
    if c == "imgfeed-wds":
        return run_imgfeed(a, os.path.join(a.work, "wds"))
    if c == "imgfeed-mr":
        return run_imgfeed(a, os.path.join(a.work, "mr"))
    return run_child(a, c, CHILD_ENV[c])


if __name__ == "__main__":
    main()
