"""``imgfeed.ray`` on a real two-node Ray cluster (``ray.cluster_utils.Cluster``, one CPU per
node) on this machine: the blocks of ``imgfeed.ray.read`` in order are ``imgfeed run``'s
epoch, read by tasks on both nodes; ``streaming_split`` hands every batch to exactly one
consumer; a read task whose worker process is killed is retried without a batch lost or
repeated.

Needs Ray Data: ``bash python/envs.sh ray``, then ``bash python/test.sh`` runs these in that
environment (``-m ray``) inside a network namespace holding only loopback (``unshare -n``,
as root): Ray binds the machine's interface address otherwise, and tests talk to loopback
only. Outside such a namespace they skip, saying so.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest

from conftest import PIPELINES, TREE, digest_of, run_digests

ray = pytest.importorskip("ray", reason="ray is not installed here; run: bash python/envs.sh ray")

pytestmark = pytest.mark.ray

import imgfeed  # noqa: E402
import imgfeed.ray as iray  # noqa: E402

#: Seconds any one test may take before the process dumps its stacks and exits.
TEST_TIMEOUT_S = 240


@pytest.fixture(autouse=True)
def _bounded():
    faulthandler.dump_traceback_later(TEST_TIMEOUT_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes of one CPU each, this process connected as the driver; shut down at
    the end of the module."""
    interfaces = sorted(name for _, name in socket.if_nameindex())
    if interfaces != ["lo"]:
        pytest.skip(
            f"the Ray tests run in a network namespace holding only loopback (this one has {interfaces}): "
            "as root, unshare -n sh -c 'ip link set lo up && exec python -m pytest -m ray' (python/test.sh does)"
        )
    from ray.cluster_utils import Cluster

    import ray._private.worker as ray_worker

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    session = None
    try:
        c.add_node(num_cpus=1)
        ray.init(address=c.address, logging_level="ERROR", log_to_driver=False)
        c.wait_for_nodes(timeout=60)
        ray.data.DataContext.get_current().enable_progress_bars = False
        session = Path(ray_worker._global_node.get_session_dir_path())
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        # The pip runtime_env's virtualenvs (test_runtime_env_pip_...: a copy of this
        # environment, torch included, ~6 GB) outlive the cluster in /tmp/ray and filled CI's
        # disk: the session's runtime resources go with it.
        # A worker still exiting after the shutdown may write there a moment longer: removed
        # until it stays gone, within 30 s.
        if session is not None:
            resources = session / "runtime_resources"
            deadline = time.monotonic() + 30
            while True:
                shutil.rmtree(resources, ignore_errors=True)
                if not resources.exists() or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert not resources.exists(), f"{resources} came back for 30 s after the shutdown"


def node_ids() -> set:
    return {n["NodeID"] for n in ray.nodes() if n["Alive"]}


def loader_batches(pipeline: str, epoch: int, **overrides) -> List[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The single-machine epoch: ``imgfeed.Loader``'s batches (copies)."""
    loader = imgfeed.Loader(PIPELINES / pipeline, data=TREE, **overrides)
    loader.set_epoch(epoch)
    return [(b.images.copy(), b.labels.copy(), b.indices.copy()) for b in loader.batches()]


def read_batches(ds) -> List[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    return list(iray.batches(ds.iter_batches(batch_size=1)))


@pytest.mark.parametrize("pipeline", ["resnet50_eval.toml", "resnet50_train.toml"])
def test_blocks_in_order_are_the_epoch_read_on_both_nodes(cluster, cli, pipeline):
    digests = run_digests(cli, pipeline, "--data", str(TREE), "--batch-size", "2", "--epochs", "2")
    assert len(digests) == 2
    for epoch in range(2):
        # 6 batches over 4 tasks (2, 2, 1, 1 batches): tasks start mid-epoch by resuming.
        ds = iray.read(PIPELINES / pipeline, data=TREE, epoch=epoch, parallelism=4, batch_size=2, with_node_id=True)
        rows = list(ds.iter_batches(batch_size=1))
        got = [(r["image"][0], r["label"][0], r["index"][0]) for r in rows]
        assert digest_of((i, l) for i, l, _ in got) == digests[epoch]
        want = loader_batches(pipeline, epoch, batch_size=2)
        assert [x.tolist() for _, _, x in got] == [x.tolist() for _, _, x in want]
        for (gi, gl, _), (wi, wl, _) in zip(got, want):
            assert gi.dtype == wi.dtype and gi.shape == wi.shape and gi.tobytes() == wi.tobytes()
            assert gl.tobytes() == wl.tobytes()
        assert {r["node_id"][0] for r in rows} == node_ids(), "the read tasks ran on one node only"


def test_batches_of_the_dataset_are_views_of_its_blocks_and_the_epoch(cluster):
    # 6 batches over 2 tasks: each block holds 3 batches, which batches(ds) yields as views
    ds = iray.read(PIPELINES / "resnet50_train.toml", data=TREE, epoch=1, parallelism=2, batch_size=2,
                   advance_epoch=False)
    want = loader_batches("resnet50_train.toml", 1, batch_size=2)
    for source in (ds, ds.iterator(), ds.iter_batches(batch_size=None)):
        got = list(iray.batches(source))
        assert len(got) == len(want) == 6
        for (gi, gl, gx), (wi, wl, wx) in zip(got, want):
            assert (gi.dtype, gi.shape, gl.dtype, gx.tolist()) == (wi.dtype, wi.shape, wl.dtype, wx.tolist())
            assert gi.tobytes() == wi.tobytes() and gl.tobytes() == wl.tobytes()
    # views of the blocks' Arrow buffers (in the object store), not arrays of their own
    assert all(not i.flags.owndata and not i.flags.writeable for i, _, _ in iray.batches(ds))


def test_read_tasks_queue_a_ray_blocks_worth_of_batches(cluster):
    import json

    # Ray holds a task's batches until they fill a 128 MiB block: 7 float32 batches of 32
    # (19.3 MB each), 28 uint8 ones; the engine's queue (its pool's free buffers) holds
    # that many plus one, so the buffers go round instead of being allocated anew.
    p = imgfeed.Pipeline.from_file(PIPELINES / "resnet50_eval.toml").replace(data=TREE)
    assert json.loads(iray.ImgfeedDatasource(p)._json)["engine"]["queue"] == 8
    u8, _ = iray.uint8_pipeline(p)
    assert json.loads(iray.ImgfeedDatasource(u8)._json)["engine"]["queue"] == 29
    assert p.config["engine"]["queue"] == 2  # the caller's pipeline is left as it was
    iray.ImgfeedDatasource.hold_block_batches = False
    try:
        assert json.loads(iray.ImgfeedDatasource(p)._json)["engine"]["queue"] == 2
    finally:
        iray.ImgfeedDatasource.hold_block_batches = True


def test_read_sets_its_dataset_context_and_leaves_the_callers_alone(cluster):
    ctx = ray.data.DataContext.get_current()
    before = (ctx.execution_options.preserve_order, ctx.op_resource_reservation_enabled)
    ds = iray.read(PIPELINES / "resnet50_eval.toml", data=TREE, batch_size=2)
    assert (ctx.execution_options.preserve_order, ctx.op_resource_reservation_enabled) == before
    # the blocks in order are the epoch; the read tasks are not held to half the cluster's CPUs
    assert ds.context.execution_options.preserve_order
    assert ds.context.op_resource_reservation_enabled is False
    # two read tasks per CPU of the cluster (2 CPUs): 4 tasks over the 6 small batches, each
    # task's batches in one block
    assert ds.materialize().num_blocks() == 4


def test_rows_of_samples_rebatched_by_ray_are_the_epoch(cluster, cli):
    digests = run_digests(cli, "resnet50_train.toml", "--data", str(TREE), "--batch-size", "4", "--epochs", "2")
    ds = iray.read(PIPELINES / "resnet50_train.toml", data=TREE, epoch=1, parallelism=2, batch_size=4, rows="samples")
    assert ds.count() == 12
    got = [(b["image"], b["label"]) for b in ds.iter_batches(batch_size=4)]
    assert [i.shape for i, _ in got] == [(4, 3, 224, 224)] * 3
    assert digest_of(got) == digests[1]


def test_a_new_epoch_is_a_new_order_for_the_training_pipeline(cluster):
    orders = []
    for epoch in (0, 1):
        ds = iray.read(PIPELINES / "resnet50_train.toml", data=TREE, epoch=epoch, parallelism=3, batch_size=2)
        orders.append([int(i) for _, _, idx in read_batches(ds) for i in idx])
    assert sorted(orders[0]) == sorted(orders[1]) == list(range(12))
    assert orders[0] != orders[1]
    # the eval pipeline does not shuffle: the same order every epoch
    evals = [[int(i) for _, _, idx in read_batches(iray.read(PIPELINES / "resnet50_eval.toml", data=TREE, epoch=e,
                                                          batch_size=2)) for i in idx] for e in (0, 1)]
    assert evals[0] == evals[1] == list(range(12))


def test_each_pass_over_the_dataset_reads_the_next_epoch(cluster):
    ds = iray.read(PIPELINES / "resnet50_train.toml", data=TREE, epoch=2, parallelism=3, batch_size=2)
    want = {e: [x.tolist() for _, _, x in loader_batches("resnet50_train.toml", e, batch_size=2)] for e in (2, 3, 4)}
    assert want[2] != want[3] != want[4]
    passes = [[x.tolist() for _, _, x in read_batches(ds)] for _ in range(2)]
    assert passes == [want[2], want[3]]
    assert [x.tolist() for _, _, x in read_batches(ds)] == want[4]
    # without advancing, every pass is the same epoch
    fixed = iray.read(PIPELINES / "resnet50_train.toml", data=TREE, epoch=2, parallelism=3, batch_size=2,
                      advance_epoch=False)
    assert [[x.tolist() for _, _, x in read_batches(fixed)] for _ in range(2)] == [want[2], want[2]]


def test_the_last_short_batch_is_kept_without_drop_remainder(cluster, cli):
    digests = run_digests(cli, "resnet50_eval.toml", "--data", str(TREE), "--batch-size", "5")
    text = cli("run", str(PIPELINES / "resnet50_eval.toml"), "--data", str(TREE), "--batch-size", "5")
    ds = iray.read(PIPELINES / "resnet50_eval.toml", data=TREE, parallelism=2, batch_size=5, drop_remainder=False)
    got = read_batches(ds)
    assert [len(i) for i, _, _ in got] == [5, 5, 2]
    # imgfeed run drops the short batch (the file says drop_remainder = true): compare with it dropped
    assert "2 batches" in text
    assert digest_of((i, l) for i, l, _ in got[:2]) == digests[0]


@ray.remote(num_cpus=0)
class Consumer:
    """A training rank's stand-in: reads its split, reports each batch's indices and digest."""

    def consume(self, it) -> List[Tuple[List[int], str]]:
        import imgfeed.ray as iray
        from imgfeed import _imgfeed

        out = []
        for images, labels, indices in iray.batches(it):  # a streaming_split part: views of its blocks
            h = _imgfeed.fold(_imgfeed.OFFSET64, _imgfeed.fingerprint(images.tobytes() + labels.tobytes()))
            out.append(([int(i) for i in indices], f"{h:016x}"))
        return out


def batch_key(images: np.ndarray, labels: np.ndarray, indices: np.ndarray) -> Tuple[List[int], str]:
    from imgfeed import _imgfeed

    h = _imgfeed.fold(_imgfeed.OFFSET64, _imgfeed.fingerprint(images.tobytes() + labels.tobytes()))
    return [int(i) for i in indices], f"{h:016x}"


def test_streaming_split_gives_every_batch_to_exactly_one_consumer(cluster):
    want = [batch_key(*b) for b in loader_batches("resnet50_train.toml", 0, batch_size=2)]
    ds = iray.read(PIPELINES / "resnet50_train.toml", data=TREE, parallelism=3, batch_size=2)
    splits = ds.streaming_split(2, equal=False)
    consumers = [Consumer.remote() for _ in splits]
    got = ray.get([c.consume.remote(it) for c, it in zip(consumers, splits)], timeout=120)
    assert all(got), f"a consumer got nothing: {got}"
    union = got[0] + got[1]
    assert len(union) == len(want)  # none repeated
    assert sorted(union) == sorted(want)  # every batch whole, byte for byte
    # each consumer's batches keep the epoch's order
    for part in got:
        positions = [want.index(b) for b in part]
        assert positions == sorted(positions)


def test_streaming_split_equal_keeps_batches_whole_and_drops_the_remainder(cluster):
    # 3 batches of 4 for 2 consumers: equal=True gives each 1 whole batch; the third is dropped
    want = [batch_key(*b) for b in loader_batches("resnet50_eval.toml", 0, batch_size=4)]
    ds = iray.read(PIPELINES / "resnet50_eval.toml", data=TREE, parallelism=3, batch_size=4)
    splits = ds.streaming_split(2, equal=True)
    consumers = [Consumer.remote() for _ in splits]
    got = ray.get([c.consume.remote(it) for c, it in zip(consumers, splits)], timeout=120)
    assert [len(g) for g in got] == [1, 1]
    assert all(len(idx) == 4 for part in got for idx, _ in part)
    assert set(map(tuple, [tuple(k[0]) for part in got for k in part])) < {tuple(k[0]) for k in want}
    assert all(k in want for part in got for k in part)


def _torch():
    return pytest.importorskip("torch", reason="torch is not in this environment: python/envs/ray.txt lists it")


@pytest.mark.parametrize("rows", ["batches", "samples"])
def test_iter_torch_batches_gives_the_numpy_batches_as_tensors(cluster, rows):
    torch = _torch()
    # two passes over one dataset: both epoch 1
    ds = iray.read(PIPELINES / "resnet50_train.toml", data=TREE, epoch=1, batch_size=4, parallelism=2, rows=rows,
                   advance_epoch=False)
    size = 1 if rows == "batches" else 4
    tensors = list(ds.iter_torch_batches(batch_size=size))
    arrays = list(ds.iter_batches(batch_size=size))
    want = loader_batches("resnet50_train.toml", 1, batch_size=4)
    assert len(tensors) == len(arrays) == len(want) == 3
    for t, a, (wi, wl, wx) in zip(tensors, arrays, want):
        assert set(t) == set(a) == {"image", "label", "index"}
        for name in t:
            assert isinstance(t[name], torch.Tensor) and t[name].device.type == "cpu"
            assert t[name].numpy().dtype == a[name].dtype and t[name].shape == a[name].shape
            assert t[name].numpy().tobytes() == a[name].tobytes(), name
        images = t["image"][0] if rows == "batches" else t["image"]
        labels = t["label"][0] if rows == "batches" else t["label"]
        assert images.dtype == torch.float32 and tuple(images.shape) == (4, 3, 224, 224)
        assert images.numpy().tobytes() == wi.tobytes() and labels.numpy().tobytes() == wl.tobytes()


def _train_loop(config) -> None:
    """Ray Train's per-worker loop: a tiny model trained by DDP (gloo, CPU) for
    ``config["epochs"]`` passes over the worker's shard of an ``imgfeed.ray.read`` dataset;
    writes what it saw (each batch's indices and digest, per epoch), its losses and its
    final weights to ``OUT/rank-R.json``."""
    import json

    import ray.train
    import torch
    from ray.train.torch import prepare_model

    from imgfeed import _imgfeed

    torch.manual_seed(0)
    model = prepare_model(torch.nn.Sequential(
        torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, config["classes"])))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    shard = ray.train.get_dataset_shard("train")
    rank = ray.train.get_context().get_world_rank()
    seen, losses = [], []
    for _ in range(config["epochs"]):
        keys = []
        for row in shard.iter_torch_batches(batch_size=1):
            images, labels, indices = row["image"][0], row["label"][0], row["index"][0]
            h = _imgfeed.fold(_imgfeed.OFFSET64, _imgfeed.fingerprint(images.numpy().tobytes() + labels.numpy().tobytes()))
            keys.append(([int(i) for i in indices], f"{h:016x}"))
            loss = torch.nn.functional.cross_entropy(model(images), labels.long())
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
        seen.append(keys)
    weights = [p.detach().numpy().tolist() for p in model.parameters()]
    with open(f"{config['out']}/rank-{rank}.json", "w") as f:
        json.dump({"seen": seen, "losses": losses, "weights": weights}, f)
    ray.train.report({"loss": losses[-1] if losses else float("nan")})


def test_ray_train_torch_trainer_reads_disjoint_complete_shards_and_trains(cluster, tmp_path):
    _torch()
    import json

    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    # 12 samples, 6 batches of 2: Ray Train's split (streaming_split, equal=True) gives each
    # of the 2 workers 3 whole batches. Both nodes have one CPU: the workers take half of
    # one each and the read tasks half, so neither waits for the other.
    # Ray Train executes the dataset once per epoch: the first pass reads epoch 1, the second
    # epoch 2 (a new shuffle), each exactly the Loader's.
    want = [[batch_key(*b) for b in loader_batches("resnet50_train.toml", e, batch_size=2)] for e in (1, 2)]
    assert sorted(want[0]) != sorted(want[1])
    ds = iray.read(PIPELINES / "resnet50_train.toml", data=TREE, epoch=1, batch_size=2, parallelism=3,
                   ray_remote_args={"num_cpus": 0.5})
    out = tmp_path / "ranks"
    out.mkdir()
    trainer = TorchTrainer(
        _train_loop,
        train_loop_config={"out": str(out), "epochs": 2, "classes": 3},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False, resources_per_worker={"CPU": 0.5}),
        run_config=RunConfig(name="imgfeed-ray-train", storage_path=str(tmp_path / "results")),
        datasets={"train": ds},
    )
    result = trainer.fit()
    assert result.error is None, result.error
    ranks = [json.loads((out / f"rank-{r}.json").read_text()) for r in range(2)]
    for epoch in range(2):
        parts = [[(idx, h) for idx, h in r["seen"][epoch]] for r in ranks]
        assert all(len(p) == 3 for p in parts), [len(p) for p in parts]
        union = parts[0] + parts[1]
        assert sorted(union) == sorted(want[epoch])  # disjoint, complete, every batch whole and byte for byte
    for r in ranks:
        assert len(r["losses"]) == 6 and all(np.isfinite(r["losses"]))
    # DDP averaged the gradients: both workers end with the same weights
    assert ranks[0]["weights"] == ranks[1]["weights"]


@pytest.mark.parametrize("pipeline", ["resnet50_eval.toml", "resnet50_train.toml"])
def test_uint8_images_normalized_by_the_consumer_equal_the_float_epoch(cluster, pipeline):
    p = imgfeed.Pipeline.from_file(PIPELINES / pipeline).replace(data=TREE, batch_size=4)
    _, removed = iray.uint8_pipeline(p)
    assert [op["op"] for op in removed] == ["normalize"]
    scale, shift = iray.uint8_affine(removed)
    ds8 = iray.read(p, epoch=1, uint8=True, parallelism=2)
    ds32 = iray.read(p, epoch=1, parallelism=2)
    got, want = read_batches(ds8), read_batches(ds32)
    assert len(got) == len(want) == 3
    for (ui, ul, ux), (fi, fl, fx) in zip(got, want):
        assert ui.dtype == np.uint8 and fi.dtype == np.float32 and ui.shape == fi.shape
        assert ui.nbytes * 4 == fi.nbytes
        np.testing.assert_array_equal(ui.astype(np.float32) * scale[:, None, None] + shift[:, None, None], fi)
        assert (ul == fl).all() and (ux == fx).all()


def test_uint8_refuses_an_op_that_needs_the_float_pixels():
    p = imgfeed.Pipeline(
        source={"kind": "image_folder", "root": str(TREE)},
        ops=[{"op": "decode"}, {"op": "resize", "size": 32}, {"op": "center_crop", "size": 32},
             {"op": "normalize", "mean": [120, 120, 120], "std": [60, 60, 60]},
             {"op": "random_erasing", "prob": 1.0}, {"op": "hwc_to_chw"}],
        batch_size=2,
    )
    with pytest.raises(ValueError, match=r"ops\[4\] \(random_erasing\) comes after normalize"):
        iray.uint8_pipeline(p)


def test_skip_mode_is_refused_with_the_reason(cluster):
    with pytest.raises(ValueError, match="on_error='skip' is not supported"):
        iray.read(PIPELINES / "resnet50_eval.toml", data=TREE, on_error="skip")


def _read_task_pids() -> List[int]:
    """The worker processes now running an imgfeed read task (Ray titles them ``ray::ReadImgfeed...``)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(b"ray::ReadImgfeed"):
            pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="module")
def long_tree(slow_tree, tmp_path_factory):
    """Eight of ``slow_tree``'s large JPEGs (0.3–0.5 s each to decode, hard links of one
    file): a task over them runs for seconds, on a quiet machine too."""
    root = tmp_path_factory.mktemp("long")
    (root / "a").mkdir()
    for i in range(8):
        os.link(slow_tree / "a" / "0.jpg", root / "a" / f"{i}.jpg")
    return root


def test_a_read_task_killed_midway_is_retried_and_the_epoch_is_exact(cluster, cli, long_tree):
    # Eight large JPEGs: one task reads the eight batches; its worker process is killed a
    # second after it starts, mid-way.
    digests = run_digests(cli, "resnet50_eval.toml", "--data", str(long_tree), "--batch-size", "1")
    ds = iray.read(PIPELINES / "resnet50_eval.toml", data=long_tree, parallelism=1, batch_size=1)
    killed: List[int] = []
    done = threading.Event()

    def kill_the_first_read_task() -> None:
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            pids = _read_task_pids()
            if pids:
                time.sleep(1.0)
                if pids[0] in _read_task_pids():  # still reading: killed mid-way
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_the_first_read_task)
    killer.start()
    try:
        got = list(ds.iter_batches(batch_size=1))
    finally:
        done.set()
        killer.join(timeout=70)
    assert killed, "no read task was found still running a second after it started, to kill"
    assert not Path(f"/proc/{killed[0]}").exists()
    assert [int(r["index"][0][0]) for r in got] == list(range(8))
    assert digest_of((r["image"][0], r["label"][0]) for r in got) == digests[0]


def _task_pids(title: bytes) -> List[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(title):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _binary() -> str:
    from conftest import _binary as find

    return str(find())


NPY_FILES = ["classes.json", "images.npy", "labels.npy", "samples.txt"]


def test_convert_npy_in_slices_equals_one_machine_byte_for_byte(cluster, cli, tmp_path):
    local = tmp_path / "local"
    cli("convert", str(PIPELINES / "resnet50_train.toml"), "--data", str(TREE), "--out", str(local))
    out = tmp_path / "ray"
    result = iray.convert(PIPELINES / "resnet50_train.toml", TREE, out, slices=4, binary=_binary(), timeout_s=180)
    assert [s["slice"] for s in result["slices"]] == [0, 1, 2, 3]
    assert {s["node_id"] for s in result["slices"]} == node_ids(), "the slices ran on one node only"
    assert sorted(p.name for p in out.iterdir()) == NPY_FILES  # no slice folder left
    for name in NPY_FILES:
        assert (out / name).read_bytes() == (local / name).read_bytes(), name


def test_convert_shards_in_slices_holds_the_same_records(cluster, cli, tmp_path):
    local = tmp_path / "local"
    cli("convert", str(PIPELINES / "convert_jpeg256.toml"), "--data", str(TREE), "--format", "shards",
        "--out", str(local))
    out = tmp_path / "ray"
    result = iray.convert(PIPELINES / "convert_jpeg256.toml", TREE, out, slices=3, format="shards",
                          binary=_binary(), timeout_s=180)
    assert "merged 12 samples" in result["merge"]
    assert not (out / ".imgfeed-slices").exists()
    # the same records: every byte of every sample read back through the same pipeline
    for pipeline in ("resnet50_eval.toml", "resnet50_train.toml"):
        want = run_digests(cli, pipeline, "--data", str(local), "--batch-size", "2", "--epochs", "2")
        assert run_digests(cli, pipeline, "--data", str(out), "--batch-size", "2", "--epochs", "2") == want
    # and imgfeed.ray.read reads the merged copy into the same epoch
    ds = iray.read(PIPELINES / "resnet50_eval.toml", data=out, batch_size=2, parallelism=2)
    assert digest_of((i, l) for i, l, _ in read_batches(ds)) == run_digests(
        cli, "resnet50_eval.toml", "--data", str(local), "--batch-size", "2")[0]


def test_convert_a_killed_slice_task_is_retried_without_duplicates(cluster, cli, long_tree, tmp_path):
    local = tmp_path / "local"
    cli("convert", str(PIPELINES / "resnet50_eval.toml"), "--data", str(long_tree), "--out", str(local),
        "--workers", "1")
    out = tmp_path / "ray"
    killed: List[int] = []
    done = threading.Event()

    def kill_the_first_slice_task() -> None:
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            pids = _task_pids(b"ray::_convert_slice")
            if pids:
                time.sleep(0.7)
                if pids[0] in _task_pids(b"ray::_convert_slice"):
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_the_first_slice_task)
    killer.start()
    try:
        iray.convert(PIPELINES / "resnet50_eval.toml", long_tree, out, slices=1, args=["--workers", "1"],
                     binary=_binary(), timeout_s=180)
    finally:
        done.set()
        killer.join(timeout=70)
    assert killed, "no slice task was found still running to kill"
    assert sorted(p.name for p in out.iterdir()) == NPY_FILES
    for name in NPY_FILES:
        assert (out / name).read_bytes() == (local / name).read_bytes(), name


def test_convert_runs_the_wheels_command_without_binary(cluster, cli, tmp_path, monkeypatch):
    # No binary=, no IMGFEED_BIN, no imgfeed on the PATH: each task runs the command the
    # installed wheel carries (python -m imgfeed), the same as the crate's binary.
    monkeypatch.delenv("IMGFEED_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    local = tmp_path / "local"
    cli("convert", str(PIPELINES / "resnet50_eval.toml"), "--data", str(TREE), "--out", str(local))
    out = tmp_path / "ray"
    result = iray.convert(PIPELINES / "resnet50_eval.toml", TREE, out, slices=2, timeout_s=180)
    assert [s["returncode"] for s in result["slices"]] == [0, 0]
    for name in NPY_FILES:
        assert (out / name).read_bytes() == (local / name).read_bytes(), name


def test_runtime_env_pip_installs_the_wheel_offline_but_read_tasks_cannot_use_it(cluster, cli):
    # What docs/ray.md's "Installing on the cluster's workers" says, measured: Ray (2.60) pip-installs
    # the wheel offline into a virtualenv per runtime_env, but that virtualenv sees the base
    # interpreter's site-packages, not the node's environment: Ray Data's dependencies (pyarrow,
    # numpy, protobuf) are missing or at other versions there, so imgfeed.ray.read's tasks fail; the nodes need the wheel installed
    # in their own Python (as python/test.sh installs it in this environment).
    wheel = os.environ.get("IMGFEED_WHEEL")
    if not wheel:
        pytest.skip("IMGFEED_WHEEL (the built wheel's path) is not set: python/test.sh sets it")
    env = {"pip": [wheel]}

    @ray.remote(num_cpus=0, runtime_env=env)
    def where() -> str:
        import imgfeed

        return imgfeed.__file__

    path = ray.get(where.remote(), timeout=180)
    assert "runtime_resources/pip" in path and path != imgfeed.__file__
    ds = iray.read(PIPELINES / "resnet50_train.toml", data=TREE, epoch=1, batch_size=4, parallelism=2,
                   ray_remote_args={"runtime_env": env})
    # Which import fails depends on the base interpreter: a dependency it lacks
    # (ModuleNotFoundError) or one it holds at a version Ray's own modules cannot use (seen on
    # the CI machine: an older google.protobuf, "cannot import name 'struct_pb2'").
    with pytest.raises(Exception, match=r"ModuleNotFoundError: No module named|ImportError|cannot import name"):
        read_batches(ds)


def test_two_consumers_stopped_midway_resume_on_one(cluster):
    # 12 samples, 2 consumers each reading its shard (batches of 2): each reads one batch,
    # then the job comes back with one consumer, given consumer 1's state: it reads the 8
    # samples left, none repeated or lost, and its next pass is an ordinary epoch 1.
    pipe = PIPELINES / "resnet50_train.toml"
    kw = dict(batch_size=2, uneven="exact")
    before = []
    for r in range(2):
        ds = iray.read(pipe, data=TREE, num_shards=2, shard_id=r, parallelism=2, **kw)
        before += [batch_key(*b) for b in read_batches(ds)][:1]
    state = iray.state(pipe, data=TREE, epoch=0, batches=1, num_shards=2, shard_id=1, **kw)
    assert (state["epoch"], state["position"], state["worlds"][0]["num_shards"]) == (0, 4, 2)
    ds = iray.read(pipe, data=TREE, start=state, num_shards=1, shard_id=0, parallelism=3, **kw)
    rest = [batch_key(*b) for b in read_batches(ds)]
    assert len(rest) == 4
    assert sorted(i for idx, _ in before + rest for i in idx) == list(range(12))
    # byte for byte the Loader's resuming the same state
    loader = imgfeed.Loader(pipe, data=TREE, num_shards=1, shard_id=0, **kw)
    loader.load_state_dict(state)
    assert rest == [batch_key(b.images, b.labels, b.indices) for b in loader.batches()]
    # the second pass: epoch 1 of the new world
    want = [batch_key(*b) for b in loader_batches("resnet50_train.toml", 1, num_shards=1, shard_id=0, **kw)]
    assert [batch_key(*b) for b in read_batches(ds)] == want
    # a state of another seed is refused
    with pytest.raises(ValueError, match="seed"):
        iray.read(pipe, data=TREE, start=state, seed=9, **kw)
