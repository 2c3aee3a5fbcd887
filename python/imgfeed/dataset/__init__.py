"""MindSpore's dataset API (``mindspore.dataset``) over imgfeed's native engine.

A MindSpore ``create_dataset`` runs by changing only its imports::

    import imgfeed.dataset as ds
    import imgfeed.dataset.vision as C
    import imgfeed.dataset.transforms as C2
    from imgfeed import dtype as mstype

Datasets, ``map``, ``batch``, ``shuffle``, ``repeat`` and the iterators keep MindSpore's
argument names, defaults and semantics (class indexing, CIFAR columns and usage,
DistributedSampler's shard assignment and padding, ``drop_remainder``). Every map/batch
call is translated to the engine's ops at once; an op, argument or combination the engine
cannot run (a Python callable in ``map``, ``per_batch_map``, ``map`` after ``batch``, ...)
raises ``NotImplementedError`` (or ``ValueError`` for a bad value) naming it at the call
that introduced it, never later and never silently.

Output: ``create_tuple_iterator(output_numpy=True)`` and ``create_dict_iterator(...)``
yield numpy arrays that view the engine's batch buffers (no copy).
``output_numpy=False`` yields ``mindspore.Tensor`` s (``Tensor.from_numpy``, no copy) when
MindSpore is installed, and is refused when it is not.

MindSpore's ``Model`` (``train``, ``eval``, ``fit``) takes these datasets as they are:
``reset()``, ``set_init_step`` / ``get_init_step``, ``initial_epoch`` and the iterator's
``do_copy`` keep MindSpore's meaning. Its dataset sink mode needs one of MindSpore's own
datasets: ``Dataset.to_mindspore()`` is a ``GeneratorDataset`` of imgfeed's batches. Any
other name of ``mindspore.dataset`` raises ``NotImplementedError`` naming it.
imgfeed's own ``Dataset.state_dict()`` / ``load_state_dict()`` resume training on another
``num_shards`` (RANK_SIZE): the rest of the epoch is split among the new ranks.
"""

from __future__ import annotations

from typing import Any

from . import config
from . import transforms as transforms
from . import vision as vision
from ._dataset import Dataset
from ._iterators import DictIterator, TupleIterator
from ._mindspore_names import NAMES as _MINDSPORE_NAMES
from ._sources import (
    Cifar10Dataset,
    Cifar100Dataset,
    ImageFolderDataset,
    MindDataset,
    ParquetDataset,
    TFRecordDataset,
    WebDataset,
)

__all__ = [
    "Dataset",
    "ImageFolderDataset",
    "Cifar10Dataset",
    "Cifar100Dataset",
    "WebDataset",
    "ParquetDataset",
    "MindDataset",
    "TFRecordDataset",
    "TupleIterator",
    "DictIterator",
    "config",
    "vision",
    "transforms",
]

_HINTS = {
    "GeneratorDataset": "a Python source cannot run inside the native engine; to hand imgfeed's batches to "
    "MindSpore as one of its datasets, use Dataset.to_mindspore()",
    "NumpySlicesDataset": "a Python source cannot run inside the native engine",
}


def __getattr__(name: str) -> Any:
    # MindSpore's names that imgfeed.dataset does not implement (the list is generated from
    # MindSpore's own: python/tools/mindspore_names.py).
    if name in _MINDSPORE_NAMES["dataset"]:
        if name.endswith("Sampler"):
            why = "samplers are not supported: use the dataset's shuffle, num_samples, num_shards and shard_id"
        else:
            why = _HINTS.get(name, "imgfeed.dataset reads ImageFolderDataset, Cifar10Dataset, Cifar100Dataset, MindDataset and TFRecordDataset (and its own WebDataset and ParquetDataset)")
        raise NotImplementedError(f"mindspore.dataset.{name} is not supported by imgfeed.dataset ({why})")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

