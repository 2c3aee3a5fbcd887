"""The checks the datasets make on their MindSpore arguments: an unsupported one raises
``NotImplementedError`` naming it, a bad value ``ValueError``."""

from __future__ import annotations

import os
from typing import Any, Optional, Tuple, Union

PathLike = Union[str, "os.PathLike[str]"]


def _no(call: str, what: str, why: str = "") -> None:
    raise NotImplementedError(f"{call}: {what} is not supported by imgfeed's engine" + (f" ({why})" if why else ""))


def _positive(call: str, name: str, value: Any, allow_none: bool = True) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{call}: {name} must be a positive int, not {value!r}")
    return value


def _shards(call: str, num_shards: Optional[int], shard_id: Optional[int]) -> Tuple[int, int]:
    if (num_shards is None) != (shard_id is None):
        raise ValueError(f"{call}: num_shards and shard_id must be given together (MindSpore's rule)")
    if num_shards is None or shard_id is None:
        return 1, 0
    _positive(call, "num_shards", num_shards, allow_none=False)
    if isinstance(shard_id, bool) or not isinstance(shard_id, int) or not 0 <= shard_id < num_shards:
        raise ValueError(f"{call}: shard_id must be in [0, {num_shards}), not {shard_id!r}")
    return num_shards, shard_id


def _sampling_args(call: str, sampler: Any, cache: Any, num_samples: Optional[int]) -> None:
    if sampler is not None:
        _no(call, "sampler", "use shuffle, num_samples, num_shards and shard_id")
    if cache is not None:
        _no(call, "cache")
    _positive(call, "num_samples", num_samples)

