"""MindRecord and TFRecord read in place from Python through MindSpore's dataset classes
``imgfeed.dataset.MindDataset`` and ``TFRecordDataset``: a MindRecord group written by
``imgfeed convert --format mindrecord`` (MindSpore's own writer's files are in the
``mindspore`` tests below and in tests/mindrecord.rs), read from any of its names as
``ImageFolderDataset`` reads the tree; the TFRecord fixture written by the ``tfrecord``
package (fixtures/records/make_records.py) with its 1-based labels."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import imgfeed.dataset as ds
import imgfeed.dataset.transforms as C2
import imgfeed.dataset.vision as C
from imgfeed import dtype as mstype

from conftest import FIXTURES, PIPELINES, TREE


def eval_batches(data_set, image, label):
    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255]
    std = [0.229 * 255, 0.224 * 255, 0.225 * 255]
    trans = [C.Decode(), C.Resize(256), C.CenterCrop(224), C.Normalize(mean=mean, std=std), C.HWC2CHW()]
    data_set = data_set.map(operations=trans, input_columns=image)
    data_set = data_set.map(operations=C2.TypeCast(mstype.int32), input_columns=label)
    data_set = data_set.batch(4)
    it = data_set.create_tuple_iterator(output_numpy=True, num_epochs=1)
    return [(np.array(x), np.array(y)) for x, y in it]


@pytest.fixture(scope="module")
def group(cli, tmp_path_factory):
    """The tree as a MindRecord group of several files, in the tree's order (original bytes)."""
    out = tmp_path_factory.mktemp("mr")
    conv = out / "orig.toml"
    conv.write_text(f'[source]\nkind = "image_folder"\nroot = "{TREE}"\n[store]\nmode = "original"\n')
    cli("convert", str(conv), "--format", "mindrecord", "--out", str(out / "g"), "--shard-size", "150KB")
    files = sorted((out / "g").glob("data.mindrecord[0-9]*"))
    files = [f for f in files if not f.name.endswith(".db")]
    assert len(files) >= 2
    return files


def test_mind_dataset_reads_a_group_from_any_of_its_names_as_the_tree(group):
    want = eval_batches(ds.ImageFolderDataset(str(TREE), shuffle=False, num_shards=2, shard_id=1), "image", "label")
    for files in (str(group[0]), str(group[-1]), [str(f) for f in group]):
        d = ds.MindDataset(files, shuffle=False, num_shards=2, shard_id=1)
        got = eval_batches(d, "data", "label")
        assert len(got) == len(want) == 2
        for (a, b), (c, e) in zip(got, want):
            assert a.tobytes() == c.tobytes() and np.array_equal(b, e)
    assert ds.MindDataset(str(group[0])).get_dataset_size() == 12
    # A list of one file reads that file only, as MindSpore's does.
    assert ds.MindDataset([str(group[0])]).get_dataset_size() < 12
    assert ds.MindDataset(str(group[0])).get_col_names() == ["data", "label"]
    with pytest.raises(NotImplementedError, match="columns_list"):
        ds.MindDataset(str(group[0]), columns_list=["data", "label", "file_name"])
    with pytest.raises(NotImplementedError, match="num_padded"):
        ds.MindDataset(str(group[0]), num_padded=2)
    with pytest.raises(ValueError, match="column \\\\?\"nope\\\\?\""):
        ds.MindDataset(str(group[0]), columns_list=["nope", "label"])


def test_mind_dataset_hands_a_store_url_to_the_engine_as_one(monkeypatch):
    """A file named by a store URL reaches the engine as that URL, not made a local path
    (the read itself, against moto, is tests/mindrecord_store.rs's): here, with no
    credentials and the metadata server not asked, the client's setup fails naming it,
    before any request."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_SKIP_SIGNATURE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("IMGFEED_NO_METADATA", "true")
    first, second = "s3://bucket/mr/tree.mindrecord0", "s3://bucket/mr/tree.mindrecord1"
    with pytest.raises(ValueError, match=r"^dataset s3://bucket/mr/tree\.mindrecord0: cannot set up"):
        ds.MindDataset(first)
    with pytest.raises(ValueError, match=r"^dataset s3://bucket/mr/tree\.mindrecord0::s3://bucket/mr/tree\.mindrecord1: "):
        ds.MindDataset([first, second])


def test_tfrecord_dataset_reads_the_tfrecord_packages_file():
    path = str(FIXTURES / "records" / "small.tfrecord")

    def labels_and_sizes(d, label="image/class/label"):
        d = d.map(operations=[C.Decode(), C.Resize((8, 8))], input_columns=d.get_col_names()[0])
        d = d.map(operations=C2.TypeCast(mstype.int32), input_columns=label).batch(3)
        (images, labels), = [(np.array(x), np.array(y)) for x, y in d.create_tuple_iterator(output_numpy=True, num_epochs=1)]
        return labels.tolist(), images.shape

    d = ds.TFRecordDataset(path, shuffle=False)
    assert d.get_col_names() == ["image/encoded", "image/class/label"]
    assert labels_and_sizes(d) == ([1, 2, 3], (3, 8, 8, 3))
    d = ds.TFRecordDataset(str(FIXTURES / "records" / "small.tfrecord.gz"), shuffle=False, label_offset=-1)
    assert labels_and_sizes(d)[0] == [0, 1, 2]
    d = ds.TFRecordDataset(path, columns_list=["image/encoded", "image/class/label"], num_shards=2, shard_id=1,
                           shard_equal_rows=True, shuffle=False)
    assert d.get_dataset_size() == 2
    with pytest.raises(NotImplementedError, match="shard_equal_rows"):
        ds.TFRecordDataset(path, num_shards=2, shard_id=0)
    with pytest.raises(NotImplementedError, match="schema"):
        ds.TFRecordDataset(path, schema="schema.json")
    with pytest.raises(NotImplementedError, match="ZLIB"):
        ds.TFRecordDataset(path, compression_type="ZLIB")


@pytest.mark.mindspore
def test_mind_dataset_gives_mindspores_rows_on_mindspores_files(tmp_path):
    """A group written by MindSpore's FileWriter (shard_num 2), read from its second file:
    MindSpore's MindDataset yields the tree's files and labels in order, and imgfeed's the
    tree's batches."""
    pytest.importorskip("mindspore", reason="needs the mindspore package: run bash python/envs.sh mindspore")
    import mindspore.dataset as msds

    writer = FIXTURES / "records" / "write_tree.py"
    subprocess.run([sys.executable, str(writer), "mindrecord", str(TREE), str(tmp_path / "t.mindrecord"), "2"], check=True)
    name = str(tmp_path / "t.mindrecord1")
    theirs = [
        (r["data"].tobytes(), int(r["label"]))
        for r in msds.MindDataset(name, columns_list=["data", "label"], shuffle=False).create_dict_iterator(output_numpy=True)
    ]
    # MindSpore's rows are the tree's files in the tree's order ...
    exts = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}
    classes = sorted(d.name for d in TREE.iterdir() if d.is_dir())
    tree = [
        (f.read_bytes(), label)
        for label, c in enumerate(classes)
        for f in sorted((TREE / c).iterdir(), key=lambda p: p.name)
        if not f.name.startswith(".") and f.suffix.lower() in exts
    ]
    assert len(theirs) == 12 and theirs == tree
    # ... and imgfeed's MindDataset of the group gives ImageFolderDataset's batches of the tree.
    want = eval_batches(ds.ImageFolderDataset(str(TREE), shuffle=False), "image", "label")
    got = eval_batches(ds.MindDataset(name, columns_list=["data", "label"], shuffle=False), "data", "label")
    assert len(got) == len(want) == 3
    for (a, b), (c, e) in zip(got, want):
        assert a.tobytes() == c.tobytes() and np.array_equal(b, e)
