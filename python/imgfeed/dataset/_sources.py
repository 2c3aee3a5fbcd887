"""The datasets a pipeline starts from: ``ImageFolderDataset``, ``Cifar10Dataset`` and
``Cifar100Dataset`` (MindSpore's arguments, the engine's ``[source]`` table), and imgfeed's
own ``WebDataset`` (tars read in place, with the same sampling arguments)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence

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
        call = "WebDataset"
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


def _local_or_url(p: Any) -> str:
    text = os.fspath(p)
    return text if "://" in text else os.path.abspath(text)


#: The class of every source kind of the native engine (``_imgfeed.source_kinds()``), by the
#: kind's name in pipeline files; a kind without a class is in ``NOT_EXPOSED`` with the
#: reason. ``tests/test_dataset.py`` fails when the engine has a kind in neither.
KINDS = {c._kind: c for c in (ImageFolderDataset, Cifar10Dataset, Cifar100Dataset, WebDataset)}

NOT_EXPOSED = {
    "shards": "a converted dataset is read through the class of what it was converted from: "
    "a root holding manifest.json reads as shards whatever the kind",
}
