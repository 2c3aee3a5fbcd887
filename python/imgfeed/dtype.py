"""Data types by MindSpore's names (``from imgfeed import dtype as mstype`` stands in for
``from mindspore import dtype as mstype``): ``mstype.int32`` and the like.

Each is a :class:`Type` whose ``name`` is numpy's name for it and whose ``np`` is the numpy
dtype. The engine's label ``TypeCast`` takes ``int32``, ``int64``, ``uint32`` and
``float32``; the others exist so that code naming them imports, and are refused by the op
that cannot honour them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "Type",
    "bool_",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
]


class Type:
    """A data type, named as numpy names it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def np(self) -> Any:
        """The numpy dtype (``bfloat16`` has none)."""
        return np.dtype(self.name)

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Type) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


bool_ = Type("bool")
int8 = Type("int8")
int16 = Type("int16")
int32 = Type("int32")
int64 = Type("int64")
uint8 = Type("uint8")
uint16 = Type("uint16")
uint32 = Type("uint32")
uint64 = Type("uint64")
float16 = Type("float16")
float32 = Type("float32")
float64 = Type("float64")
bfloat16 = Type("bfloat16")
