"""MindSpore's general transforms (``mindspore.dataset.transforms`` /
``.transforms.c_transforms``) that imgfeed's engine runs: ``TypeCast`` of the label column."""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from ... import dtype as _dtype
from .._op import Op, unsupported

__all__ = ["TypeCast"]

_LABEL_TYPES = ("uint32", "int32", "int64", "float32")


def _type_name(data_type: Any) -> str:
    if isinstance(data_type, _dtype.Type):
        return data_type.name
    try:
        return np.dtype(data_type).name
    except TypeError:
        raise TypeError(f"TypeCast: {data_type!r} is not a data type") from None


class TypeCast(Op):
    """Cast a label column to ``data_type``: ``mstype.int32``, ``int64``, ``uint32`` or
    ``float32`` (the image's type follows from ``Normalize``/``Rescale``, so casting the image
    column is refused by ``Dataset.map``)."""

    column = "label"

    def __init__(self, data_type: Any) -> None:
        name = _type_name(data_type)
        if name not in _LABEL_TYPES:
            unsupported("TypeCast", f"{name}: the engine casts labels to {', '.join(_LABEL_TYPES)}")
        self.data_type = name

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": "type_cast", "column": "label", "dtype": self.data_type}]


_NOT_IN_ENGINE = frozenset(
    "Compose Concatenate Duplicate Fill Mask OneHot PadEnd Plugin RandomApply RandomChoice "
    "RandomOrder Slice Unique".split()
)


def __getattr__(name: str) -> Any:
    if name in _NOT_IN_ENGINE:
        raise NotImplementedError(f"transforms.{name} is a MindSpore transform that imgfeed's engine does not have")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
