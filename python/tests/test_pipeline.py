"""``imgfeed.Pipeline`` built in code: its batch ops, and the uint8 split of its ops
(``imgfeed._uint8``, what ``imgfeed.ray.read(uint8=True)`` runs) checked against the engine's
own op names."""

from __future__ import annotations

import numpy as np
import pytest

import imgfeed
from imgfeed import _imgfeed, _uint8

from conftest import PIPELINES, TREE

SOURCE = {"kind": "image_folder", "root": str(TREE)}
OPS = [
    {"op": "decode"},
    {"op": "resize", "size": 40},
    {"op": "center_crop", "size": 32},
    {"op": "rescale", "rescale": 1 / 255},
    {"op": "hwc_to_chw"},
]


def test_batch_ops_are_given_to_the_engine():
    p = imgfeed.Pipeline(source=SOURCE, ops=OPS, batch_size=12,
                         batch_ops=[{"op": "one_hot", "num_classes": 3}, {"op": "mixup", "alpha": 0.4}])
    assert [o["op"] for o in p.config["batch_ops"]] == ["one_hot", "mixup"]
    assert [s for s, _ in p.check()][-2:] == ["one_hot", "mixup"]
    images, labels = next(iter(imgfeed.Loader(p, workers=2)))
    assert images.shape == (12, 3, 32, 32) and labels.shape == (12, 3)
    # soft labels, mixed across the class boundaries of the batch: rows summing to one
    assert np.allclose(labels.sum(axis=1), 1.0) and (labels.max(axis=1) < 1.0).any()
    with pytest.raises(ValueError, match="mixing needs soft labels"):
        imgfeed.Pipeline(source=SOURCE, ops=OPS, batch_ops=[{"op": "mixup"}]).build()
    with pytest.raises(ValueError, match="batch_ops"):
        imgfeed.Pipeline(source=SOURCE, ops=OPS, batch_ops=[{"op": "mixupp"}])
    with pytest.raises(TypeError, match="one_hot"):
        imgfeed.Pipeline(source=SOURCE, ops=OPS, batch_ops=["mixup"])


def test_the_uint8_split_names_only_the_engines_ops():
    names = set(_imgfeed.op_names())
    assert set(_uint8._VALUE_OPS) <= names, set(_uint8._VALUE_OPS) - names
    assert set(_uint8._LAYOUT_OPS) <= names, set(_uint8._LAYOUT_OPS) - names


def test_the_uint8_split_keeps_layout_ops_and_refuses_the_rest():
    p = imgfeed.Pipeline.from_file(PIPELINES / "resnet50_eval.toml").replace(data=str(TREE))
    kept, removed = _uint8.uint8_pipeline(p)
    assert [o["op"] for o in removed] == ["normalize"]
    assert "hwc_to_chw" in [o["op"] for o in kept.config["ops"]]
    assert kept.build().output_spec()["dtype"] == "uint8"
    late = imgfeed.Pipeline(source=SOURCE, ops=OPS[:4] + [{"op": "center_crop", "size": 16}])
    with pytest.raises(ValueError, match="only hwc_to_chw"):
        _uint8.uint8_pipeline(late)
