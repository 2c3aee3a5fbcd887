"""The datasets a pipeline starts from: ``ImageFolderDataset``, ``Cifar10Dataset`` and
``Cifar100Dataset`` (MindSpore's arguments, the engine's ``[source]`` table)."""

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


#: The class of every source kind of the native engine (``_imgfeed.source_kinds()``), by the
#: kind's name in pipeline files; a kind without a class is in ``NOT_EXPOSED`` with the
#: reason. ``tests/test_dataset.py`` fails when the engine has a kind in neither.
KINDS = {c._kind: c for c in (ImageFolderDataset, Cifar10Dataset, Cifar100Dataset)}

NOT_EXPOSED = {
    "shards": "a converted dataset is read through the class of what it was converted from: "
    "a root holding manifest.json reads as shards whatever the kind",
}
