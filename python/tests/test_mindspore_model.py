"""MindSpore's own ``Model`` (``train``, ``eval``, callbacks, ``initial_epoch``, the sink-mode
bridge) over imgfeed.dataset pipelines, with the real mindspore package: the batches the
model trained on are recorded from MindSpore's callback parameters and compared with the
imgfeed binary's for the same seed and epochs.

Run in the cached environment: bash python/envs.sh mindspore (python/test.sh runs them)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ms = pytest.importorskip("mindspore", reason="needs the mindspore package: run bash python/envs.sh mindspore")

import mindspore.dataset as msds  # noqa: E402
from mindspore import nn, ops  # noqa: E402
from mindspore.train import Callback, CheckpointConfig, LossMonitor, Model, ModelCheckpoint, TimeMonitor  # noqa: E402

import imgfeed.dataset as ds  # noqa: E402
import imgfeed.dataset.transforms as C2  # noqa: E402
import imgfeed.dataset.vision as C  # noqa: E402
from imgfeed import dtype as mstype  # noqa: E402

from conftest import FIXTURES, REPO, TREE, digest_of, run_digests  # noqa: E402

pytestmark = pytest.mark.mindspore

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


@pytest.fixture(autouse=True)
def mindspore_defaults():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)
    yield
    ds.config._seed, ds.config._seed_set = 5489, False  # as in a fresh process
    ds.config.set_num_parallel_workers(8)


def create_dataset(dataset_path, batch_size=4, do_train=True):
    # MindSpore's ResNet-50 create_dataset with imgfeed's imports (as in test_dataset.py).
    data_set = ds.ImageFolderDataset(dataset_path, num_parallel_workers=2, shuffle=do_train)
    trans = [C.Decode(), C.Resize(256), C.CenterCrop(224), C.Normalize(mean=MEAN, std=STD), C.HWC2CHW()]
    data_set = data_set.map(operations=trans, input_columns="image", num_parallel_workers=2)
    data_set = data_set.map(operations=C2.TypeCast(mstype.int32), input_columns="label", num_parallel_workers=2)
    return data_set.batch(batch_size, drop_remainder=do_train)


def imagefolder_train(batch_size=4):
    # pipelines/resnet50_train.toml in MindSpore's words (its seed is 1).
    ds.config.set_seed(1)
    data = ds.ImageFolderDataset(str(TREE), num_parallel_workers=2, shuffle=True)
    trans = [C.RandomCropDecodeResize(224, scale=(0.08, 1.0), ratio=(0.75, 1.3333333333333333)),
             C.RandomHorizontalFlip(prob=0.5), C.Normalize(mean=MEAN, std=STD), C.HWC2CHW()]
    data = data.map(operations=trans, input_columns="image")
    data = data.map(operations=C2.TypeCast(mstype.int32), input_columns="label")
    return data.batch(batch_size, drop_remainder=True)


def cifar10_train(batch_size=4):
    # pipelines/cifar10_train.toml in MindSpore's words (its seed is 1).
    ds.config.set_seed(1)
    data = ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="train", shuffle=True, num_parallel_workers=2)
    trans = [C.RandomCrop(32, padding=4), C.RandomHorizontalFlip(0.5), C.Rescale(0.00392156862745098, 0.0),
             C.Normalize(mean=[0.4914, 0.4822, 0.4465], std=[0.2023, 0.1994, 0.2010]), C.HWC2CHW()]
    data = data.map(operations=trans, input_columns="image")
    data = data.map(operations=C2.TypeCast(mstype.int32), input_columns="label")
    return data.batch(batch_size, drop_remainder=True)


def cifar10_eval(batch_size=2):
    data = ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="test", shuffle=False, num_parallel_workers=2)
    trans = [C.Rescale(1.0 / 255.0, 0.0), C.Normalize(mean=[0.4914, 0.4822, 0.4465], std=[0.2023, 0.1994, 0.2010]),
             C.HWC2CHW()]
    data = data.map(operations=trans, input_columns="image")
    data = data.map(operations=C2.TypeCast(mstype.int32), input_columns="label")
    return data.batch(batch_size, drop_remainder=True)


class Tiny(nn.Cell):
    """Mean of each channel -> a dense layer: seconds for a test."""

    def __init__(self, classes=10):
        super().__init__()
        self.dense = nn.Dense(3, classes)

    def construct(self, x):
        return self.dense(ops.mean(x, (2, 3)))


def tiny_model(classes=10, metrics=None):
    net = Tiny(classes)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    return Model(net, loss_fn=loss, optimizer=opt, metrics=metrics)


class Record(Callback):
    """What the model was given at every step (MindSpore's ``train_dataset_element`` /
    ``eval_dataset_element``: the very tuple passed to the network), by epoch."""

    def __init__(self):
        super().__init__()
        self.train = {}
        self.eval = []
        self.losses = {}

    def on_train_step_begin(self, run_context):
        p = run_context.original_args()
        images, labels = p.train_dataset_element
        self.train.setdefault(p.cur_epoch_num, []).append((images.asnumpy(), labels.asnumpy()))

    def on_train_epoch_end(self, run_context):
        p = run_context.original_args()
        self.losses[p.cur_epoch_num] = float(p.net_outputs.asnumpy())

    def on_eval_step_begin(self, run_context):
        images, labels = run_context.original_args().eval_dataset_element
        self.eval.append((images.asnumpy(), labels.asnumpy()))


def digests(record):
    return [digest_of(record.train[e]) for e in sorted(record.train)]


# --- non-sink Model.train ------------------------------------------------------------
def test_model_train_imagefolder_three_epochs_trains_runs_batches_and_checkpoints(cli, tmp_path, capsys):
    data = imagefolder_train()
    assert data.get_dataset_size() == 3
    rec = Record()
    ckpt = ModelCheckpoint(prefix="tiny", directory=str(tmp_path),
                           config=CheckpointConfig(save_checkpoint_steps=3, keep_checkpoint_max=10))
    model = tiny_model(classes=3)
    # the ResNet-50 train.py call, sink_size and all
    model.train(3, data, callbacks=[rec, LossMonitor(), TimeMonitor(), ckpt], sink_size=3, dataset_sink_mode=False)
    # Every epoch is read, each the engine epoch of that number: reshuffled, new random crops.
    assert sorted(rec.train) == [1, 2, 3] and all(len(b) == 3 for b in rec.train.values())
    got = digests(rec)
    assert got == run_digests(cli, "resnet50_train.toml", "--batch-size", "4", "--epochs", "3")
    assert len(set(got)) == 3
    images, labels = rec.train[1][0]
    assert images.shape == (4, 3, 224, 224) and images.dtype == np.float32 and labels.dtype == np.int32
    # LossMonitor printed every step; ModelCheckpoint wrote one loadable file per epoch.
    assert len(re.findall(r"epoch: \d+ step: \d+, loss is", capsys.readouterr().out)) == 9
    files = sorted(p.name for p in tmp_path.glob("tiny-*.ckpt"))
    assert files == ["tiny-1_3.ckpt", "tiny-2_3.ckpt", "tiny-3_3.ckpt"]
    params = ms.load_checkpoint(str(tmp_path / "tiny-3_3.ckpt"))
    np.testing.assert_array_equal(params["dense.weight"].asnumpy(), model.predict_network.dense.weight.asnumpy())


def test_model_train_cifar10_and_eval_accuracy(cli, converted, tmp_path):
    data = cifar10_train()
    rec = Record()
    model = tiny_model(classes=10, metrics={"acc"})
    ckpt = ModelCheckpoint(prefix="cifar", directory=str(tmp_path),
                           config=CheckpointConfig(save_checkpoint_steps=3, keep_checkpoint_max=10))
    model.train(2, data, callbacks=[rec, LossMonitor(), ckpt], dataset_sink_mode=False)
    assert digests(rec) == run_digests(cli, "cifar10_train.toml", "--batch-size", "4", "--epochs", "2")
    assert sorted(p.name for p in tmp_path.glob("cifar-*.ckpt")) == ["cifar-1_3.ckpt", "cifar-2_3.ckpt"]

    # Model.eval: an accuracy, from exactly `imgfeed convert`'s batches; and again (the
    # dataset's reset() after the first pass leaves it ready for another).
    evaluated = cifar10_eval(2)
    for _ in range(2):
        rec.eval = []
        result = model.eval(evaluated, callbacks=[rec])
        assert set(result) == {"acc"} and 0.0 <= result["acc"] <= 1.0
        images, labels = converted("cifar10_eval.toml", "--batch-size", "2")
        assert len(rec.eval) == 2
        assert np.concatenate([b[0] for b in rec.eval]).tobytes() == images.tobytes()
        np.testing.assert_array_equal(np.concatenate([b[1] for b in rec.eval]), labels)
    # accuracy is what the trained network predicts on those images
    net = model.predict_network
    logits = np.concatenate([net(ms.Tensor(b[0])).asnumpy() for b in rec.eval])
    want = float(np.mean(np.argmax(logits, axis=1) == labels))
    assert result["acc"] == pytest.approx(want)


def test_resnet50_create_dataset_trains_two_epochs_past_reset(cli):
    """The issue: the first epoch's end called Dataset.reset, which raised."""
    ds.config.set_seed(7)
    data = create_dataset(str(TREE), batch_size=4, do_train=True)
    rec = Record()
    tiny_model(classes=3).train(2, data, callbacks=[rec, LossMonitor()], sink_size=data.get_dataset_size(),
                                dataset_sink_mode=False)
    assert digests(rec) == run_digests(cli, "resnet50_eval.toml", "--batch-size", "4", "--shuffle", "--seed", "7",
                                       "--epochs", "2")


# --- resume --------------------------------------------------------------------------
def test_initial_epoch_resumes_with_that_epochs_batches(cli):
    want = run_digests(cli, "cifar10_train.toml", "--batch-size", "4", "--epochs", "4")
    rec = Record()
    tiny_model().train(4, cifar10_train(), callbacks=[rec], dataset_sink_mode=False, initial_epoch=2)
    assert sorted(rec.train) == [3, 4]  # MindSpore's epoch numbers count from 1
    assert digests(rec) == want[2:]


def test_fit_resumes_training_and_evaluates_every_epoch_from_the_start(cli, converted):
    """Model.fit reads its evaluation set from inside the training loop: initial_epoch is
    the training set's, never the evaluation set's."""
    want = run_digests(cli, "cifar10_train.toml", "--batch-size", "4", "--epochs", "3")
    images, labels = converted("cifar10_eval.toml", "--batch-size", "2")
    rec = Record()
    tiny_model(metrics={"acc"}).fit(3, cifar10_train(), cifar10_eval(2), callbacks=[rec], initial_epoch=1)
    assert digests(rec) == want[1:]
    assert len(rec.eval) == 4  # two evaluations of two batches
    for k in (0, 2):
        assert np.concatenate([b[0] for b in rec.eval[k:k + 2]]).tobytes() == images.tobytes()


def test_set_init_step_resumes_mid_epoch_and_agrees_with_initial_epoch(cli):
    want = run_digests(cli, "cifar10_train.toml", "--batch-size", "4", "--epochs", "3")
    data = cifar10_train()
    data.set_init_step(2 * data.get_dataset_size())  # the epoch initial_epoch=2 starts
    rec = Record()
    tiny_model().train(3, data, callbacks=[rec], dataset_sink_mode=False, initial_epoch=2)
    assert digests(rec) == want[2:]
    # An init step in another epoch than initial_epoch is refused, not guessed at.
    other = cifar10_train()  # (MindSpore refuses a dataset another Model trained on)
    other.set_init_step(1)
    with pytest.raises(NotImplementedError, match="initial_epoch=2.*set_init_step\\(1\\)"):
        tiny_model().train(3, other, callbacks=[rec], dataset_sink_mode=False, initial_epoch=2)


# --- sink mode: the bridge to a MindSpore GeneratorDataset ------------------------------
def test_to_mindspore_is_a_generator_dataset_of_the_same_batches(cli):
    data = cifar10_train()
    bridge = data.to_mindspore()
    assert isinstance(bridge, msds.GeneratorDataset)
    assert bridge.get_dataset_size() == data.get_dataset_size() == 3
    assert bridge.get_col_names() == ["image", "label"]
    assert bridge.output_shapes() == [[4, 3, 32, 32], [4]]
    it = bridge.create_tuple_iterator(output_numpy=True, num_epochs=3)
    epochs = [[(np.array(i), np.array(l)) for i, l in it] for _ in range(3)]
    assert [digest_of(e) for e in epochs] == run_digests(cli, "cifar10_train.toml", "--batch-size", "4", "--epochs", "3")


def test_model_train_sink_mode_through_the_bridge(cli, tmp_path):
    data = imagefolder_train()
    bridge = data.to_mindspore()
    rec = Record()
    ckpt = ModelCheckpoint(prefix="sink", directory=str(tmp_path),
                           config=CheckpointConfig(save_checkpoint_steps=3, keep_checkpoint_max=10))
    # On CPU MindSpore runs sink mode's epochs by feeding from the host (there is no device
    # queue); on Ascend the same call sends the GeneratorDataset through the device queue.
    tiny_model(classes=3).train(2, bridge, callbacks=[rec, LossMonitor(), ckpt], sink_size=3, dataset_sink_mode=True)
    assert digests(rec) == run_digests(cli, "resnet50_train.toml", "--batch-size", "4", "--epochs", "2")
    assert sorted(p.name for p in tmp_path.glob("sink-*.ckpt")) == ["sink-1_3.ckpt", "sink-2_3.ckpt"]


def test_the_bridge_resumes_at_the_init_steps_epoch(cli):
    want = run_digests(cli, "cifar10_train.toml", "--batch-size", "4", "--epochs", "4")
    data = cifar10_train()
    data.set_init_step(2 * data.get_dataset_size())
    rec = Record()
    tiny_model().train(4, data.to_mindspore(), callbacks=[rec], dataset_sink_mode=True, initial_epoch=2)
    assert sorted(rec.train) == [3, 4] and digests(rec) == want[2:]
    data.set_init_step(1)
    with pytest.raises(NotImplementedError, match="inside an epoch"):
        data.to_mindspore()


def test_sink_mode_on_imgfeeds_own_dataset_names_the_bridge():
    """What MindSpore's sink mode does on Ascend/GPU (train/_utils.py's _exec_datagraph,
    which makes the device queue): refused, naming to_mindspore()."""
    from mindspore.train._utils import _exec_datagraph

    with pytest.raises(NotImplementedError, match="to_mindspore"):
        _exec_datagraph(cifar10_train(), 3)


def test_a_dataset_derived_from_a_trained_one_is_new_to_mindspore():
    data = cifar10_train()
    tiny_model().train(1, data, dataset_sink_mode=False)
    assert hasattr(data, "__model_hash__")
    repeated = data.repeat(2)
    assert not hasattr(repeated, "__model_hash__")
    rec = Record()
    tiny_model().train(1, repeated, callbacks=[rec], dataset_sink_mode=False)  # another Model: allowed
    assert len(rec.train[1]) == 6


# --- MindSpore's names -----------------------------------------------------------------
def test_the_committed_mindspore_names_are_the_installed_mindspores():
    sys.path.insert(0, str(REPO / "python" / "tools"))
    try:
        import mindspore_names
    finally:
        sys.path.pop(0)
    from imgfeed.dataset._mindspore_names import MINDSPORE_VERSION, NAMES

    assert MINDSPORE_VERSION == ms.__version__
    assert {k: sorted(v) for k, v in NAMES.items()} == mindspore_names.names()


def test_every_mindspore_name_is_implemented_or_refused_by_name():
    from imgfeed.dataset._mindspore_names import NAMES

    modules = {"dataset": ds, "config": ds.config, "vision": C, "transforms": C2}
    implemented = {}
    for key, module in modules.items():
        for name in NAMES[key]:
            try:
                getattr(module, name)
            except NotImplementedError as e:
                assert name in str(e)
            else:
                implemented.setdefault(key, []).append(name)
    assert {"ImageFolderDataset", "Cifar10Dataset", "Cifar100Dataset", "MindDataset",
            "TFRecordDataset"} <= set(implemented["dataset"])
    assert "TypeCast" in implemented["transforms"] and "RandomResizedCrop" in implemented["vision"]
    for name in ("GeneratorDataset", "DistributedSampler", "VOCDataset"):
        with pytest.raises(NotImplementedError, match=f"mindspore.dataset.{name}"):
            getattr(ds, name)


# --- the example -----------------------------------------------------------------------
def test_the_example_trains_and_evaluates_with_and_without_sink_mode(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK_SIZE", "RANK_ID")}
    losses = []
    for sink in (False, True):
        ckpt = tmp_path / ("sink" if sink else "plain")
        args = [sys.executable, str(REPO / "examples" / "mindspore_train.py"), "--epochs", "2",
                "--ckpt_dir", str(ckpt)] + (["--sink"] if sink else [])
        out = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr
        found = re.findall(r"^epoch (\d+) loss ([0-9.]+)$", out.stdout, re.M)
        assert [e for e, _ in found] == ["1", "2"]
        losses.append(found)
        assert re.search(r"^eval accuracy [0-9.]+$", out.stdout, re.M)
        assert sorted(p.name for p in ckpt.glob("*.ckpt")) == ["tinynet-1_3.ckpt", "tinynet-2_3.ckpt"]
    # the bridge fed the same batches: the same seeds give the same losses
    assert losses[0] == losses[1]


# --- resume on another number of ranks (RANK_SIZE) ---------------------------------------
def sharded(num_shards, shard_id, seed=3):
    # Deterministic per sample (no random op): an image's digest names its sample.
    ds.config.set_seed(seed)
    data = ds.ImageFolderDataset(str(TREE), num_parallel_workers=2, shuffle=True, num_shards=num_shards,
                                 shard_id=shard_id)
    trans = [C.Decode(), C.Resize(32), C.CenterCrop(32), C.Normalize(mean=MEAN, std=STD), C.HWC2CHW()]
    data = data.map(operations=trans, input_columns="image")
    data = data.map(operations=C2.TypeCast(mstype.int32), input_columns="label")
    return data.batch(1, drop_remainder=True)


class StopAfter(Callback):
    """Records each step's image digests by MindSpore epoch; after ``steps`` steps saves the
    dataset's state (as a checkpoint callback would) and stops training."""

    def __init__(self, steps=None):
        super().__init__()
        self.steps, self.state, self.seen = steps, None, {}

    def on_train_step_end(self, run_context):
        p = run_context.original_args()
        images = p.train_dataset_element[0].asnumpy()
        self.seen.setdefault(p.cur_epoch_num, []).extend(digest_of([(im[None], np.zeros(1))]) for im in images)
        if self.steps is not None and p.cur_step_num == self.steps:
            self.state = p.train_dataset.state_dict()
            run_context.request_stop()


@pytest.mark.parametrize("rank_size", [2, 3])
def test_model_train_stopped_on_4_ranks_resumes_on_another_rank_size(rank_size):
    names = [digest_of([(im[None], np.zeros(1))]) for im, _ in sharded(1, 0).create_tuple_iterator(
        num_epochs=1, output_numpy=True)]
    assert len(set(names)) == 12
    before, states = [], []
    for r in range(4):  # RANK_SIZE=4: each rank trains one step of batch 1, then stops
        cb = StopAfter(1)
        tiny_model(classes=3).train(2, sharded(4, r), callbacks=[cb], dataset_sink_mode=False)
        before += cb.seen[1]
        states.append(cb.state)
    assert {s["position"] for s in states} == {4} and states[0]["worlds"][0]["num_shards"] == 4
    rest, later = [], []
    for r in range(rank_size):  # RANK_SIZE=rank_size, from rank 3's state
        data = sharded(rank_size, r)
        data.load_state_dict(states[3])
        cb = StopAfter()
        tiny_model(classes=3).train(2, data, callbacks=[cb], dataset_sink_mode=False, initial_epoch=0)
        rest.append(cb.seen[1])
        # the next epoch is an ordinary epoch of the new world
        fresh = sharded(rank_size, r).create_tuple_iterator(num_epochs=2, output_numpy=True)
        list(fresh)
        assert cb.seen[2] == [digest_of([(im[None], np.zeros(1))]) for im, _ in fresh]
    # 8 samples left: 4 each on 2 ranks (each sample once), 3 each on 3 (pad: one repeat)
    assert {len(r) for r in rest} == {-(-8 // rank_size)}
    seen = before + [d for r in rest for d in r]
    assert set(seen) == set(names)
    assert len(seen) == 12 + (rank_size * -(-8 // rank_size) - 8)
    # A state from another seed is refused, saying so.
    with pytest.raises(ValueError, match=r"seed \(state: 3; here: 4\)"):
        sharded(rank_size, 0, seed=4).load_state_dict(states[3])
