"""PyTorch DistributedDataParallel under the real torchrun (2 processes, gloo, CPU) fed by
``imgfeed.Loader``: examples/torch_ddp.py run as users run it, checked from each rank's own
report (its sample indices, pixel digests and losses per step, its final parameters).

Needs torch: ``bash python/envs.sh torch``, then ``bash python/test.sh`` runs these in that
environment (``-m torch``). torchrun talks over loopback only: inside a fresh network
namespace (``unshare -n``) where that is allowed, else bound to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import REPO, TREE

torch = pytest.importorskip("torch", reason="torch is not installed here; run: bash python/envs.sh torch")

pytestmark = pytest.mark.torch

import imgfeed  # noqa: E402

EXAMPLE = REPO / "examples" / "torch_ddp.py"
WORLD = 2
TIMEOUT_S = 240
NETNS_PORT = 29500


def _netns_prefix() -> List[str]:
    """``unshare -n`` (a network namespace with only loopback, brought up) when this process
    may make one, else nothing."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return []
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        return []
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


NETNS = _netns_prefix()


def torchrun(workdir: Path, *args: str, report: str = "report", nproc: int = WORLD) -> Dict[int, dict]:
    """Run the example under ``python -m torch.distributed.run`` with ``nproc`` processes in
    ``workdir``; returns each rank's report and keeps the launcher's output as ``.stdout``."""
    port = NETNS_PORT if NETNS else _free_loopback_port()
    cmd = [*NETNS, sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={nproc}",
           "--master_addr=127.0.0.1", f"--master_port={port}", str(EXAMPLE), *args,
           "--report", str(workdir / report)]
    env = {k: v for k, v in os.environ.items()
           if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "RANK_SIZE", "RANK_ID", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1")
    # Its own session, so that a timeout kills torchrun and both ranks.
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"torchrun ran past {TIMEOUT_S}s: {' '.join(cmd)}\n{out[-4000:]}")
    if proc.returncode != 0:
        raise AssertionError(f"torchrun exited {proc.returncode}: {' '.join(cmd)}\n{out[-6000:]}")
    reports = {}
    for rank in range(nproc):
        path = workdir / f"{report}.rank{rank}.json"
        assert path.exists(), f"rank {rank} wrote no report ({path}); output:\n{out[-4000:]}"
        reports[rank] = json.loads(path.read_text())
    reports["stdout"] = out  # type: ignore[index]
    return reports


def by_epoch(report: dict) -> Dict[int, List[dict]]:
    epochs: Dict[int, List[dict]] = {}
    for s in report["steps"]:
        epochs.setdefault(s["epoch"], []).append(s)
    return epochs


def samples(steps: List[dict]) -> List[int]:
    return [i for s in steps for i in s["indices"]]


def source_len(tree: Path) -> int:
    return imgfeed.Loader(str(REPO / "pipelines" / "resnet50_eval.toml"), data=str(tree), num_shards=1, shard_id=0).num_samples


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """Two epochs, uninterrupted, on the 12-image fixture tree."""
    return torchrun(tmp_path_factory.mktemp("full"), "--data", str(TREE), "--epochs", "2")


def test_every_rank_runs_the_same_steps_and_the_ranks_cover_each_epoch_once(full):
    n = source_len(TREE)
    assert n == 12
    for epoch in (0, 1):
        per_rank = [by_epoch(full[r])[epoch] for r in range(WORLD)]
        # The same number of steps on every rank (else DDP's all-reduce would hang): len(loader).
        assert [len(s) for s in per_rank] == [full[r]["batches_per_epoch"] for r in range(WORLD)] == [3, 3]
        # Each rank read its own shard (6 of 12): disjoint, and together the whole epoch.
        shards = [samples(s) for s in per_rank]
        assert [len(s) for s in shards] == [6, 6]
        assert set(shards[0]).isdisjoint(shards[1])
        assert sorted(shards[0] + shards[1]) == list(range(n))
        # Batch numbers count 0, 1, 2 in each epoch and each batch holds batch_size samples.
        assert [[s["batch"] for s in steps] for steps in per_rank] == [[0, 1, 2]] * WORLD
    assert "epoch 0: loss" in full["stdout"] and "epoch 1: loss" in full["stdout"]


def test_set_epoch_changes_the_order(full):
    for r in range(WORLD):
        epochs = by_epoch(full[r])
        assert samples(epochs[0]) != samples(epochs[1]), f"rank {r} read epoch 1 in epoch 0's order"
    # ...and the shards change: rank 0 does not read the same set of samples every epoch.
    assert set(samples(by_epoch(full[0])[0])) != set(samples(by_epoch(full[0])[1]))


def test_ddp_keeps_the_ranks_parameters_equal(full, tmp_path):
    # After training on different shards, DDP's gradient all-reduce left every rank with
    # the same parameters, bit for bit...
    assert full[0]["params"] == full[1]["params"]
    assert [s["pixels"] for s in full[0]["steps"]] != [s["pixels"] for s in full[1]["steps"]]
    # ...which training each rank alone on its shard does not (so the check can fail).
    alone = torchrun(tmp_path, "--data", str(TREE), "--epochs", "1", "--no-ddp")
    assert alone[0]["params"] != alone[1]["params"]


def test_uneven_dataset_pads_like_distributed_sampler(tmp_path):
    # 11 images on 2 ranks: each gets ceil(11 / 2) = 6, the last round wrapping around to the
    # start of the epoch's order, so exactly one sample is read twice — rank 0's first —
    # and none is missing; both ranks still run the same number of steps.
    tree = tmp_path / "tree"
    shutil.copytree(TREE, tree)
    (tree / "bird" / "bird_003.png").unlink()
    n = source_len(tree)
    assert n == 11
    run = torchrun(tmp_path, "--data", str(tree), "--epochs", "2")
    for epoch in (0, 1):
        shards = [samples(by_epoch(run[r])[epoch]) for r in range(WORLD)]
        assert [len(s) for s in shards] == [6, 6]
        assert set(shards[0]) | set(shards[1]) == set(range(n))
        assert shards[1][-1] == shards[0][0]  # position 11 of the order wraps to position 0
        assert set(shards[0]).isdisjoint(shards[1][:-1])
        assert len(set(shards[0])) == 6 and len(set(shards[1])) == 6
    assert run[0]["params"] == run[1]["params"]


def test_stopped_mid_epoch_and_resumed_gives_exactly_the_uninterrupted_batches(full, tmp_path):
    # 3 steps per epoch: stop after step 4, the first batch of epoch 1.
    ckpt = tmp_path / "ckpt.pt"
    stopped = torchrun(tmp_path, "--data", str(TREE), "--epochs", "2", "--stop-after", "4",
                       "--checkpoint", str(ckpt), report="stopped")
    saved = torch.load(ckpt, weights_only=False)
    state = saved["loader"]
    assert (state["epoch"], state["batch"], state["position"]) == (1, 1, 4)
    for r in range(WORLD):
        assert stopped[r]["steps"] == full[r]["steps"][:4]
    resumed = torchrun(tmp_path, "--data", str(TREE), "--epochs", "2", "--resume", str(ckpt), report="resumed")
    for r in range(WORLD):
        rest = resumed[r]["steps"]
        assert [s["step"] for s in rest] == [5, 6]
        # The same samples, the same pixels (the random crops and flips too), the same losses.
        assert rest == full[r]["steps"][4:], f"rank {r}: the resumed run's batches differ"
    # And the model ends where the uninterrupted run's did.
    assert resumed[0]["params"] == full[0]["params"]


def _epoch_samples(run: dict, world: int, epoch: int) -> List[List[int]]:
    return [samples(by_epoch(run[r]).get(epoch, [])) for r in range(world)]


@pytest.mark.parametrize("uneven, world2, workers", [("exact", 2, "3"), ("pad", 3, "1"), ("drop", 3, "2")])
def test_stopped_on_4_ranks_and_resumed_on_another_number(tmp_path, uneven, world2, workers):
    # 12 images, batch 1 per rank: 4 ranks read 1 step (4 samples), rank 0 saves its state;
    # torchrun on world2 ranks (with another worker count) reads the 8 left of epoch 0 —
    # each once (exact), 3 each with one repeat (pad), 2 each with two left out (drop) —
    # then epoch 1 as a fresh run on world2 ranks reads it.
    ckpt = tmp_path / "ckpt.pt"
    common = ("--data", str(TREE), "--epochs", "2", "--batch-size", "1", "--uneven", uneven)
    stopped = torchrun(tmp_path, *common, "--stop-after", "1", "--checkpoint", str(ckpt), report="stopped", nproc=4)
    state = torch.load(ckpt, weights_only=False)["loader"]
    assert (state["epoch"], state["position"], state["worlds"][0]["num_shards"]) == (0, 4, 4)
    before = [i for shard in _epoch_samples(stopped, 4, 0) for i in shard]
    assert len(before) == 4
    resumed = torchrun(tmp_path, *common, "--workers", workers, "--resume", str(ckpt), report="resumed", nproc=world2)
    rest = _epoch_samples(resumed, world2, 0)
    # every rank ran the same number of steps (DDP's all-reduces lined up)
    assert len({len(r) for r in rest}) == 1, rest
    counts = {i: (before + [j for r in rest for j in r]).count(i) for i in range(12)}
    if uneven == "exact":
        assert set(counts.values()) == {1}, counts
    elif uneven == "pad":
        assert [len(r) for r in rest] == [3] * 3 and min(counts.values()) == 1 and sum(counts.values()) == 13
    else:
        assert [len(r) for r in rest] == [2] * 3 and max(counts.values()) == 1 and sum(counts.values()) == 10
    # epoch 1: an ordinary epoch of the new world
    for r in range(world2):
        fresh = imgfeed.Loader(str(REPO / "pipelines" / "resnet50_train.toml"), data=str(TREE), batch_size=1,
                               drop_last=True, uneven=uneven, num_shards=world2, shard_id=r)
        fresh.set_epoch(1)
        assert samples(by_epoch(resumed[r])[1]) == [int(i) for b in fresh.batches() for i in b.indices]
    assert all(resumed[r]["params"] == resumed[0]["params"] for r in range(world2))
