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
    ({"on_error": "skip"}, ["--on-error", "skip"], "resnet50_eval.toml"),
    ({"usage": "test"}, ["--usage", "test"], "cifar10_train.toml"),
    ({"endpoint": "http://127.0.0.1:9"}, ["--endpoint", "http://127.0.0.1:9"], "resnet50_eval.toml"),
    ({"cache_dir": "/tmp/c"}, ["--cache-dir", "/tmp/c"], "resnet50_eval.toml"),
    ({"cache_size": "2GB"}, ["--cache-size", "2GB"], "resnet50_eval.toml"),
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
