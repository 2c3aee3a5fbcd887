"""``Pipeline.replace`` and the command line's flags are one override, applied by the engine:
each keyword gives the tables ``imgfeed check --print-config`` prints for its flag."""

from __future__ import annotations

import json

import pytest

import imgfeed

from conftest import PIPELINES, TREE

# (replace's keywords, the command line's flags, the pipeline file)
CASES = [
    ({"data": str(TREE)}, ["--data", str(TREE)], "resnet50_eval.toml"),
    ({"batch_size": 4}, ["--batch-size", "4"], "resnet50_eval.toml"),
    ({"workers": 3}, ["--workers", "3"], "resnet50_eval.toml"),
    ({"work_unit": 5}, ["--work-unit", "5"], "resnet50_eval.toml"),
    ({"shuffle": True}, ["--shuffle"], "resnet50_eval.toml"),
    ({"shuffle": False}, ["--no-shuffle"], "resnet50_train.toml"),
    ({"seed": 7}, ["--seed", "7"], "resnet50_train.toml"),
    ({"num_shards": 2, "shard_id": 1}, ["--num-shards", "2", "--shard-id", "1"], "resnet50_train.toml"),
    ({"uneven": "drop"}, ["--uneven", "drop"], "resnet50_train.toml"),
    ({"shuffle_window": 2}, ["--shuffle-window", "2"], "resnet50_train.toml"),
    ({"on_error": "skip"}, ["--on-error", "skip"], "resnet50_eval.toml"),
    ({"usage": "test"}, ["--usage", "test"], "cifar10_train.toml"),
    ({"endpoint": "http://127.0.0.1:9"}, ["--endpoint", "http://127.0.0.1:9"], "resnet50_eval.toml"),
    ({"cache_dir": "/tmp/c"}, ["--cache-dir", "/tmp/c"], "resnet50_eval.toml"),
    ({"cache_size": "2GB"}, ["--cache-size", "2GB"], "resnet50_eval.toml"),
    ({"fetch": "ranges"}, ["--fetch", "ranges"], "resnet50_eval.toml"),
]


@pytest.mark.parametrize("kwargs,flags,pipeline", CASES, ids=[" ".join(c[1][:1]) for c in CASES])
def test_replace_gives_the_tables_of_the_command_lines_flag(cli, kwargs, flags, pipeline):
    path = str(PIPELINES / pipeline)
    base = imgfeed.Pipeline.from_file(path)
    replaced = base.replace(**kwargs).config
    # the flag changed something (else the comparison would prove nothing)
    assert replaced != base.config, kwargs
    printed = json.loads(cli("check", path, *flags, "--print-config"))
    assert replaced == printed


def test_a_refused_value_is_refused_in_the_engines_words(cli):
    p = imgfeed.Pipeline.from_file(PIPELINES / "resnet50_eval.toml")
    for kwargs, words in [
        ({"batch_size": 0}, "batch.size must be at least 1"),
        ({"workers": 0}, "engine.workers must be between 1 and 1024"),
        ({"on_error": "ignore"}, "engine: on_error: unknown variant `ignore`"),
        ({"num_shards": 2, "shard_id": 2}, "source: shard_id 2 must be below num_shards 2"),
        ({"usage": "test"}, "cifar10 and cifar100 sources only"),
    ]:
        with pytest.raises(ValueError) as e:
            p.replace(**kwargs)
        assert words in str(e.value), (kwargs, str(e.value))


def test_every_setting_with_a_flag_is_compared_with_it():
    """A setting added to the engine's table without a case above fails here."""
    flagged = {s["name"] for s in imgfeed.settings() if s["flag"]}
    covered = {k for kwargs, _, _ in CASES for k in kwargs}
    assert flagged == covered, flagged ^ covered
    # and each case's flag is the table's
    for kwargs, flags, _ in CASES:
        for name in kwargs:
            flag = next(s["flag"] for s in imgfeed.settings() if s["name"] == name)
            negation = flag == "--shuffle" and kwargs[name] is False
            assert (negation and "--no-shuffle" in flags) or flag in flags, (name, flags)


def test_replace_and_loader_take_every_setting_and_no_other(tmp_path):
    names = [s["name"] for s in imgfeed.settings()]
    assert "drop_remainder" in names and "num_shards" in names
    p = imgfeed.Pipeline.from_file(PIPELINES / "resnet50_eval.toml")
    assert all(f"``{n}``" in imgfeed.Pipeline.replace.__doc__ for n in names)
    assert p.replace(drop_remainder=False).config["batch"]["drop_remainder"] is False
    with pytest.raises(TypeError, match="batchsize"):
        p.replace(batchsize=4)
    with pytest.raises(TypeError, match="batchsize"):
        imgfeed.Loader(p, batchsize=4)
    loader = imgfeed.Loader(p, workers=1, batch_size=5, drop_last=False, work_unit=2, seed=3)
    assert (len(loader), loader.batch_size) == (3, 5)
    assert loader.pipeline.config["engine"]["work_unit"] == 2


def test_shards_go_together_by_the_engines_rule():
    p = imgfeed.Pipeline.from_file(PIPELINES / "resnet50_train.toml")
    for kwargs in ({"num_shards": 2}, {"shard_id": 0}):
        with pytest.raises(ValueError, match="num_shards and shard_id"):
            p.replace(**kwargs)
        with pytest.raises(ValueError, match="num_shards and shard_id"):
            imgfeed.Loader(p, **kwargs)


class _Counting:
    """The native module, counting the calls that carry a pipeline's tables across."""

    def __init__(self, native, calls):
        self._native = native
        self._calls = calls

    def __getattr__(self, name):
        return getattr(self._native, name)

    @property
    def Pipeline(self):
        native, calls = self._native.Pipeline, self._calls

        class Counted:
            def __new__(cls, *args, **kwargs):
                calls.append("Pipeline")
                return native(*args, **kwargs)

            def __getattr__(self, name):  # pragma: no cover - class attributes below
                return getattr(native, name)

        for name in ("with_overrides", "check_config", "apply_overrides", "load_config"):
            def counted(*args, _name=name, **kwargs):
                calls.append(_name)
                return getattr(native, _name)(*args, **kwargs)
            setattr(Counted, name, staticmethod(counted))
        return Counted


def test_a_loader_sends_its_pipeline_across_once(monkeypatch):
    import imgfeed._loader as loader_mod
    import imgfeed._pipeline as pipeline_mod

    calls = []
    for mod in (loader_mod, pipeline_mod):
        monkeypatch.setattr(mod, "_imgfeed", _Counting(mod._imgfeed, calls))
    loader = imgfeed.Loader(str(PIPELINES / "resnet50_eval.toml"), data=str(TREE), batch_size=4,
                            workers=2, seed=1, num_shards=1, shard_id=0)
    assert calls == ["with_overrides"]
    assert len(loader) == 3
    p = imgfeed.Pipeline.from_file(PIPELINES / "resnet50_eval.toml")
    del calls[:]
    imgfeed.Loader(p, batch_size=4, workers=2)
    assert calls == ["with_overrides"]
    # replace: one crossing, its answer not checked again
    del calls[:]
    p.replace(batch_size=2, workers=1)
    assert calls == ["apply_overrides"]


def test_the_mindspore_datasets_pair_their_shards_by_the_engines_rule():
    from imgfeed import dataset as ds

    with pytest.raises(ValueError) as e:
        ds.ImageFolderDataset(str(TREE), num_shards=2)
    assert "ImageFolderDataset" in str(e.value) and "num_shards and shard_id" in str(e.value)
    with pytest.raises(ValueError, match="shard_id 2 must be below num_shards 2"):
        ds.ImageFolderDataset(str(TREE), num_shards=2, shard_id=2)
    with pytest.raises(ValueError, match="num_shards"):
        ds.ImageFolderDataset(str(TREE), num_shards=True, shard_id=0)
