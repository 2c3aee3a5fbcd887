"""Parquet files read in place from Python: ``imgfeed.Loader(pipeline, data=FOLDER or PATTERN)``
and ``imgfeed.dataset.ParquetDataset``, on files Hugging Face ``datasets`` writes from the
fixture tree (``fixtures/records/write_tree.py parquet``, run in the ``formats`` environment of
``python/envs.sh``; without it these tests are skipped, unless ``IMGFEED_FORMAT_TESTS=required``)."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

import imgfeed
import imgfeed.dataset as ds
import imgfeed.dataset.transforms as C2
import imgfeed.dataset.vision as C
from imgfeed import dtype as mstype

from conftest import EVAL, FIXTURES, REPO, TRAIN, TREE, copies, digest_of, run_digests


@pytest.fixture(scope="module")
def parquet(tmp_path_factory):
    """The tree as three Parquet files of two-row row groups, by HF ``datasets``."""
    env = subprocess.run(
        ["bash", str(REPO / "python" / "envs.sh"), "--path", "formats"], capture_output=True, text=True
    )
    python = os.path.join(env.stdout.strip(), "bin", "python")
    if env.returncode != 0 or not os.path.exists(python):
        why = "the formats environment is not made: bash python/envs.sh formats"
        if os.environ.get("IMGFEED_FORMAT_TESTS") == "required":
            pytest.fail(f"IMGFEED_FORMAT_TESTS=required, but {why}")
        pytest.skip(why)
    out = tmp_path_factory.mktemp("hf")
    subprocess.run(
        [python, str(FIXTURES / "records" / "write_tree.py"), "parquet", str(TREE), str(out), "3"],
        check=True,
        capture_output=True,
    )
    return out


def pattern(folder) -> str:
    return str(folder / "train-{00000..00002}-of-00003.parquet")


def test_loader_reads_parquet_files_as_the_tree(cli, converted, parquet):
    loader = imgfeed.Loader(EVAL, data=str(parquet), batch_size=4, workers=2)
    assert loader.num_samples == 12
    got = copies(loader)
    images, labels = converted("resnet50_eval.toml", "--batch-size", "4")
    assert np.concatenate([x for x, _ in got]).tobytes() == images.tobytes()
    assert np.array_equal(np.concatenate([y for _, y in got]), labels)
    digests = run_digests(cli, "resnet50_train.toml", "--batch-size", "4", "--epochs", "2")
    for data in (pattern(parquet), str(parquet)):
        loader = imgfeed.Loader(TRAIN, data=data, batch_size=4, workers=2)
        got = []
        for epoch in range(2):
            loader.set_epoch(epoch)
            got.append(digest_of(copies(loader)))
        assert got == digests, data


def test_parquet_dataset_reads_the_files_as_image_folder_dataset_reads_the_tree(parquet):
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
    files = sorted(str(p) for p in parquet.glob("*.parquet"))
    for urls in (pattern(parquet), files, str(parquet)):
        got = eval_batches(ds.ParquetDataset(urls, shuffle=False, num_shards=2, shard_id=1))
        assert len(got) == len(want) == 2
        for (a, b), (c, d) in zip(got, want):
            assert a.tobytes() == c.tobytes() and np.array_equal(b, d)
    assert ds.ParquetDataset(pattern(parquet)).get_dataset_size() == 12
    # The class names of the files' `huggingface` metadata.
    assert ds.ParquetDataset(str(parquet)).get_class_indexing() == {"bird": 0, "cat": 1, "coffee": 2}
    with pytest.raises(ValueError, match='no image column "photo"'):
        ds.ParquetDataset(pattern(parquet), image="photo").get_dataset_size()
