"""The datasets a pipeline starts from: ``ImageFolderDataset``, ``Cifar10Dataset``,
``Cifar100Dataset``, ``MindDataset`` and ``TFRecordDataset`` (MindSpore's arguments, the
engine's ``[source]`` table), and imgfeed's own ``WebDataset`` (tars read in place, with the
same sampling arguments) and ``ParquetDataset`` (Hugging Face Parquet files, alike)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

from ._args import PathLike, _no, _sampling_args, _shards
from ._dataset import Dataset


class ImageFolderDataset(Dataset):
    """``root/<class>/<image>``: classes sorted by name, labels from 0 (or ``class_indexing``);
    columns ``image`` (the encoded file, ``uint8``; decoded when ``decode=True``) and
    ``label`` (``uint32``).

    ``shuffle=None`` shuffles, as MindSpore does; ``num_shards``/``shard_id`` follow
    MindSpore's DistributedSampler (each shard gets ``ceil(N / num_shards)`` samples, padded
    by wrapping around); ``num_samples`` caps the samples per shard.
    """

    _kind = "image_folder"

    def __init__(
        self,
        dataset_dir: PathLike,
        num_samples: Optional[int] = None,
        num_parallel_workers: Optional[int] = None,
        shuffle: Optional[bool] = None,
        sampler: Any = None,
        extensions: Optional[Sequence[str]] = None,
        class_indexing: Optional[Dict[str, int]] = None,
        decode: bool = False,
        num_shards: Optional[int] = None,
        shard_id: Optional[int] = None,
        cache: Any = None,
        decrypt: Any = None,
    ) -> None:
        call = "ImageFolderDataset"
        _sampling_args(call, sampler, cache, num_samples)
        if decrypt is not None:
            _no(call, "decrypt")
        n, i = _shards(call, num_shards, shard_id)
        source: Dict[str, Any] = {
            "kind": self._kind,
            "root": os.path.abspath(os.fspath(dataset_dir)),
            "shuffle": True if shuffle is None else bool(shuffle),
            "num_shards": n,
            "shard_id": i,
        }
        if num_samples is not None:
            source["num_samples"] = num_samples
        if extensions is not None:
            source["extensions"] = [str(e) for e in extensions]
        if class_indexing is not None:
            source["class_indexing"] = {str(k): int(v) for k, v in class_indexing.items()}
        self._init(call, source, num_parallel_workers, ["image", "label"])
        if decode:
            self._ops.append({"op": "decode"})


class _Cifar(Dataset):
    _kind = ""
    _classes = 0

    def __init__(
        self,
        dataset_dir: PathLike,
        usage: Optional[str] = None,
        num_samples: Optional[int] = None,
        num_parallel_workers: Optional[int] = None,
        shuffle: Optional[bool] = None,
        sampler: Any = None,
        num_shards: Optional[int] = None,
        shard_id: Optional[int] = None,
        cache: Any = None,
    ) -> None:
        call = type(self).__name__
        _sampling_args(call, sampler, cache, num_samples)
        n, i = _shards(call, num_shards, shard_id)
        usage = "all" if usage is None else usage
        if usage not in ("train", "test", "all"):
            raise ValueError(f"{call}: usage must be 'train', 'test' or 'all', not {usage!r}")
        source: Dict[str, Any] = {
            "kind": self._kind,
            "root": os.path.abspath(os.fspath(dataset_dir)),
            "usage": usage,
            "shuffle": True if shuffle is None else bool(shuffle),
            "num_shards": n,
            "shard_id": i,
        }
        if num_samples is not None:
            source["num_samples"] = num_samples
        columns = ["image", "label"]
        if self._kind == "cifar100":
            source["label"] = "both"
            columns = ["image", "coarse_label", "fine_label"]
        self._init(call, source, num_parallel_workers, columns)
        self._class_count = self._classes


class Cifar10Dataset(_Cifar):
    """CIFAR-10's binary files (``data_batch_1.bin`` … ``data_batch_5.bin``,
    ``test_batch.bin``) or torchvision's pickle files (``cifar-10-batches-py``:
    ``data_batch_1`` … ``data_batch_5``, ``test_batch``; parsed, never unpickled),
    memory-mapped: columns ``image`` (``uint8`` 32×32×3) and ``label`` (``uint32``).
    ``usage``: ``"train"``, ``"test"`` or ``"all"`` (the default, MindSpore's)."""

    _kind = "cifar10"
    _classes = 10


class Cifar100Dataset(_Cifar):
    """CIFAR-100's binary files (``train.bin``, ``test.bin``) or torchvision's pickle files
    (``cifar-100-python``: ``train``, ``test``): columns ``image``, ``coarse_label`` and
    ``fine_label`` (``uint32``)."""

    _kind = "cifar100"
    _classes = 100


class WebDataset(Dataset):
    """WebDataset tars (``KEY.jpg`` + ``KEY.cls`` per sample, as the ``webdataset`` package
    writes them), read in place: ``urls`` is one ``.tar`` file, a folder of them, a brace
    pattern (``"train-{0000..0146}.tar"``) or a list of these; an index of each tar is built
    once and kept beside it (or in the cache). Columns ``image`` (the encoded member,
    ``uint8``; decoded when ``decode=True``) and ``label`` (``uint32``, the integer in the
    label member). ``image``: the image member's extensions, ``;``-separated, in order of
    preference (default ``"jpg;jpeg;png;webp"``); ``label``: the label member's extension
    (default ``"cls"``). Sampling as ``ImageFolderDataset``'s: a global shuffle (the default),
    MindSpore's sharding, ``num_samples`` per shard.
    """

    _kind = "webdataset"

    def __init__(
        self,
        urls: Any,
        image: Optional[str] = None,
        label: Optional[str] = None,
        num_samples: Optional[int] = None,
        num_parallel_workers: Optional[int] = None,
        shuffle: Optional[bool] = None,
        decode: bool = False,
        num_shards: Optional[int] = None,
        shard_id: Optional[int] = None,
    ) -> None:
        call = type(self).__name__
        _sampling_args(call, None, None, num_samples)
        n, i = _shards(call, num_shards, shard_id)
        given = [urls] if isinstance(urls, (str, os.PathLike)) else list(urls)
        parts = [q for p in given for q in os.fspath(p).split("::") if q]
        if not parts:
            raise ValueError(f"{call}: urls names no files")
        source: Dict[str, Any] = {
            "kind": self._kind,
            "root": "::".join(_local_or_url(p) for p in parts),
            "shuffle": True if shuffle is None else bool(shuffle),
            "num_shards": n,
            "shard_id": i,
        }
        if image is not None:
            source["image"] = str(image)
        if label is not None:
            source["label"] = str(label)
        if num_samples is not None:
            source["num_samples"] = num_samples
        self._init(call, source, num_parallel_workers, ["image", "label"])
        if decode:
            self._ops.append({"op": "decode"})


class ParquetDataset(WebDataset):
    """Parquet files with an image column, as the Hugging Face Hub stores datasets
    (``datasets``' ``to_parquet``/``push_to_hub``): ``dataset_files`` is one ``.parquet``
    file, a folder of them, a brace pattern (``"train-{00000..00146}-of-00147.parquet"``), a
    store URL or a list of these; each file is unpacked once into the cache to index it,
    then read in place from its pages (Snappy or uncompressed; else from that copy). Columns ``image`` (the encoded bytes, ``uint8``; decoded when ``decode=True``) and
    ``label`` (``uint32``). ``image``: the image column, a struct with a binary ``bytes``
    field (HF's ``Image()``) or binary (default ``"image"``); ``label``: the integer label
    column (default ``"label"``). Sampling as ``ImageFolderDataset``'s.
    """

    _kind = "parquet"

    def __init__(
        self,
        dataset_files: Any,
        image: Optional[str] = None,
        label: Optional[str] = None,
        num_samples: Optional[int] = None,
        num_parallel_workers: Optional[int] = None,
        shuffle: Optional[bool] = None,
        decode: bool = False,
        num_shards: Optional[int] = None,
        shard_id: Optional[int] = None,
    ) -> None:
        super().__init__(
            dataset_files,
            image=image,
            label=label,
            num_samples=num_samples,
            num_parallel_workers=num_parallel_workers,
            shuffle=shuffle,
            decode=decode,
            num_shards=num_shards,
            shard_id=shard_id,
        )


def _local_or_url(p: Any) -> str:
    text = os.fspath(p)
    return text if "://" in text else os.path.abspath(text)


def _columns(call: str, columns_list: Any, image: str, label: str) -> List[str]:
    """``columns_list`` as the engine reads it: the image column, then the label column."""
    if columns_list is None:
        return [image, label]
    if isinstance(columns_list, str):
        columns_list = [columns_list]
    names = [str(c) for c in columns_list]
    if len(names) != 2:
        _no(
            call,
            f"columns_list={names!r}",
            "the engine reads two columns: the encoded image, then the integer label "
            f"(e.g. [{image!r}, {label!r}])",
        )
    return names


def _shuffle(call: str, shuffle: Any) -> bool:
    if shuffle is None:
        return True
    if isinstance(shuffle, bool):
        return shuffle
    name = getattr(shuffle, "name", None) or str(shuffle)
    if name.upper().endswith("GLOBAL"):
        return True
    _no(call, f"shuffle={shuffle!r}", "the engine shuffles globally (True) or not at all (False)")
    return True


class MindDataset(Dataset):
    """MindSpore's MindRecord files, read in place from their own headers (the ``.db`` beside
    each is not needed). ``dataset_files``: one file name reads its whole group
    (``name.mindrecord0 … N-1``, in the group's order), a list reads exactly those files — as
    MindSpore's ``MindDataset`` does; a file may be an object in a store (``s3://…``,
    ``gs://…``, ``az://…``, ``http(s)://…``). ``columns_list``: the encoded image's bytes
    column, then the int32/int64 label column (default ``["data", "label"]``, MindSpore's
    image schema); the columns yielded are named so, the image ``uint8`` (decoded when
    ``decode=True``), the label ``uint32``. ``shuffle`` ``None``/``True``/``Shuffle.GLOBAL``
    shuffles every sample, seeded by ``config.set_seed`` and the epoch;
    ``num_shards``/``shard_id`` and ``num_samples`` as ``ImageFolderDataset``'s.
    """

    _kind = "mindrecord"

    def __init__(
        self,
        dataset_files: Any,
        columns_list: Optional[Sequence[str]] = None,
        num_parallel_workers: Optional[int] = None,
        shuffle: Any = None,
        num_shards: Optional[int] = None,
        shard_id: Optional[int] = None,
        sampler: Any = None,
        padded_sample: Any = None,
        num_padded: Optional[int] = None,
        num_samples: Optional[int] = None,
        cache: Any = None,
        decode: bool = False,
    ) -> None:
        call = "MindDataset"
        _sampling_args(call, sampler, cache, num_samples)
        if padded_sample is not None or num_padded:
            _no(call, "padded_sample/num_padded", "the engine pads shards by wrapping around, as DistributedSampler does")
        n, i = _shards(call, num_shards, shard_id)
        columns = _columns(call, columns_list, "data", "label")
        if isinstance(dataset_files, (str, os.PathLike)):
            root = _local_or_url(dataset_files)
        else:
            files = [_local_or_url(f) for f in dataset_files]
            if not files:
                raise ValueError(f"{call}: dataset_files names no files")
            # A list reads exactly its files (a trailing "::" makes a list of one).
            root = "::".join(files) + ("::" if len(files) == 1 else "")
        source: Dict[str, Any] = {
            "kind": self._kind,
            "root": root,
            "image": columns[0],
            "label": columns[1],
            "shuffle": _shuffle(call, shuffle),
            "num_shards": n,
            "shard_id": i,
        }
        if num_samples is not None:
            source["num_samples"] = num_samples
        self._init(call, source, num_parallel_workers, columns)
        if decode:
            self._ops.append({"op": "decode"})


class TFRecordDataset(Dataset):
    """TFRecord files of ``tf.train.Example`` s, read in place (CRCs checked; gzip'd files
    decompressed once into the cache). ``dataset_files``: a file, a folder of ``.tfrecord``
    files, a brace pattern (``"train-{00000..01023}-of-01024"``) or a list of these.
    ``columns_list``: the image's bytes feature, then the int64 label feature (default
    ``["image/encoded", "image/class/label"]``, as TensorFlow's ImageNet scripts write them);
    the columns yielded are named so. ``label_offset`` (imgfeed's) is added to each label:
    ``-1`` for TensorFlow's 1-based ImageNet labels. ``schema`` is not needed (the features
    are found by name); ``compression_type`` ``None``/``""``/``"GZIP"`` (gzip is recognised by
    itself). Sharding is by rows, as MindSpore's ``shard_equal_rows=True``: with
    ``num_shards`` > 1, ``shard_equal_rows`` must be ``True`` (MindSpore's default ``False``
    splits by files, which the engine does not).
    """

    _kind = "tfrecord"

    def __init__(
        self,
        dataset_files: Any,
        schema: Any = None,
        columns_list: Optional[Sequence[str]] = None,
        num_samples: Optional[int] = None,
        num_parallel_workers: Optional[int] = None,
        shuffle: Any = None,
        num_shards: Optional[int] = None,
        shard_id: Optional[int] = None,
        shard_equal_rows: bool = False,
        cache: Any = None,
        compression_type: Optional[str] = None,
        decode: bool = False,
        label_offset: int = 0,
    ) -> None:
        call = "TFRecordDataset"
        _sampling_args(call, None, cache, num_samples)
        if schema is not None:
            _no(call, "schema", "the image and label features are found by name: give them in columns_list")
        if compression_type not in (None, "", "GZIP"):
            _no(call, f"compression_type={compression_type!r}", "plain and GZIP files are read")
        n, i = _shards(call, num_shards, shard_id)
        if n > 1 and not shard_equal_rows:
            _no(
                call,
                "shard_equal_rows=False with num_shards",
                "the engine shards by rows: pass shard_equal_rows=True",
            )
        if isinstance(label_offset, bool) or not isinstance(label_offset, int):
            raise ValueError(f"{call}: label_offset must be an int, not {label_offset!r}")
        columns = _columns(call, columns_list, "image/encoded", "image/class/label")
        given = [dataset_files] if isinstance(dataset_files, (str, os.PathLike)) else list(dataset_files)
        parts = [q for p in given for q in os.fspath(p).split("::") if q]
        if not parts:
            raise ValueError(f"{call}: dataset_files names no files")
        source: Dict[str, Any] = {
            "kind": self._kind,
            "root": "::".join(_local_or_url(p) for p in parts),
            "image": columns[0],
            "label": columns[1],
            "shuffle": _shuffle(call, shuffle),
            "num_shards": n,
            "shard_id": i,
        }
        if label_offset:
            source["label_offset"] = label_offset
        if num_samples is not None:
            source["num_samples"] = num_samples
        self._init(call, source, num_parallel_workers, columns)
        if decode:
            self._ops.append({"op": "decode"})


#: The class of every source kind of the native engine (``_imgfeed.source_kinds()``), by the
#: kind's name in pipeline files; a kind without a class is in ``NOT_EXPOSED`` with the
#: reason. ``tests/test_dataset.py`` fails when the engine has a kind in neither.
KINDS = {
    c._kind: c
    for c in (
        ImageFolderDataset,
        Cifar10Dataset,
        Cifar100Dataset,
        WebDataset,
        ParquetDataset,
        MindDataset,
        TFRecordDataset,
    )
}

NOT_EXPOSED = {
    "shards": "a converted dataset is read through the class of what it was converted from: "
    "a root holding manifest.json reads as shards whatever the kind",
}
