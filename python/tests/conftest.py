"""Shared fixtures: the repository's paths, the `imgfeed` binary the Python results are
compared with, and small datasets made in a temporary folder."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
PIPELINES = REPO / "pipelines"
TREE = FIXTURES / "imagefolder"
# The pipelines every figure is quoted on, as the tests pass them.
EVAL = str(PIPELINES / "resnet50_eval.toml")
TRAIN = str(PIPELINES / "resnet50_train.toml")


def copies(loader):
    """Every batch of `loader` as numpy copies: `[(images, labels), ...]`."""
    return [(np.array(x), np.array(y)) for x, y in loader]


def pytest_configure(config: pytest.Config) -> None:
    # Tests that need a training framework carry its marker; python/test.sh runs them
    # (`-m NAME`) in the framework's cached environment (python/envs.sh NAME).
    config.addinivalue_line("markers", "mindspore: needs the mindspore package (bash python/envs.sh mindspore)")
    config.addinivalue_line("markers", "torch: needs the torch package (bash python/envs.sh torch)")
    config.addinivalue_line("markers", "ray: needs Ray Data and a loopback-only network namespace (bash python/envs.sh ray)")


def _binary() -> Path:
    env = os.environ.get("IMGFEED_BIN")
    if env:
        return Path(env)
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "imgfeed"
        if p.exists():
            return p
    raise RuntimeError(
        "the imgfeed binary is needed to compare against: run `cargo build --release` (python/test.sh does) "
        "or set IMGFEED_BIN"
    )


@pytest.fixture(scope="session")
def cli():
    """Run the imgfeed binary; returns its stdout, failing the test on a non-zero exit."""
    binary = _binary()

    def run(*args: str) -> str:
        out = subprocess.run([str(binary), *args], capture_output=True, text=True)
        if out.returncode != 0:
            raise AssertionError(f"imgfeed {' '.join(args)} exited {out.returncode}: {out.stderr}")
        return out.stdout

    return run


@pytest.fixture(scope="session")
def converted(cli, tmp_path_factory):
    """`imgfeed convert PIPELINE ARGS --out DIR` → (images, labels) as numpy arrays."""
    cache: Dict[tuple, tuple] = {}

    def convert(pipeline: str, *args: str):
        key = (pipeline, *args)
        if key not in cache:
            out = tmp_path_factory.mktemp("convert")
            cli("convert", str(PIPELINES / pipeline), *args, "--out", str(out))
            cache[key] = (np.load(out / "images.npy"), np.load(out / "labels.npy"))
        return cache[key]

    return convert


def run_digests(cli, pipeline: str, *args: str) -> List[str]:
    """The per-epoch digests `imgfeed run` prints."""
    text = cli("run", str(PIPELINES / pipeline), *args)
    return re.findall(r"digest ([0-9a-f]{16})", text)


def digest_of(batches) -> str:
    """`imgfeed run`'s digest recomputed from (images, labels) numpy batches: each sample's
    fingerprint, then the fingerprint of the batch's label bytes, folded with FNV-1a 64."""
    from imgfeed import _imgfeed

    h = _imgfeed.OFFSET64
    for images, labels in batches:
        for sample in images:
            h = _imgfeed.fold(h, _imgfeed.fingerprint(np.ascontiguousarray(sample).tobytes()))
        h = _imgfeed.fold(h, _imgfeed.fingerprint(np.ascontiguousarray(labels).tobytes()))
    return f"{h:016x}"


@pytest.fixture
def bad_tree(tmp_path):
    """The fixture tree plus one truncated JPEG (cat/zz_truncated.jpg, the last cat file)."""
    root = tmp_path / "tree"
    shutil.copytree(TREE, root)
    shutil.copy(FIXTURES / "bad" / "truncated.jpg", root / "cat" / "zz_truncated.jpg")
    return root


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")



@pytest.fixture(scope="session")
def slow_tree(tmp_path_factory):
    """Three 6000×6000 noise JPEGs (hard links of one file): about half a second each to
    decode, so a loop over them spends its time waiting for the engine."""
    from PIL import Image

    root = tmp_path_factory.mktemp("slow")
    (root / "a").mkdir()
    rng = np.random.default_rng(0)
    first = root / "a" / "0.jpg"
    Image.fromarray(rng.integers(0, 255, (6000, 6000, 3), dtype=np.uint8)).save(first, quality=95)
    for i in (1, 2):
        os.link(first, root / "a" / f"{i}.jpg")
    return root
