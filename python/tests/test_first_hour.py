"""What a new user hit in Python (issue 25): silence where the CLI warns, and a pipeline
built in Python checked late, in JSON's words."""

from __future__ import annotations

import warnings

import pytest

import imgfeed
import imgfeed.dataset as ds
import imgfeed.dataset.transforms as C2
import imgfeed.dataset.vision as C
from imgfeed import dtype as mstype

from conftest import EVAL, TREE


def _imgfeed_warnings(caught):
    return [str(w.message) for w in caught if str(w.message).startswith("imgfeed:")]


def test_an_epoch_with_no_batch_warns_once_per_epoch():
    loader = imgfeed.Loader(EVAL, batch_size=1000, workers=2)
    for epoch in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert list(loader) == []
        said = _imgfeed_warnings(caught)
        assert len(said) == 1, said
        assert f"epoch {epoch}" in said[0] and "12 samples" in said[0] and "1000" in said[0], said

    data = ds.ImageFolderDataset(str(TREE), shuffle=False)
    data = data.map(C.Decode(), input_columns="image").map(C.CenterCrop(32), input_columns="image")
    data = data.batch(1000, drop_remainder=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(data.create_tuple_iterator(output_numpy=True, num_epochs=1)) == []
    said = _imgfeed_warnings(caught)
    assert len(said) == 1 and "no batch" in said[0], said


def test_skipped_samples_are_named_once_per_epoch(bad_tree):
    loader = imgfeed.Loader(EVAL, data=str(bad_tree), batch_size=2, workers=2, on_error="skip", shuffle=False)
    for epoch in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            n = sum(len(labels) for _, labels in loader)
        assert n == 12
        said = _imgfeed_warnings(caught)
        assert len(said) == 1, said
        assert f"epoch {epoch}: 1 bad sample skipped" in said[0], said
        assert "zz_truncated.jpg" in said[0] and "truncated" in said[0], said

    # MindSpore's error-samples mode: the same warning from the dataset's iterator
    ds.config.set_error_samples_mode(ds.config.ErrorSamplesMode.SKIP)
    try:
        data = ds.ImageFolderDataset(str(bad_tree), shuffle=False)
        data = data.map([C.Decode(), C.CenterCrop(32)], input_columns="image")
        data = data.map(C2.TypeCast(mstype.int32), input_columns="label").batch(2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = list(data.create_tuple_iterator(output_numpy=True, num_epochs=1))
        assert sum(len(r[1]) for r in rows) == 12
        said = _imgfeed_warnings(caught)
        assert len(said) == 1 and "zz_truncated.jpg" in said[0], said
    finally:
        ds.config.set_error_samples_mode(ds.config.ErrorSamplesMode.RETURN)


def test_a_good_epoch_warns_nothing():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(list(imgfeed.Loader(EVAL, batch_size=4, workers=2))) == 3
    assert _imgfeed_warnings(caught) == []


def test_a_python_pipeline_is_checked_when_made_naming_the_op():
    source = {"kind": "image_folder", "root": str(TREE)}
    with pytest.raises(ValueError) as e:
        imgfeed.Pipeline(source=source, ops=[{"op": "decode"}, {"op": "decod"}])
    message = str(e.value)
    assert "ops[1] (decod)" in message and "unknown variant `decod`" in message, message
    assert "line 1" not in message and "column" not in message, message

    with pytest.raises(ValueError) as e:
        imgfeed.Pipeline(source=source, ops=[{"op": "decode"}, {"op": "resize", "sizee": 256}])
    message = str(e.value)
    assert "ops[1] (resize)" in message and "sizee" in message, message

    with pytest.raises(ValueError) as e:
        imgfeed.Pipeline(source={"kind": "image_foldr", "root": str(TREE)}, ops=[{"op": "decode"}])
    assert str(e.value).startswith("invalid pipeline: source:"), str(e.value)

    with pytest.raises(ValueError) as e:
        imgfeed.Pipeline(source=source, ops=[{"op": "decode"}], engine={"workerz": 2})
    assert "engine:" in str(e.value) and "workerz" in str(e.value), str(e.value)

    # a good one still builds, and replace() checks what it changes
    p = imgfeed.Pipeline(source=source, ops=[{"op": "decode"}, {"op": "center_crop", "size": 32}], batch_size=4)
    assert len(imgfeed.Loader(p, workers=2)) == 3
    with pytest.raises(ValueError) as e:
        p.replace(uneven="evenly")
    assert "source:" in str(e.value) and "evenly" in str(e.value), str(e.value)
