"""MindSpore's general transforms (``mindspore.dataset.transforms`` /
``.transforms.c_transforms``) that imgfeed's engine runs: ``TypeCast`` of a label column, or
of the image column to a float type for mixed-precision training."""

from __future__ import annotations

import copy
from typing import Any, Dict, List

import numpy as np

from ... import dtype as _dtype
from .._mindspore_names import NAMES as _MINDSPORE_NAMES
from .._op import Op, unsupported

__all__ = ["TypeCast"]

_LABEL_TYPES = ("uint32", "int32", "int64", "float32")
_IMAGE_TYPES = ("float32", "float16", "bfloat16")


def _type_name(data_type: Any) -> str:
    if isinstance(data_type, _dtype.Type):
        return data_type.name
    if data_type == "bfloat16":  # numpy has no such type
        return "bfloat16"
    try:
        return np.dtype(data_type).name
    except TypeError:
        raise TypeError(f"TypeCast: {data_type!r} is not a data type") from None


class TypeCast(Op):
    """Cast a column to ``data_type``, as ``Dataset.map``'s ``input_columns`` says:

    * a label column: ``mstype.int32``, ``int64``, ``uint32`` or ``float32``;
    * the image column: ``mstype.float32``, ``float16`` or ``bfloat16``, for mixed-precision
      training. The engine rounds the float32 result to nearest even as it writes the batch,
      so the cast comes after every op that changes pixels (``HWC2CHW`` may follow it). numpy
      has no bfloat16: such batches are its bits as ``uint16`` (``Loader(as_torch=True)``
      yields ``torch.bfloat16`` tensors; with numpy, ``a.view(ml_dtypes.bfloat16)``).
    """

    column = "label"

    def __init__(self, data_type: Any) -> None:
        name = _type_name(data_type)
        if name not in _LABEL_TYPES + _IMAGE_TYPES:
            unsupported(
                "TypeCast",
                f"{name}: the engine casts labels to {', '.join(_LABEL_TYPES)} and images to "
                f"{', '.join(_IMAGE_TYPES)}",
            )
        self.data_type = name

    def _retarget(self, columns: List[str]) -> "TypeCast":
        if columns != ["image"]:
            return self
        if self.data_type not in _IMAGE_TYPES:
            unsupported("TypeCast", f"{self.data_type} on the image column: images are cast to {', '.join(_IMAGE_TYPES)}")
        op = copy.copy(self)
        op.column = "image"
        return op

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": "type_cast", "column": self.column, "dtype": self.data_type}]


_NOT_IN_ENGINE = frozenset(
    "Compose Concatenate Duplicate Fill Mask OneHot PadEnd Plugin RandomApply RandomChoice "
    "RandomOrder Slice Unique".split()
)


def __getattr__(name: str) -> Any:
    # _NOT_IN_ENGINE, and every other public name of MindSpore's module (generated from
    # MindSpore's own: python/tools/mindspore_names.py)
    if name in _NOT_IN_ENGINE or name in _MINDSPORE_NAMES["transforms"]:
        raise NotImplementedError(f"transforms.{name} is a MindSpore transform that imgfeed's engine does not have")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
