"""The torch-shaped Loader, zero copy, bounded memory, errors, resume and Ctrl-C."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import imgfeed
from imgfeed import _imgfeed

from conftest import EVAL, PIPELINES, REPO, TRAIN, TREE, copies, digest_of, rss_bytes, run_digests


def test_loader_equals_convert(converted):
    loader = imgfeed.Loader(EVAL, batch_size=4, workers=2)
    assert len(loader) == 3 and loader.num_samples == 12
    assert loader.classes == {"bird": 0, "cat": 1, "coffee": 2}
    got = copies(loader)
    images, labels = converted("resnet50_eval.toml", "--batch-size", "4")
    assert np.concatenate([x for x, _ in got]).tobytes() == images.tobytes()
    assert np.array_equal(np.concatenate([y for _, y in got]), labels)


def test_loader_epochs_match_run_for_any_worker_count(cli):
    digests = run_digests(cli, "resnet50_train.toml", "--batch-size", "4", "--epochs", "3")
    for workers in (1, 3):
        loader = imgfeed.Loader(TRAIN, batch_size=4, workers=workers)
        got = []
        for epoch in range(3):
            loader.set_epoch(epoch)
            got.append(digest_of(copies(loader)))
        assert got == digests
    # Without set_epoch, each completed pass moves to the next epoch.
    loader = imgfeed.Loader(TRAIN, batch_size=4)
    assert [digest_of(copies(loader)) for _ in range(3)] == digests


def test_pipeline_built_in_python_equals_the_file(converted):
    p = imgfeed.Pipeline(
        source={"kind": "image_folder", "root": str(TREE)},
        ops=[{"op": "decode"}, {"op": "resize", "size": 256}, {"op": "center_crop", "size": 224},
             {"op": "normalize", "mean": [123.675, 116.28, 103.53], "std": [58.395, 57.12, 57.375]},
             {"op": "hwc_to_chw"}, {"op": "type_cast", "column": "label", "dtype": "int32"}],
        batch_size=4, drop_remainder=True, engine={"workers": 2})
    assert [s for s, _ in p.check()] == ["source", "decode", "resize", "center_crop", "normalize", "hwc_to_chw", "type_cast"]
    got = copies(imgfeed.Loader(p))
    images, _ = converted("resnet50_eval.toml", "--batch-size", "4")
    assert np.concatenate([x for x, _ in got]).tobytes() == images.tobytes()
    with pytest.raises(ValueError, match="center_crop"):
        imgfeed.Pipeline(source={"kind": "image_folder", "root": str(TREE)}, ops=[{"op": "center_crop", "size": 2}]).build()
    with pytest.raises(ValueError, match="unknown variant"):
        imgfeed.Pipeline(source={"kind": "image_folder", "root": str(TREE)}, ops=[{"op": "sharpen"}]).build()


def test_batches_view_the_pool_without_copies():
    loader = imgfeed.Loader(EVAL, batch_size=2, workers=2)
    first = None
    for batch in loader.batches():
        images, labels = batch.images, batch.labels
        # Views of the native batch's buffer, not copies: the base owns the memory.
        assert type(images.base).__name__ == "BatchMemory" and images.base is labels.base
        assert not images.flags.owndata and images.flags.writeable and images.flags.c_contiguous
        first = images.__array_interface__["data"][0]
        del images, labels, batch
        break
    loader.set_epoch(0)
    # Released, the buffer went back to the pool: a later batch is written into it again.
    later = set()
    for _ in range(3):
        for batch in loader.batches():
            later.add(batch.images.__array_interface__["data"][0])
            del batch
    assert first in later


def test_kept_batches_are_never_overwritten():
    loader = imgfeed.Loader(EVAL, batch_size=1, workers=2)
    kept = list(loader)  # the trainer keeps every array: the pool hands out new buffers
    again = copies(imgfeed.Loader(EVAL, batch_size=1, workers=2))
    assert len({x.__array_interface__["data"][0] for x, _ in kept}) == 12
    for (x, y), (cx, cy) in zip(kept, again):
        assert x.tobytes() == cx.tobytes() and np.array_equal(y, cy)
    # Writing into a batch (in-place ops in a trainer) leaves the next epoch's batches alone.
    for x, _ in kept:
        x[...] = 0
    del kept
    gc.collect()
    fresh = copies(loader)
    assert all(a.tobytes() == b.tobytes() for (a, _), (b, _) in zip(fresh, again))


def test_memory_stays_flat_over_200_epochs():
    loader = imgfeed.Loader(EVAL, batch_size=4, workers=2)
    for epoch in range(200):
        for images, labels in loader:
            float(images[0, 0, 0, 0])
        if epoch == 19:
            gc.collect()
            after_20 = rss_bytes()
    gc.collect()
    growth = rss_bytes() - after_20
    assert growth < 8 << 20, f"RSS grew {growth / 2**20:.1f} MiB from epoch 20 to 200"


def test_resume_gives_exactly_the_remaining_batches():
    full = copies(imgfeed.Loader(TRAIN, batch_size=2, workers=2))
    loader = imgfeed.Loader(TRAIN, batch_size=2, workers=2)
    for i, _ in enumerate(loader):
        if i == 1:
            state = loader.state_dict()
            break
    assert (state["epoch"], state["batch"], state["position"]) == (0, 2, 4)
    assert state["worlds"] == [{"from": 0, "batch": 0, "num_shards": 1, "batch_size": 2, "drop_remainder": True}]
    resumed = imgfeed.Loader(TRAIN, batch_size=2, workers=1)
    resumed.load_state_dict(state)
    rest = copies(resumed)
    assert len(rest) == len(full) - 2
    assert all(a[0].tobytes() == b[0].tobytes() for a, b in zip(rest, full[2:]))
    # After a whole epoch the state points at the next one.
    after = resumed.state_dict()
    assert (after["epoch"], after["batch"], after["position"]) == (1, 0, 0)
    # The usual resume loop calls set_epoch with the loaded epoch: the position stays.
    again = imgfeed.Loader(TRAIN, batch_size=2, workers=2)
    again.load_state_dict(state)
    again.set_epoch(0)
    assert [a[0].tobytes() for a in copies(again)] == [b[0].tobytes() for b in full[2:]]
    other = imgfeed.Loader(TRAIN, batch_size=2, workers=2)
    other.load_state_dict(state)
    other.set_epoch(1)  # another epoch: from its start
    assert len(copies(other)) == len(full)
    with pytest.raises(ValueError):
        resumed.load_state_dict({"batch": 1})
    # The per-rank format of earlier versions is still read, with a warning saying what it
    # assumes (it names no world, seed or dataset to check).
    legacy = imgfeed.Loader(TRAIN, batch_size=2, workers=2)
    with pytest.warns(UserWarning, match="same num_shards"):
        legacy.load_state_dict({"epoch": 0, "batch": 2, "sample": 4})
    assert [a[0].tobytes() for a in copies(legacy)] == [b[0].tobytes() for b in full[2:]]


def _indices(loader):
    return [int(i) for b in loader.batches() for i in b.indices]


@pytest.mark.parametrize("uneven", ["exact", "pad", "drop"])
@pytest.mark.parametrize("world2", [2, 3, 5])
def test_a_state_of_4_ranks_resumes_on_another_number_of_ranks(uneven, world2):
    # 4 ranks (shuffled, 12 images, batch 1) read one batch each; rank 2's state alone is
    # given to the loaders of the new world, which split the 8 samples left among them.
    kw = dict(data=str(TREE), batch_size=1, drop_last=False, uneven=uneven)
    before, states = [], []
    for rank in range(4):
        loader = imgfeed.Loader(EVAL, shuffle=True, num_shards=4, shard_id=rank, **kw)
        for b in loader.batches():
            before += [int(i) for i in b.indices]
            break
        states.append(loader.state_dict())
    assert {s["position"] for s in states} == {4}
    state = states[2]
    after, lens = [], []
    for rank in range(world2):
        loader = imgfeed.Loader(EVAL, shuffle=True, num_shards=world2, shard_id=rank, workers=1 + rank % 3, **kw)
        loader.load_state_dict(state)
        got = _indices(loader)
        # worker count changes nothing
        again = imgfeed.Loader(EVAL, shuffle=True, num_shards=world2, shard_id=rank, workers=4, **kw)
        again.load_state_dict(state)
        assert _indices(again) == got
        after += got
        lens.append(len(got))
        # the next epoch is an ordinary one of the new world
        assert loader.state_dict()["epoch"] == 1
        fresh = imgfeed.Loader(EVAL, shuffle=True, num_shards=world2, shard_id=rank, **kw)
        fresh.set_epoch(1)
        assert _indices(loader) == _indices(fresh)
    counts = {i: (before + after).count(i) for i in range(12)}
    if uneven == "exact":
        assert set(counts.values()) == {1}, counts
    elif uneven == "pad":
        assert min(counts.values()) >= 1 and len(set(lens)) == 1
        assert len(after) == world2 * -(-8 // world2)
    else:
        assert max(counts.values()) <= 1 and len(set(lens)) == 1
        assert len(after) == world2 * (8 // world2)


def test_a_foreign_state_is_refused_saying_what_differs(bad_tree):
    loader = imgfeed.Loader(EVAL, shuffle=True, seed=7, batch_size=2, num_shards=2, shard_id=0)
    next(iter(loader))
    state = loader.state_dict()
    with pytest.raises(ValueError, match=r"seed \(state: 7; here: 8\)"):
        imgfeed.Loader(EVAL, shuffle=True, seed=8, batch_size=2, num_shards=2, shard_id=0).load_state_dict(state)
    with pytest.raises(ValueError, match=r"dataset \(state: 12 samples.*here: 13 samples"):
        imgfeed.Loader(EVAL, data=str(bad_tree), shuffle=True, seed=7, batch_size=2).load_state_dict(state)
    with pytest.raises(ValueError, match="pipeline ops"):
        imgfeed.Loader(TRAIN, shuffle=True, seed=7, batch_size=2).load_state_dict(state)
    # the same job on another world and batch size is not foreign
    imgfeed.Loader(EVAL, shuffle=True, seed=7, batch_size=3, num_shards=3, shard_id=1).load_state_dict(state)


def test_resume_after_skipped_samples_is_exact(bad_tree):
    kwargs = dict(data=str(bad_tree), batch_size=3, workers=2, on_error="skip", shuffle=False)
    full = copies(imgfeed.Loader(EVAL, **kwargs))
    assert sum(len(y) for _, y in full) == 12  # 13 files, the truncated one left out
    loader = imgfeed.Loader(EVAL, **kwargs)
    it = iter(loader)
    for _ in range(3):
        next(it)  # the bad file (sample 8 of 13) falls in the third batch
    state = loader.state_dict()
    del it
    assert state["sample"] == 10  # one sample further than 3 batches × 3
    resumed = imgfeed.Loader(EVAL, **kwargs)
    resumed.load_state_dict(state)
    rest = copies(resumed)
    assert [y.tolist() for _, y in rest] == [y.tolist() for _, y in full[3:]]


def test_sample_error_fields(bad_tree):
    loader = imgfeed.Loader(EVAL, data=str(bad_tree), batch_size=4, workers=2, shuffle=False)
    with pytest.raises(imgfeed.SampleError) as e:
        copies(loader)
    err = e.value
    assert isinstance(err, ValueError)
    assert err.path == os.path.join("cat", "zz_truncated.jpg")
    assert (err.index, err.stage, err.kind) == (8, "decode", "truncated")
    assert err.reason and err.path in str(err)
    replaced = imgfeed.Loader(EVAL, data=str(bad_tree), batch_size=4, workers=2, on_error="replace", shuffle=False)
    batches = list(replaced.batches())
    assert [len(b) for b in batches] == [4, 4, 4]  # 13 samples, drop_remainder: 3 full batches
    skipped = [s for b in batches for s in b.skipped]
    assert len(skipped) == 1 and isinstance(skipped[0], imgfeed.SampleError) and skipped[0].kind == "truncated"


def test_shard_from_the_launcher_environment(monkeypatch):
    whole = imgfeed.Loader(EVAL, batch_size=1, workers=2)
    order = [int(b.indices[0]) for b in whole.batches()]
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    rank1 = imgfeed.Loader(EVAL, batch_size=1, workers=2)
    assert len(rank1) == 6
    assert [int(b.indices[0]) for b in rank1.batches()] == order[1::2]
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ValueError, match="RANK"):
        imgfeed.Loader(EVAL, batch_size=1)


@pytest.mark.torch
def test_as_torch_shares_memory():
    torch = pytest.importorskip("torch", reason="torch is not installed here: python/test.sh runs this in bash python/envs.sh torch's environment")
    loader = imgfeed.Loader(EVAL, batch_size=4, workers=2, as_torch=True)
    for batch in loader.batches():
        images = torch.from_numpy(batch.images)
        assert images.data_ptr() == batch.images.__array_interface__["data"][0]
        break
    for images, labels in loader:
        assert isinstance(images, torch.Tensor) and images.shape == (4, 3, 224, 224)
        assert labels.dtype == torch.int32
        break


@pytest.mark.torch
def test_as_torch_yields_bfloat16_tensors_equal_to_torchs_own_cast():
    torch = pytest.importorskip("torch", reason="torch is not installed here: python/test.sh runs this in bash python/envs.sh torch's environment")
    config = imgfeed.Pipeline.from_file(EVAL).config
    config["ops"].append({"op": "type_cast", "column": "image", "dtype": "bfloat16"})
    wide, _ = next(iter(imgfeed.Loader(EVAL, batch_size=4, workers=2, as_torch=True)))
    narrow, _ = next(iter(imgfeed.Loader(imgfeed.Pipeline.from_config(config), batch_size=4, workers=2,
                                         as_torch=True)))
    assert narrow.dtype == torch.bfloat16 and narrow.shape == (4, 3, 224, 224)
    assert torch.equal(narrow, wide.to(torch.bfloat16))


def spin_rate(seconds: float, during=None) -> float:
    """Increments per second a Python thread makes while `during()` runs (or for `seconds`)."""
    counter = [0]
    done = threading.Event()

    def spin():
        while not done.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    t0 = time.perf_counter()
    t.start()
    try:
        if during is None:
            time.sleep(seconds)
        else:
            during()
    finally:
        done.set()
        t.join()
    return counter[0] / (time.perf_counter() - t0)


def test_gil_is_released_while_the_engine_works(slow_tree):
    loader = imgfeed.Loader(EVAL, data=str(slow_tree), batch_size=1, workers=1)
    counted = []
    alone = spin_rate(0.3)
    shared = spin_rate(0, during=lambda: counted.append(sum(1 for _ in loader)))
    assert counted == [3]
    # The loop waits about 1.5 s for three slow images; with the GIL held while it waits, a
    # Python thread would hardly run at all.
    assert shared > 0.4 * alone, (shared, alone)


def test_ctrl_c_raises_keyboard_interrupt_and_stops_the_workers(slow_tree):
    script = textwrap.dedent(
        f"""
        import os, sys, time
        import imgfeed
        base = len(os.listdir("/proc/self/task"))
        loader = imgfeed.Loader({EVAL!r}, data={str(slow_tree)!r}, batch_size=1, workers=1)
        try:
            for epoch in range(1000):
                for images, labels in loader:
                    print("batch", flush=True)
        except KeyboardInterrupt:
            print("interrupted", time.monotonic(), flush=True)
            t = time.time()
            while len(os.listdir("/proc/self/task")) > base and time.time() - t < 10:
                time.sleep(0.01)
            print("threads left", len(os.listdir("/proc/self/task")) - base, flush=True)
            sys.exit(3)
        """
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "batch"
    assert p.stdout.readline().strip() == "batch"
    # The next batch is half a second of decoding away: 150 ms after a batch the loop is
    # waiting for it inside the engine (a signal landing while Python code runs is
    # Python's own business).
    time.sleep(0.15)
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        out, _ = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == 3, out
    lines = [ln for ln in out.splitlines() if ln != "batch"]
    latency = float(lines[0].split()[1]) - sent
    assert latency < 0.25, f"KeyboardInterrupt came {latency:.3f} s after SIGINT"
    assert lines[1] == "threads left 0"  # every worker stopped and joined


def test_stubs_cover_the_native_module():
    import ast
    from pathlib import Path

    stub = Path(_imgfeed.__file__).with_name("_imgfeed.pyi")
    if not stub.exists():
        stub = REPO / "python" / "imgfeed" / "_imgfeed.pyi"
    tree = ast.parse(stub.read_text())
    declared = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    declared |= {t.id for n in tree.body if isinstance(n, (ast.AnnAssign, ast.Assign))
                 for t in ([n.target] if isinstance(n, ast.AnnAssign) else n.targets) if isinstance(t, ast.Name)}
    public = {n for n in dir(_imgfeed) if not n.startswith("_")} | {"__version__"}
    assert public <= declared, public - declared
    for name in public - {"OFFSET64", "__version__"}:
        assert getattr(_imgfeed, name).__doc__, name


def test_every_public_name_has_a_docstring():
    import inspect

    import imgfeed.dataset as ds
    import imgfeed.dataset.transforms as tr
    import imgfeed.dataset.vision as vi

    for module in (imgfeed, ds, ds.config, vi, tr, imgfeed.dtype):
        assert module.__doc__, module
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj):
                assert obj.__doc__, f"{module.__name__}.{name}"
                for attr, member in vars(obj).items() if inspect.isclass(obj) else []:
                    if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                        assert member.__doc__, f"{module.__name__}.{name}.{attr}"


def test_skipped_samples_of_a_dropped_last_batch_are_reported(bad_tree):
    # 13 files, batches of 4 with drop_last: the last batch (one sample) is dropped; with
    # the bad file moved to the end of the order it is among the dropped.
    import shutil

    last = bad_tree / "zz" / "zz_truncated.jpg"
    last.parent.mkdir()
    shutil.move(str(bad_tree / "cat" / "zz_truncated.jpg"), last)
    loader = imgfeed.Loader(EVAL, data=str(bad_tree), batch_size=4, workers=2, on_error="skip", shuffle=False)
    batches = list(loader.batches())
    assert [len(b) for b in batches] == [4, 4, 4] and not any(b.skipped for b in batches)
    assert [e.kind for e in loader.tail_errors] == ["truncated"]
    assert loader.tail_errors[0].path.endswith("zz_truncated.jpg")
    # Without drop_last the bad file would be alone in a last batch: no empty batch comes.
    keep = imgfeed.Loader(EVAL, data=str(bad_tree), batch_size=4, workers=2, on_error="skip", shuffle=False,
                          drop_last=False)
    assert [len(b) for b in keep.batches()] == [4, 4, 4]
    assert len(keep.tail_errors) == 1


def test_a_second_pass_supersedes_the_first_loudly():
    loader = imgfeed.Loader(EVAL, batch_size=2, workers=2)
    first = iter(loader)
    next(first)
    second = copies(loader)  # a whole pass while the first is suspended
    assert len(second) == 6
    with pytest.raises(RuntimeError, match="one pass at a time"):
        next(first)


def test_the_v2_recipe_gives_soft_labels_and_the_same_batches_for_any_worker_count():
    """resnet50_train_tv2.toml (TrivialAugmentWide, RandomErasing, one_hot with smoothing,
    MixUp/CutMix): float32 label rows of 1000 that sum to 1, mixed across samples, and
    batches that do not depend on the worker count."""
    tv2 = str(PIPELINES / "resnet50_train_tv2.toml")

    def epoch(workers):
        loader = imgfeed.Loader(tv2, data=str(TREE), batch_size=4, workers=workers)
        return copies(loader)

    one, two = epoch(1), epoch(2)
    assert len(one) == 3
    for (x1, y1), (x2, y2) in zip(one, two):
        assert x1.shape == (4, 3, 176, 176) and x1.dtype == np.float32
        assert y1.shape == (4, 1000) and y1.dtype == np.float32
        np.testing.assert_allclose(y1.sum(axis=1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(x1, x2)
        np.testing.assert_array_equal(y1, y2)
    # smoothing 0.1 alone would give 0.9001 at one class and 1e-4 elsewhere; mixing two
    # samples of different classes puts weight on two classes
    labels = np.concatenate([y for _, y in one])
    assert labels.min() >= 1e-4 - 1e-7
    assert (np.sort(labels, axis=1)[:, -2] > 1e-3).any()


def test_an_object_storage_root_is_passed_as_given():
    # tests/s3.rs reads such roots from a real S3 server; here: the URL reaches the engine
    # unchanged (not made absolute like a path), and the engine takes the tables.
    p = imgfeed.Pipeline.from_file(PIPELINES / "resnet50_eval.toml").replace(data="s3://bucket/ds")
    assert p.config["source"]["root"] == "s3://bucket/ds"
    local = imgfeed.Pipeline.from_file(PIPELINES / "resnet50_eval.toml").replace(data="rel/dir")
    assert local.config["source"]["root"] == os.path.abspath("rel/dir")
