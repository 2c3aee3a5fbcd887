"""What a user hit in Python in the second hour (issue 34): torch's keywords, MindSpore's
``ds + ds``, and warnings that say they are imgfeed's and point at the user's line."""

from __future__ import annotations

import warnings

import pytest

import imgfeed
import imgfeed.dataset as ds
import imgfeed.dataset.vision as C

from conftest import EVAL, PIPELINES, TREE


def test_torchs_num_workers_points_at_workers():
    with pytest.raises(TypeError, match=r"'num_workers': imgfeed's is workers="):
        imgfeed.Loader(EVAL, batch_size=4, num_workers=2)
    with pytest.raises(TypeError, match=r"'pin_memory'"):
        imgfeed.Loader(EVAL, batch_size=4, pin_memory=True)
    # an unknown keyword of no library is still the plain TypeError
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'bogus' \(settings: "):
        imgfeed.Loader(EVAL, bogus=1)
    assert len(imgfeed.Loader(EVAL, batch_size=4, workers=2)) == 3


def test_adding_datasets_names_mindsporess_concat():
    a = ds.ImageFolderDataset(str(TREE), shuffle=False)
    with pytest.raises(NotImplementedError, match=r"Dataset\.concat"):
        a + a


def _ours(caught):
    return [w for w in caught if issubclass(w.category, UserWarning) and "imgfeed" in str(w.message)]


def test_warnings_say_imgfeed_and_point_at_the_users_line():
    # a pipeline's own warning (normalize in 0-1 units), issued when it is built
    data = ds.ImageFolderDataset(str(TREE), shuffle=False)
    data = data.map([C.Decode(), C.Resize(64), C.CenterCrop(32),
                     C.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]), C.HWC2CHW()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data.batch(4).create_tuple_iterator(output_numpy=True, num_epochs=1)
    said = _ours(caught)
    assert said and all(str(w.message).startswith("imgfeed: ") for w in said), [str(w.message) for w in said]
    assert {w.filename for w in said} == {__file__}, [(w.filename, w.lineno) for w in said]

    # an epoch's warning from the native module, while the user's loop asks for batches
    loader = imgfeed.Loader(EVAL, batch_size=1000, workers=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in loader:  # the line the warning names
            pass
    said = _ours(caught)
    assert len(said) == 1 and str(said[0].message).startswith("imgfeed: epoch 0"), said
    assert said[0].filename == __file__, (said[0].filename, said[0].lineno)


def test_a_pipeline_file_without_a_root_takes_data(tmp_path):
    text = (PIPELINES / "resnet50_eval.toml").read_text()
    no_root = tmp_path / "no_root.toml"
    no_root.write_text("".join(line + "\n" for line in text.splitlines() if not line.startswith("root =")))
    assert len(imgfeed.Loader(str(no_root), data=str(TREE), batch_size=4, workers=1)) == 3
    with pytest.raises(ValueError, match=r"no dataset root.*data="):
        imgfeed.Loader(str(no_root), batch_size=4)
