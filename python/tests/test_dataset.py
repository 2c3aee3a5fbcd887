"""The MindSpore-shaped API: the ResNet-50 `create_dataset` of MindSpore's migration guide,
with only its imports changed, against the imgfeed binary on the same data."""

from __future__ import annotations

import numpy as np
import pytest

import imgfeed
import imgfeed.dataset as ds
import imgfeed.dataset.transforms as C2
import imgfeed.dataset.vision as C
from imgfeed import dtype as mstype

from conftest import FIXTURES, TREE, digest_of, run_digests


def create_dataset(dataset_path, batch_size=32, rank_size=1, rank_id=0, do_train=True):
    # MindSpore's create_dataset, verbatim but for the imports above.
    data_set = ds.ImageFolderDataset(dataset_path, num_parallel_workers=8, shuffle=do_train,
                                     num_shards=rank_size, shard_id=rank_id)
    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255]
    std = [0.229 * 255, 0.224 * 255, 0.225 * 255]
    trans = [C.Decode(), C.Resize(256), C.CenterCrop(224), C.Normalize(mean=mean, std=std), C.HWC2CHW()]
    type_cast_op = C2.TypeCast(mstype.int32)
    data_set = data_set.map(operations=trans, input_columns="image", num_parallel_workers=8)
    data_set = data_set.map(operations=type_cast_op, input_columns="label", num_parallel_workers=8)
    data_set = data_set.batch(batch_size, drop_remainder=do_train)
    return data_set


@pytest.fixture(autouse=True)
def mindspore_defaults():
    yield
    ds.config._seed, ds.config._seed_set = 5489, False  # as in a fresh process
    ds.config.set_num_parallel_workers(8)
    ds.config.set_error_samples_mode(ds.config.ErrorSamplesMode.RETURN)


def collect(it):
    return [(np.array(images), np.array(labels)) for images, labels in it]


def test_create_dataset_eval_equals_convert_bit_for_bit(converted):
    data = create_dataset(str(TREE), batch_size=4, do_train=False)
    batches = collect(data.create_tuple_iterator(output_numpy=True, num_epochs=1))
    images, labels = converted("resnet50_eval.toml", "--batch-size", "4")
    assert len(batches) == 3
    got_images = np.concatenate([b[0] for b in batches])
    got_labels = np.concatenate([b[1] for b in batches])
    assert got_images.dtype == np.float32 and got_labels.dtype == np.int32
    assert got_images.shape == images.shape == (12, 3, 224, 224)
    assert got_images.tobytes() == images.tobytes()
    assert np.array_equal(got_labels, labels)


def test_create_dataset_train_equals_run_with_the_same_seed(cli, converted):
    ds.config.set_seed(7)
    data = create_dataset(str(TREE), batch_size=4, do_train=True)
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=2)
    epochs = [collect(it), collect(it)]
    digests = run_digests(cli, "resnet50_eval.toml", "--batch-size", "4", "--shuffle", "--seed", "7", "--epochs", "2")
    assert [digest_of(e) for e in epochs] == digests
    # Shuffled: epoch 0 is not the file order, and epoch 1 is another permutation.
    images, labels = converted("resnet50_eval.toml", "--batch-size", "4", "--shuffle", "--seed", "7")
    assert np.concatenate([b[0] for b in epochs[0]]).tobytes() == images.tobytes()
    order0 = np.concatenate([b[1] for b in epochs[0]])
    assert not np.array_equal(order0, np.sort(order0))
    assert digests[0] != digests[1]


def test_training_ops_equal_the_training_pipeline(cli):
    ds.config.set_seed(1)
    data = ds.ImageFolderDataset(str(TREE), num_parallel_workers=2, shuffle=True)
    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255]
    std = [0.229 * 255, 0.224 * 255, 0.225 * 255]
    trans = [C.RandomCropDecodeResize(224, scale=(0.08, 1.0), ratio=(0.75, 1.3333333333333333)),
             C.RandomHorizontalFlip(prob=0.5), C.Normalize(mean=mean, std=std), C.HWC2CHW()]
    data = data.map(operations=trans, input_columns="image")
    data = data.map(operations=C2.TypeCast(mstype.int32), input_columns="label")
    data = data.batch(4, drop_remainder=True)
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=2)
    got = [digest_of(collect(it)), digest_of(collect(it))]
    assert got == run_digests(cli, "resnet50_train.toml", "--batch-size", "4", "--epochs", "2")


def cifar10_eval(batch_size):
    data = ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="test", shuffle=False)
    trans = [C.Rescale(1.0 / 255.0, 0.0), C.Normalize(mean=[0.4914, 0.4822, 0.4465], std=[0.2023, 0.1994, 0.2010]),
             C.HWC2CHW()]
    data = data.map(operations=trans, input_columns="image", num_parallel_workers=2)
    data = data.map(operations=C2.TypeCast(mstype.int32), input_columns="label")
    return data.batch(batch_size, drop_remainder=True)


def test_random_vertical_flip_mirrors_rows():
    """prob=1 reverses the rows of every image; prob=0 leaves them as they are."""
    def images(prob):
        d = ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="test", shuffle=False)
        d = d.map([C.RandomVerticalFlip(prob)], input_columns="image").batch(4)
        return next(d.create_tuple_iterator(output_numpy=True, num_epochs=1))[0]

    plain, flipped = images(0.0), images(1.0)
    assert plain.shape == (4, 32, 32, 3)
    assert not np.array_equal(plain, plain[:, ::-1])
    np.testing.assert_array_equal(flipped, plain[:, ::-1])


def test_random_color_adjust_is_pillows_enhance():
    """A one-point range applies exactly that factor: the images equal Pillow's
    ImageEnhance (what torchvision's ColorJitter calls on PIL images); MindSpore's defaults
    change nothing."""
    from PIL import Image, ImageEnhance

    def images(op):
        d = ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="test", shuffle=False)
        d = d.map([op], input_columns="image").batch(4)
        return next(d.create_tuple_iterator(output_numpy=True, num_epochs=1))[0]

    plain = images(C.RandomColorAdjust())
    assert not np.array_equal(plain, images(C.RandomColorAdjust(brightness=0.4)))
    for op, enhance in [
        (C.RandomColorAdjust(brightness=(0.5, 0.5)), lambda im: ImageEnhance.Brightness(im).enhance(0.5)),
        (C.RandomColorAdjust(contrast=(1.6, 1.6)), lambda im: ImageEnhance.Contrast(im).enhance(1.6)),
        (C.RandomColorAdjust(saturation=(0.3, 0.3)), lambda im: ImageEnhance.Color(im).enhance(0.3)),
    ]:
        got = images(op)
        want = np.stack([np.asarray(enhance(Image.fromarray(p))) for p in plain])
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="brightness must be non-negative"):
        C.RandomColorAdjust(brightness=-1)


def test_pad_and_random_crop_modes_are_np_pad():
    """Pad's modes are np.pad's (what torchvision uses on PIL images), and RandomCrop with a
    padding mode crops the padded image."""
    def images(ops):
        d = ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="test", shuffle=False)
        d = d.map(ops, input_columns="image").batch(4)
        return next(d.create_tuple_iterator(output_numpy=True, num_epochs=1))[0]

    plain = images([C.RandomColorAdjust()])
    for border, mode in [(C.Border.EDGE, "edge"), (C.Border.REFLECT, "reflect"), (C.Border.SYMMETRIC, "symmetric")]:
        got = images([C.Pad((1, 2, 3, 4), padding_mode=border)])
        want = np.pad(plain, ((0, 0), (2, 4), (1, 3), (0, 0)), mode)
        np.testing.assert_array_equal(got, want)
        # a crop the size of the padded image keeps all of it
        whole = images([C.RandomCrop(36, padding=2, padding_mode=border)])
        np.testing.assert_array_equal(whole, np.pad(plain, ((0, 0), (2, 2), (2, 2), (0, 0)), mode))
    got = images([C.Pad(3, fill_value=9)])
    np.testing.assert_array_equal(got, np.pad(plain, ((0, 0), (3, 3), (3, 3), (0, 0)), constant_values=9))
    with pytest.raises(ValueError, match="padding"):
        C.Pad((1, 2, 3))


def test_augmentation_policies_are_drawn_per_sample_and_repeatable():
    """AutoAugment, RandAugment and TrivialAugmentWide change the images, keep their shape,
    and give the same images for the same seed (draws from the sample's stream)."""
    def images(op):
        ds.config.set_seed(3)
        d = ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="test", shuffle=False)
        d = d.map([op], input_columns="image").batch(4)
        return next(d.create_tuple_iterator(output_numpy=True, num_epochs=1))[0]

    plain = images(C.RandomColorAdjust())
    for make in (lambda: C.AutoAugment(C.AutoAugmentPolicy.CIFAR10), lambda: C.RandAugment(num_ops=3, magnitude=20),
                 lambda: C.TrivialAugmentWide(fill_value=(10, 20, 30))):
        a, b = images(make()), images(make())
        assert a.shape == plain.shape and a.dtype == np.uint8
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, plain)
    with pytest.raises(NotImplementedError, match="NEAREST"):
        C.RandAugment(interpolation=C.Inter.BILINEAR)
    with pytest.raises(ValueError, match="magnitude"):
        C.RandAugment(magnitude=31)


def test_cifar10_equals_convert(converted):
    data = cifar10_eval(2)
    batches = collect(data.create_tuple_iterator(output_numpy=True, num_epochs=1))
    images, labels = converted("cifar10_eval.toml", "--batch-size", "2")
    assert data.get_dataset_size() == len(batches) == 2
    assert np.concatenate([b[0] for b in batches]).tobytes() == images.tobytes()
    assert np.array_equal(np.concatenate([b[1] for b in batches]), labels)


def test_cifar10_training_ops_equal_the_training_pipeline(cli):
    ds.config.set_seed(1)
    data = ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="train", shuffle=True)
    trans = [C.RandomCrop(32, padding=4), C.RandomHorizontalFlip(0.5), C.Rescale(0.00392156862745098, 0.0),
             C.Normalize(mean=[0.4914, 0.4822, 0.4465], std=[0.2023, 0.1994, 0.2010]), C.HWC2CHW()]
    data = data.map(operations=trans, input_columns="image")
    data = data.map(operations=C2.TypeCast(mstype.int32), input_columns="label")
    data = data.batch(4, drop_remainder=True)
    got = digest_of(collect(data.create_tuple_iterator(output_numpy=True, num_epochs=1)))
    assert [got] == run_digests(cli, "cifar10_train.toml", "--batch-size", "4")


def test_type_cast_of_the_image_rounds_float32_to_float16_and_bfloat16():
    """MindSpore's TypeCast on the image column: float16 images are numpy float16, bfloat16
    ones their bits as uint16; both the float32 images rounded to nearest even."""
    def images(cast):
        d = ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="test", shuffle=False)
        trans = [C.Rescale(1 / 255, 0.0), C.Normalize(mean=[0.5, 0.5, 0.5], std=[0.2, 0.3, 0.1])]
        trans += [C2.TypeCast(cast)] if cast is not None else []
        d = d.map(operations=trans + [C.HWC2CHW()], input_columns="image").batch(4)
        return d, next(d.create_tuple_iterator(output_numpy=True, num_epochs=1))[0]

    _, wide = images(None)
    d16, half = images(mstype.float16)
    assert half.dtype == np.float16 and d16.output_types()[0] == np.float16
    np.testing.assert_array_equal(half, wide.astype(np.float16))
    db, bits = images(mstype.bfloat16)
    assert bits.dtype == np.uint16 and db.output_types()[0] == np.uint16
    b = wide.view(np.uint32).astype(np.uint64)
    want = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(bits, want)
    assert not np.array_equal(bits, (b >> 16).astype(np.uint16))  # rounded, not truncated
    with pytest.raises(ValueError, match="cast it last"):
        ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="test").map(
            [C2.TypeCast(mstype.float16), C.Rescale(1 / 255, 0.0)], input_columns="image")


def test_cifar_usage_defaults_to_all_and_counts_records():
    # MindSpore's usage=None is "all": 5 train files of 3 records and a test file of 4.
    assert ds.Cifar10Dataset(str(FIXTURES / "cifar10")).get_dataset_size() == 19
    assert ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="train").get_dataset_size() == 15
    assert ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="test").get_dataset_size() == 4


def test_cifar100_has_coarse_and_fine_label_columns(converted):
    data = ds.Cifar100Dataset(str(FIXTURES / "cifar100"), usage="train", shuffle=False)
    assert data.get_col_names() == ["image", "coarse_label", "fine_label"]
    assert data.num_classes() == 100
    data = data.map(operations=C2.TypeCast(mstype.int32), input_columns=["coarse_label", "fine_label"])
    data = data.map(operations=[C.HWC2CHW()], input_columns="image").batch(2)
    rows = list(data.create_dict_iterator(output_numpy=True, num_epochs=1))
    assert set(rows[0]) == {"image", "coarse_label", "fine_label"}
    # The two label columns are strided views of one buffer: no copy per column.
    coarse0, fine0 = rows[0]["coarse_label"], rows[0]["fine_label"]
    assert np.may_share_memory(coarse0, fine0) and not coarse0.flags.owndata and not fine0.flags.owndata
    assert coarse0.base is fine0.base
    coarse = np.concatenate([r["coarse_label"] for r in rows])
    fine = np.concatenate([r["fine_label"] for r in rows])
    # Against the binary layout read directly: record = coarse byte, fine byte, 3072 pixels.
    raw = np.fromfile(FIXTURES / "cifar100" / "train.bin", dtype=np.uint8).reshape(-1, 3074)
    assert np.array_equal(coarse, raw[:, 0]) and np.array_equal(fine, raw[:, 1])
    images = np.concatenate([r["image"] for r in rows])
    assert np.array_equal(images, raw[:, 2:].reshape(-1, 3, 32, 32))


def test_cifar_reads_torchvisions_pickle_layout_as_the_binary_records():
    """cifar-10-batches-py / cifar-100-python folders (pickles, parsed by the engine, never
    unpickled) give the rows of the binary files of the same records."""
    def rows(cls, folder, **kw):
        data = cls(str(FIXTURES / folder), shuffle=False, **kw)
        return list(data.create_tuple_iterator(output_numpy=True, num_epochs=1))

    for usage in ("train", "test", "all"):
        for cls, folder in ((ds.Cifar10Dataset, "cifar10"), (ds.Cifar100Dataset, "cifar100")):
            binary, pickled = rows(cls, folder, usage=usage), rows(cls, folder + "_py", usage=usage)
            assert len(binary) == len(pickled) > 0
            for a, b in zip(binary, pickled):
                assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def test_facts_behave_as_mindspore():
    data = create_dataset(str(TREE), batch_size=4, do_train=True)
    assert data.get_dataset_size() == 3
    assert data.get_batch_size() == 4
    assert data.get_col_names() == ["image", "label"]
    assert data.output_shapes() == [[4, 3, 224, 224], [4]]
    assert data.output_types() == [np.dtype("float32"), np.dtype("int32")]
    assert data.get_class_indexing() == {"bird": 0, "cat": 1, "coffee": 2}
    assert data.num_classes() == 3
    # drop_remainder decides the last batch: 12 samples in batches of 5.
    assert create_dataset(str(TREE), batch_size=5, do_train=True).get_dataset_size() == 2
    assert create_dataset(str(TREE), batch_size=5, do_train=False).get_dataset_size() == 3
    raw = ds.ImageFolderDataset(str(TREE))
    assert raw.get_dataset_size() == 12 and raw.get_batch_size() == 1


def test_sharding_follows_distributed_sampler():
    # 12 samples on 5 shards: ceil(12 / 5) = 3 each, padded by wrapping around; one order.
    seen = []
    for rank in range(5):
        data = create_dataset(str(TREE), batch_size=1, rank_size=5, rank_id=rank, do_train=False)
        assert data.get_dataset_size() == 3
        it = data.create_tuple_iterator(output_numpy=True, num_epochs=1)
        seen.append([float(images[0, 0, 0, 0]) for images, _ in it])
    whole = create_dataset(str(TREE), batch_size=1, do_train=False)
    order = [float(images[0, 0, 0, 0]) for images, _ in whole.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    for rank in range(5):
        assert seen[rank] == [order[(rank + 5 * k) % 12] for k in range(3)]


def test_iterator_epochs_and_repeat():
    data = create_dataset(str(TREE), batch_size=4, do_train=False)
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=2)
    assert len(collect(it)) == 3
    assert len(collect(it)) == 3
    assert collect(it) == []  # num_epochs passes, then nothing
    ds.config.set_seed(3)
    shuffled = create_dataset(str(TREE), batch_size=4, do_train=True)
    repeated = shuffled.repeat(2)
    assert repeated.get_dataset_size() == 6 and repeated.get_repeat_count() == 2
    one_pass = collect(repeated.create_tuple_iterator(output_numpy=True, num_epochs=1))
    two_epochs = shuffled.create_tuple_iterator(output_numpy=True, num_epochs=2)
    expected = collect(two_epochs) + collect(two_epochs)
    assert len(one_pass) == 6
    assert all(a[0].tobytes() == b[0].tobytes() for a, b in zip(one_pass, expected))
    forever = shuffled.repeat()
    assert forever.get_dataset_size() == -1
    it = forever.create_tuple_iterator(output_numpy=True)
    assert len([next(it) for _ in range(10)]) == 10
    it.stop()


def test_unbatched_rows_and_dict_iterator():
    data = ds.ImageFolderDataset(str(TREE), shuffle=False, decode=True)
    data = data.map([C.Resize((32, 48))], input_columns="image")
    assert data.output_shapes() == [[32, 48, 3], []]
    rows = list(data.create_dict_iterator(output_numpy=True, num_epochs=1))
    assert len(rows) == 12
    assert rows[0]["image"].shape == (32, 48, 3) and rows[0]["image"].dtype == np.uint8
    assert rows[0]["label"].shape == () and int(rows[-1]["label"]) == 2
    only_labels = list(data.create_tuple_iterator(columns=["label"], output_numpy=True, num_epochs=1))
    assert [int(r[0]) for r in only_labels] == [0] * 4 + [1] * 4 + [2] * 4


def test_shuffle_with_a_buffer_covering_the_dataset_is_a_global_shuffle():
    base = ds.ImageFolderDataset(str(TREE), shuffle=False)
    shuffled = base.shuffle(buffer_size=12).map([C.Decode(), C.Resize((8, 8))]).batch(12)
    labels = next(iter(shuffled.create_tuple_iterator(output_numpy=True, num_epochs=1)))[1]
    assert sorted(labels.tolist()) == [0] * 4 + [1] * 4 + [2] * 4
    assert labels.tolist() != sorted(labels.tolist())
    with pytest.raises(NotImplementedError, match="buffer_size=4"):
        base.shuffle(buffer_size=4)


def test_error_samples_mode_skip_and_return(bad_tree):
    data = ds.ImageFolderDataset(str(bad_tree), shuffle=False)
    data = data.map([C.Decode(), C.Resize((16, 16))]).batch(4)
    with pytest.raises(imgfeed.SampleError) as e:
        collect(data.create_tuple_iterator(output_numpy=True, num_epochs=1))
    assert e.value.path.endswith("zz_truncated.jpg") and e.value.kind == "truncated"
    ds.config.set_error_samples_mode(ds.config.ErrorSamplesMode.SKIP)
    batches = collect(data.create_tuple_iterator(output_numpy=True, num_epochs=1))
    assert sum(len(b[1]) for b in batches) == 12


UNSUPPORTED = [
    ("a lambda in map", "Python callable", lambda d: d.map(operations=[lambda x: x], input_columns="image")),
    ("a Python function", "Python callable", lambda d: d.map(operations=print, input_columns="image")),
    ("an unknown object", "not an op", lambda d: d.map(operations=[object()], input_columns="image")),
    ("per_batch_map", "per_batch_map", lambda d: d.batch(4, per_batch_map=lambda *a: a)),
    ("pad_info", "pad_info", lambda d: d.batch(4, pad_info={})),
    ("map after batch", "map after batch", lambda d: d.batch(4).map([C.Decode()])),
    ("batch of batches", "batch of batches", lambda d: d.batch(2).repeat(2).batch(2)),
    ("repeat before batch", "repeat before batch", lambda d: d.repeat(2)),
    ("shuffle after batch", "shuffle after batch", lambda d: d.batch(2).shuffle(100)),
    ("shuffle picking other shards", "num_samples or num_shards",
     lambda d: ds.ImageFolderDataset(str(TREE), shuffle=False, num_shards=2, shard_id=0).shuffle(100)),
    ("TypeCast of the image to an int", "image column", lambda d: d.map(C2.TypeCast(mstype.int32), input_columns="image")),
    ("an image op on the label", "image op", lambda d: d.map(C.Decode(), input_columns="label")),
    ("OpenCV bicubic", "CUBIC", lambda d: C.Resize(256, interpolation=C.Inter.CUBIC)),
    ("Pillow's antialias", "ANTIALIAS", lambda d: C.Resize(256, interpolation=C.Inter.ANTIALIAS)),
    ("a vision op the engine lacks", "RandomRotation", lambda d: C.RandomRotation(10)),
    ("a transform the engine lacks", "OneHot", lambda d: C2.OneHot(10)),
    ("uneven padding", "every side", lambda d: C.RandomCrop(32, padding=(1, 2, 3, 4))),
    ("normalize of CHW", "is_hwc", lambda d: C.Normalize([0, 0, 0], [1, 1, 1], is_hwc=False)),
    ("TypeCast to float64", "float64", lambda d: C2.TypeCast(mstype.float64)),
    ("output_columns", "output_columns", lambda d: d.map(C.Decode(), input_columns="image", output_columns="decoded")),
    ("python_multiprocessing", "python_multiprocessing", lambda d: d.map(C.Decode(), python_multiprocessing=True)),
    ("a sampler", "sampler", lambda d: ds.ImageFolderDataset(str(TREE), sampler=object())),
    ("a cache", "cache", lambda d: ds.ImageFolderDataset(str(TREE), cache=object())),
    ("Dataset.zip", "zip", lambda d: d.zip(d)),
    ("calling an op eagerly", "eagerly", lambda d: C.Decode()(b"")),
]


@pytest.mark.parametrize("what,match,call", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_calls_raise_at_the_call(what, match, call):
    data = ds.ImageFolderDataset(str(TREE))
    with pytest.raises(NotImplementedError, match=match):
        call(data)


def test_an_iterator_stops_for_good_after_an_error(bad_tree):
    data = ds.ImageFolderDataset(str(bad_tree), shuffle=False).map([C.Decode(), C.Resize((16, 16))]).batch(4)
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=3)
    with pytest.raises(imgfeed.SampleError):
        collect(it)
    # Not a silent short epoch: the iterator says it is dead.
    with pytest.raises(RuntimeError, match="stopped on an error"):
        collect(it)


def test_error_samples_mode_replace(bad_tree):
    ds.config.set_error_samples_mode(ds.config.ErrorSamplesMode.REPLACE)
    data = ds.ImageFolderDataset(str(bad_tree), shuffle=False).map([C.Decode(), C.Resize((16, 16))]).batch(4)
    batches = collect(data.create_tuple_iterator(output_numpy=True, num_epochs=1))
    # 13 samples, one bad and replaced by another: 4 batches (the last one of 1), all full.
    assert [len(b[1]) for b in batches] == [4, 4, 4, 1]


def test_unset_seed_is_random_as_in_mindspore():
    import imgfeed.dataset.config as cfg

    cfg._seed_set = False  # as in a fresh process
    data = ds.ImageFolderDataset(str(TREE), shuffle=True).map([C.Decode(), C.Resize((8, 8))]).batch(12)
    orders = {tuple(next(iter(data.create_tuple_iterator(output_numpy=True, num_epochs=1)))[1].tolist())
              for _ in range(4)}
    assert len(orders) > 1, "without set_seed every run shuffles differently"
    assert ds.config.get_seed() == 5489
    ds.config.set_seed(5)
    orders = {tuple(next(iter(data.create_tuple_iterator(output_numpy=True, num_epochs=1)))[1].tolist())
              for _ in range(3)}
    assert len(orders) == 1


def test_invalid_values_raise_value_errors_naming_the_op():
    data = ds.ImageFolderDataset(str(TREE))
    with pytest.raises(ValueError, match="CenterCrop"):
        data.map([C.CenterCrop(224)])  # before Decode: still encoded bytes
    with pytest.raises(ValueError, match="num_shards and shard_id"):
        ds.ImageFolderDataset(str(TREE), num_shards=2)
    with pytest.raises(ValueError, match="shard_id"):
        ds.ImageFolderDataset(str(TREE), num_shards=2, shard_id=2)
    with pytest.raises(ValueError, match="usage"):
        ds.Cifar10Dataset(str(FIXTURES / "cifar10"), usage="valid")
    with pytest.raises(ValueError, match="varies"):
        data.map([C.Decode()]).batch(2).create_tuple_iterator(output_numpy=True)
    with pytest.raises(ValueError):
        ds.ImageFolderDataset(str(TREE / "missing"))
    with pytest.raises(ValueError, match="mindspore is not installed"):
        create_dataset(str(TREE), batch_size=4).create_tuple_iterator()


def test_config_workers_and_seed():
    ds.config.set_num_parallel_workers(3)
    assert ds.config.get_num_parallel_workers() == 3
    ds.config.set_seed(11)
    assert ds.config.get_seed() == 11
    with pytest.raises(ValueError):
        ds.config.set_num_parallel_workers(0)
    with pytest.raises(ValueError):
        ds.config.set_seed(-1)
    # Same seed, different worker counts: the same batches.
    data = ds.ImageFolderDataset(str(TREE), shuffle=True).map(
        [C.RandomCropDecodeResize(32), C.RandomHorizontalFlip()]).batch(4)
    one = collect(ds.ImageFolderDataset(str(TREE), shuffle=True, num_parallel_workers=1).map(
        [C.RandomCropDecodeResize(32), C.RandomHorizontalFlip()]).batch(4).create_tuple_iterator(
        output_numpy=True, num_epochs=1))
    many = collect(data.create_tuple_iterator(output_numpy=True, num_epochs=1))
    assert all(a[0].tobytes() == b[0].tobytes() for a, b in zip(one, many)) and len(one) == 3


def test_normalize_in_torchvision_units_warns():
    data = ds.ImageFolderDataset(str(TREE), shuffle=False)
    data = data.map([C.Decode(), C.Resize(256), C.CenterCrop(224),
                     C.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]), C.HWC2CHW()])
    with pytest.warns(UserWarning, match=r"normalize.*255"):
        data.batch(4).create_tuple_iterator(output_numpy=True, num_epochs=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        create_dataset(str(TREE), batch_size=4, do_train=False).create_tuple_iterator(output_numpy=True)


def test_mindspore_names_imgfeed_lacks_raise_not_implemented_naming_them():
    with pytest.raises(NotImplementedError, match="mindspore.dataset.GeneratorDataset.*to_mindspore"):
        ds.GeneratorDataset
    with pytest.raises(NotImplementedError, match="mindspore.dataset.DistributedSampler.*num_shards"):
        ds.DistributedSampler
    with pytest.raises(NotImplementedError, match="set_prefetch_size"):
        ds.config.set_prefetch_size
    with pytest.raises(NotImplementedError, match="vision.Rotate"):
        C.Rotate
    with pytest.raises(NotImplementedError, match="transforms.OneHot"):
        C2.OneHot
    with pytest.raises(AttributeError):
        ds.NoSuchThing


def test_reset_between_epochs_and_set_init_step_resume(cli):
    """MindSpore's Model calls reset() at every epoch's end: the iterator carries on with
    the next epoch. set_init_step(k) starts new iterators at global step k."""
    ds.config.set_seed(7)
    data = create_dataset(str(TREE), batch_size=4, do_train=True)
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=3)
    epochs = []
    for _ in range(3):
        epochs.append(collect(it))
        data.reset()
    want = run_digests(cli, "resnet50_eval.toml", "--batch-size", "4", "--shuffle", "--seed", "7", "--epochs", "3")
    assert [digest_of(e) for e in epochs] == want
    assert data.get_init_step() == 0
    data.set_init_step(4)  # epoch 1's second batch
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=3)
    rest = [collect(it), collect(it)]
    assert collect(it) == []  # num_epochs counts from epoch 0: epochs 1 and 2 were left
    assert len(rest[0]) == 2 and all(a[0].tobytes() == b[0].tobytes() for a, b in zip(rest[0], epochs[1][1:]))
    assert digest_of(rest[1]) == want[2]
    with pytest.raises(ValueError):
        data.set_init_step(-1)


def test_every_engine_op_is_exposed_or_listed_with_its_reason():
    from imgfeed import _imgfeed
    from imgfeed.dataset import _engine_ops
    from imgfeed.dataset._op import Op

    # one instance of every op class the layer exports
    made = [
        C.Decode(), C.Resize(256), C.CenterCrop(224), C.Normalize([0.0] * 3, [1.0] * 3), C.HWC2CHW(),
        C.Rescale(1 / 255, 0.0), C.RandomCrop(32, padding=4), C.RandomHorizontalFlip(), C.RandomVerticalFlip(),
        C.RandomColorAdjust(0.4, 0.4, 0.4), C.Pad(2), C.RandomErasing(), C.AutoAugment(), C.RandAugment(),
        C.TrivialAugmentWide(), C.RandomResizedCrop(224), C.RandomCropDecodeResize(224),
        C2.TypeCast(mstype.int32),
    ]
    classes = {getattr(module, name) for module in (C, C2) for name in module.__all__}
    op_classes = {c for c in classes if isinstance(c, type) and issubclass(c, Op)}
    assert op_classes == {type(o) for o in made}, "an exported op class is not made above"
    exposed = {t["op"] for o in made for t in o._tables()}
    engine = set(_imgfeed.op_names()) | set(_imgfeed.batch_op_names())
    listed = set(_engine_ops.NOT_EXPOSED)
    assert engine - exposed == listed, f"engine ops neither exposed nor listed: {engine - exposed - listed}"
    assert not listed & exposed, f"listed as not exposed, yet exposed: {listed & exposed}"
    assert exposed <= engine, f"tables of ops the engine lacks: {exposed - engine}"
    assert all(len(why) > 20 for why in _engine_ops.NOT_EXPOSED.values())


def test_every_engine_source_kind_has_a_class_or_is_listed_with_its_reason():
    from imgfeed import _imgfeed
    from imgfeed.dataset import _sources

    engine = set(_imgfeed.source_kinds())
    exposed = set(_sources.KINDS)
    listed = set(_sources.NOT_EXPOSED)
    assert engine - exposed == listed, f"engine source kinds neither exposed nor listed: {engine - exposed - listed}"
    assert exposed <= engine, f"classes of source kinds the engine lacks: {exposed - engine}"
    assert all(c._kind == k for k, c in _sources.KINDS.items())
    assert all(len(why) > 20 for why in _sources.NOT_EXPOSED.values())
