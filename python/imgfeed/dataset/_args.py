"""The checks the datasets make on their MindSpore arguments: an unsupported one raises
``NotImplementedError`` naming it, a bad value ``ValueError``."""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Tuple, Union

from .. import _imgfeed

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
    """The pair checked by the engine's rule (the one ``Pipeline.replace`` and the command line
    use: given together, the rank below the ranks); ``(1, 0)`` when neither is given."""
    for name, value in (("num_shards", num_shards), ("shard_id", shard_id)):
        if isinstance(value, bool) or not (value is None or isinstance(value, int)):
            raise ValueError(f"{call}: {name} must be an int, not {value!r}")
    try:
        _imgfeed.check_overrides(json.dumps({"num_shards": num_shards, "shard_id": shard_id}))
    except ValueError as e:
        raise ValueError(f"{call}: {e}") from None
    if num_shards is None or shard_id is None:
        return 1, 0
    return num_shards, shard_id


def _sampling_args(call: str, sampler: Any, cache: Any, num_samples: Optional[int]) -> None:
    if sampler is not None:
        _no(call, "sampler", "use shuffle, num_samples, num_shards and shard_id")
    if cache is not None:
        _no(call, "cache")
    _positive(call, "num_samples", num_samples)

