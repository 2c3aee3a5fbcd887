"""``imgfeed.Pipeline``: a pipeline description (the tables of a pipeline file) built in
Python or read from a file, and the overrides the command line also has."""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _imgfeed, _warn

__all__ = ["Pipeline"]

PathLike = Union[str, "os.PathLike[str]"]


def warn_about(native: "_imgfeed.Pipeline") -> "_imgfeed.Pipeline":
    """Issue the pipeline's warnings as ``UserWarning`` s (``imgfeed:``, at the user's line);
    returns it."""
    for w in native.warnings():
        _warn.warn(w)
    return native


def _op_tables(op: Any) -> List[Dict[str, Any]]:
    """An op given as a table (``{"op": "resize", "size": 256}``) or as an op object of
    ``imgfeed.dataset.vision`` / ``imgfeed.dataset.transforms``, as engine op tables."""
    if isinstance(op, Mapping):
        if "op" not in op:
            raise ValueError(f"op table {dict(op)!r} has no \"op\" key")
        return [dict(op)]
    tables = getattr(op, "_tables", None)
    if callable(tables):
        return list(tables())
    raise NotImplementedError(
        f"{op!r} is not an imgfeed op: ops are tables such as {{'op': 'resize', 'size': 256}} "
        "or objects of imgfeed.dataset.vision / imgfeed.dataset.transforms (a Python callable "
        "cannot run inside the native engine)"
    )


def _absolute(path: Optional[PathLike]) -> Optional[str]:
    """``path`` made absolute (a URL such as ``s3://bucket/prefix`` as given); ``None`` stays."""
    if path is None:
        return None
    p = os.fspath(path)
    return p if "://" in str(p) else os.path.abspath(p)


class Pipeline:
    """A pipeline: where samples come from, the per-sample ops, batching and the engine's
    settings, as the tables of a pipeline file (``pipelines/*.toml``).

    Build one from a file with :meth:`from_file`, or in code::

        p = imgfeed.Pipeline(
            source={"kind": "image_folder", "root": "data/train", "shuffle": True, "seed": 1},
            ops=[{"op": "decode"}, {"op": "random_resized_crop", "size": 224},
                 {"op": "random_horizontal_flip", "prob": 0.5},
                 {"op": "normalize", "mean": [123.675, 116.28, 103.53], "std": [58.395, 57.12, 57.375]},
                 {"op": "hwc_to_chw"}, {"op": "type_cast", "column": "label", "dtype": "int32"}],
            batch_size=256, drop_remainder=True, engine={"workers": 8})

    Ops may also be the op objects of ``imgfeed.dataset.vision`` (``C.Decode()``, ...).
    Nothing is read until :meth:`build` (or a :class:`imgfeed.Loader`) opens the dataset.
    """

    def __init__(
        self,
        source: Mapping[str, Any],
        ops: Iterable[Any] = (),
        batch_size: int = 1,
        drop_remainder: bool = False,
        engine: Optional[Mapping[str, Any]] = None,
    ) -> None:
        src = dict(source)
        if "root" in src:
            src["root"] = os.path.abspath(os.fspath(src["root"]))
        tables: List[Dict[str, Any]] = []
        for op in ops:
            tables.extend(_op_tables(op))
        self._config: Dict[str, Any] = {
            "source": src,
            "ops": tables,
            "batch": {"size": int(batch_size), "drop_remainder": bool(drop_remainder)},
        }
        if engine:
            self._config["engine"] = dict(engine)
        self._check()

    def _check(self) -> None:
        """Check the tables now, naming the one at fault (``ops[0] (decod): unknown variant
        ...``); the dataset is opened only when the pipeline is built."""
        _imgfeed.Pipeline.check_config(self.to_json())

    @classmethod
    def from_file(cls, path: PathLike) -> "Pipeline":
        """Read a pipeline file (TOML); a relative ``root`` is relative to the file."""
        config = json.loads(_imgfeed.Pipeline.load_config(os.fspath(path)))
        return cls.from_config(config)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "Pipeline":
        """From the tables as a dict (``{"source": ..., "ops": [...], "batch": ..., "engine": ...}``)."""
        p = cls.__new__(cls)
        p._config = copy.deepcopy(dict(config))
        p._check()
        return p

    @property
    def config(self) -> Dict[str, Any]:
        """A copy of the tables."""
        return copy.deepcopy(self._config)

    def replace(
        self,
        *,
        data: Optional[PathLike] = None,
        batch_size: Optional[int] = None,
        drop_remainder: Optional[bool] = None,
        workers: Optional[int] = None,
        work_unit: Optional[int] = None,
        shuffle: Optional[bool] = None,
        seed: Optional[int] = None,
        num_shards: Optional[int] = None,
        shard_id: Optional[int] = None,
        uneven: Optional[str] = None,
        on_error: Optional[str] = None,
        usage: Optional[str] = None,
        endpoint: Optional[str] = None,
        cache_dir: Optional[PathLike] = None,
        cache_size: Optional[str] = None,
    ) -> "Pipeline":
        """A copy with the given settings changed: the command line's flags of the same names
        (``shuffle=False`` is ``--no-shuffle``), applied and checked by the same code in the
        engine (``ValueError`` naming a setting it refuses). A relative ``data`` or
        ``cache_dir`` is made absolute here; a dataset in object storage (``s3://bucket/prefix``)
        is passed as given."""
        if (num_shards is None) != (shard_id is None):
            raise ValueError("num_shards and shard_id must be given together")
        given: Dict[str, Any] = {
            "data": _absolute(data),
            "batch_size": batch_size,
            "drop_remainder": drop_remainder,
            "workers": workers,
            "work_unit": work_unit,
            "shuffle": shuffle,
            "seed": seed,
            "num_shards": num_shards,
            "shard_id": shard_id,
            "uneven": uneven,
            "on_error": on_error,
            "usage": usage,
            "endpoint": endpoint,
            "cache_dir": _absolute(cache_dir),
            "cache_size": cache_size,
        }
        overrides = {k: v for k, v in given.items() if v is not None}
        if not overrides:
            return Pipeline.from_config(self._config)
        config = _imgfeed.Pipeline.apply_overrides(self.to_json(), json.dumps(overrides))
        return Pipeline.from_config(json.loads(config))

    def to_json(self) -> str:
        """The tables as JSON (what the native engine reads)."""
        return json.dumps(self._config)

    def build(self) -> "_imgfeed.Pipeline":
        """Open the dataset and check the whole pipeline against it (``ValueError`` naming the problem;
        a ``UserWarning`` for what looks like a mistake but runs, such as normalize's units)."""
        return warn_about(_imgfeed.Pipeline(self.to_json()))

    def check(self) -> List[Tuple[str, Dict[str, Any]]]:
        """``[(stage, spec after it)]``, starting with the source: what ``imgfeed check`` prints."""
        return self.build().stages()

    def __repr__(self) -> str:
        ops: Sequence[Dict[str, Any]] = self._config.get("ops", [])
        names = ", ".join(str(o.get("op")) for o in ops)
        return f"Pipeline(source={self._config['source'].get('kind')!r} at {self._config['source'].get('root')!r}, ops=[{names}], batch={self._config.get('batch')})"
