"""WebDataset tars read in place from Python: ``imgfeed.Loader(pipeline, data="…/train-{0000..0002}.tar")``
and ``imgfeed.dataset.WebDataset``, on tars written by Python's own ``tarfile`` (its default pax
format) from the fixture tree in the tree's order, against the binary on the tree."""

from __future__ import annotations

import io
import os
import tarfile

import numpy as np
import pytest

import imgfeed
import imgfeed.dataset as ds
import imgfeed.dataset.transforms as C2
import imgfeed.dataset.vision as C
from imgfeed import dtype as mstype

from conftest import EVAL, TRAIN, TREE, copies, digest_of, run_digests

EXTS = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}


@pytest.fixture(scope="module")
def tars(tmp_path_factory):
    """The tree as three tars of at most 5 samples: ``KEY.<ext>`` + ``KEY.cls``."""
    out = tmp_path_factory.mktemp("wds")
    classes = sorted(d.name for d in TREE.iterdir() if d.is_dir())
    samples = [
        (f"{c}/{f.stem}", f, label)
        for label, c in enumerate(classes)
        for f in sorted((TREE / c).iterdir(), key=lambda p: p.name)
        if not f.name.startswith(".") and f.suffix.lower() in EXTS
    ]
    for shard in range(0, len(samples), 5):
        with tarfile.open(out / f"train-{shard // 5:04d}.tar", "w") as tar:
            for key, f, label in samples[shard : shard + 5]:
                tar.add(f, arcname=f"{key}{f.suffix.lower()}")
                info = tarfile.TarInfo(f"{key}.cls")
                data = str(label).encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out


def pattern(tars) -> str:
    return str(tars / "train-{0000..0002}.tar")


def test_loader_reads_a_brace_pattern_of_tars_as_the_tree(cli, converted, tars):
    loader = imgfeed.Loader(EVAL, data=pattern(tars), batch_size=4, workers=2)
    assert loader.num_samples == 12
    got = copies(loader)
    images, labels = converted("resnet50_eval.toml", "--batch-size", "4")
    assert np.concatenate([x for x, _ in got]).tobytes() == images.tobytes()
    assert np.array_equal(np.concatenate([y for _, y in got]), labels)
    digests = run_digests(cli, "resnet50_train.toml", "--batch-size", "4", "--epochs", "2")
    for data in (pattern(tars), str(tars)):
        loader = imgfeed.Loader(TRAIN, data=data, batch_size=4, workers=2)
        got = []
        for epoch in range(2):
            loader.set_epoch(epoch)
            got.append(digest_of(copies(loader)))
        assert got == digests, data


def test_webdataset_class_reads_the_tars_as_image_folder_dataset_reads_the_tree(tars):
    def eval_batches(data_set):
        mean = [0.485 * 255, 0.456 * 255, 0.406 * 255]
        std = [0.229 * 255, 0.224 * 255, 0.225 * 255]
        trans = [C.Decode(), C.Resize(256), C.CenterCrop(224), C.Normalize(mean=mean, std=std), C.HWC2CHW()]
        data_set = data_set.map(operations=trans, input_columns="image")
        data_set = data_set.map(operations=C2.TypeCast(mstype.int32), input_columns="label")
        data_set = data_set.batch(4)
        it = data_set.create_tuple_iterator(output_numpy=True, num_epochs=1)
        return [(np.array(x), np.array(y)) for x, y in it]

    want = eval_batches(ds.ImageFolderDataset(str(TREE), shuffle=False, num_shards=2, shard_id=1))
    files = sorted(str(p) for p in tars.glob("*.tar"))
    for urls in (pattern(tars), files, str(tars)):
        got = eval_batches(ds.WebDataset(urls, shuffle=False, num_shards=2, shard_id=1))
        assert len(got) == len(want) == 2
        for (a, b), (c, d) in zip(got, want):
            assert a.tobytes() == c.tobytes() and np.array_equal(b, d)
    assert ds.WebDataset(pattern(tars)).get_dataset_size() == 12
    with pytest.raises(ValueError, match="no label member"):
        ds.WebDataset(pattern(tars), label="txt")
