"""``mindspore.dataset.config``: the process-wide defaults the datasets read when an
iterator starts.

* ``set_seed`` / ``get_seed``: the seed of the shuffle and the random ops. As in
  MindSpore, until ``set_seed`` is called every iterator draws a random seed (``get_seed``
  still answers 5489, MindSpore's default); once it is called, the same seed gives the same
  batches on every run and for any worker count.
* ``set_num_parallel_workers`` / ``get_num_parallel_workers``: worker threads when no
  ``num_parallel_workers`` is given (default 8, MindSpore's).
* ``set_error_samples_mode`` / ``get_error_samples_mode``: what a bad sample does:
  ``ErrorSamplesMode.RETURN`` (raise ``imgfeed.SampleError``, the default), ``REPLACE``
  (another sample of the shard takes its place) or ``SKIP`` (left out).
"""

from __future__ import annotations

import enum
import os
from typing import Any

from ._mindspore_names import NAMES as _MINDSPORE_NAMES

__all__ = [
    "ErrorSamplesMode",
    "get_error_samples_mode",
    "get_num_parallel_workers",
    "get_seed",
    "set_error_samples_mode",
    "set_num_parallel_workers",
    "set_seed",
]

_seed = 5489
_seed_set = False
_workers = 8


class ErrorSamplesMode(enum.Enum):
    """What a sample that fails to read or decode does (MindSpore's names)."""

    RETURN = "error"
    REPLACE = "replace"
    SKIP = "skip"


_error_mode = ErrorSamplesMode.RETURN


def set_seed(seed: int) -> None:
    """Seed of the shuffle and the random ops of the iterators created after this call."""
    global _seed, _seed_set
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ValueError(f"seed must be an int in [0, 2**64), not {seed!r}")
    _seed = seed
    _seed_set = True


def get_seed() -> int:
    """The seed (5489 unless set)."""
    return _seed


def _pipeline_seed() -> int:
    """The seed an iterator starts with: the one set, else a random one (MindSpore's rule)."""
    if _seed_set:
        return _seed
    return int.from_bytes(os.urandom(8), "little")


def set_num_parallel_workers(num: int) -> None:
    """Worker threads of pipelines that give no ``num_parallel_workers``."""
    global _workers
    if isinstance(num, bool) or not isinstance(num, int) or not 1 <= num <= 1024:
        raise ValueError(f"num_parallel_workers must be an int in [1, 1024], not {num!r}")
    _workers = num


def get_num_parallel_workers() -> int:
    """Worker threads of pipelines that give no ``num_parallel_workers`` (8 unless set)."""
    return _workers


def set_error_samples_mode(error_samples_mode: ErrorSamplesMode) -> None:
    """What a bad sample does in the iterators created after this call."""
    global _error_mode
    if not isinstance(error_samples_mode, ErrorSamplesMode):
        raise TypeError(f"error_samples_mode must be an ErrorSamplesMode, not {error_samples_mode!r}")
    _error_mode = error_samples_mode


def get_error_samples_mode() -> ErrorSamplesMode:
    """What a bad sample does (``ErrorSamplesMode.RETURN`` unless set)."""
    return _error_mode


def __getattr__(name: str) -> Any:
    if name in _MINDSPORE_NAMES["config"]:
        raise NotImplementedError(f"mindspore.dataset.config.{name} is not supported by imgfeed.dataset.config")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
