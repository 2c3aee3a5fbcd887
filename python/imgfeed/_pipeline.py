"""``imgfeed.Pipeline``: a pipeline description (the tables of a pipeline file) built in
Python or read from a file, and the overrides the command line also has."""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _imgfeed, _torch_names, _warn

__all__ = ["Pipeline", "settings"]

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


def settings() -> List[Dict[str, Any]]:
    """The settings :meth:`Pipeline.replace` and :class:`imgfeed.Loader` take: the engine's
    table, which the command line's flags are also made from. One dict each: ``name`` (the
    keyword), ``table`` and ``key`` (what it replaces in the pipeline), ``kind`` (``path``,
    ``int``, ``bool``, ``text``, ``choice``), ``choices``, ``doc``, ``default`` and ``flag``
    (the command line's, or ``None``)."""
    return [dict(s) for s in _SETTINGS]


_SETTINGS: List[Dict[str, Any]] = _imgfeed.settings()
_BY_NAME: Dict[str, Dict[str, Any]] = {s["name"]: s for s in _SETTINGS}


def settings_doc() -> str:
    """The settings as a docstring list: ``name``: what it is (the pipeline key it replaces)."""
    lines = []
    for s in _SETTINGS:
        flag = f", ``{s['flag']}``" if s["flag"] else ""
        doc = s["doc"].rstrip(".")
        lines.append(f"        ``{s['name']}``: {doc} (``{s['table']}.{s['key']}``{flag}).")
    return "\n".join(lines) + "\n"


def overrides_json(given: Mapping[str, Any], call: str) -> str:
    """``given`` (keyword → value; ``None`` is not given) as the engine's overrides JSON:
    a path made absolute (a URL as given). An unknown keyword is a ``TypeError``, as Python
    says for a function's own; the values are checked by the engine."""
    overrides: Dict[str, Any] = {}
    for name, value in given.items():
        setting = _BY_NAME.get(name)
        if setting is None:
            if name in _torch_names.TORCH:  # a DataLoader keyword: imgfeed's answer
                _torch_names.refuse(f"{call}()", {name: value})
            known = ", ".join(sorted(_BY_NAME))
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r} (settings: {known})")
        if value is None:
            continue
        overrides[name] = _absolute(value) if setting["kind"] == "path" else value
    return json.dumps(overrides)


def _batch_op_table(op: Any) -> Dict[str, Any]:
    """A batch op given as a table (``{"op": "mixup", "alpha": 0.2}``), as its engine table."""
    if not isinstance(op, Mapping):
        raise TypeError(
            f"{op!r} is not a batch op: batch ops are tables such as {{'op': 'one_hot', 'num_classes': 10}} "
            f"(one of {', '.join(_imgfeed.batch_op_names())})"
        )
    if "op" not in op:
        raise ValueError(f"batch op table {dict(op)!r} has no \"op\" key")
    return dict(op)


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
            batch_size=256, drop_remainder=True, engine={"workers": 8},
            batch_ops=[{"op": "one_hot", "num_classes": 1000}, {"op": "mixup", "alpha": 0.2}])

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
        batch_ops: Iterable[Mapping[str, Any]] = (),
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
        batch_tables = [_batch_op_table(op) for op in batch_ops]
        if batch_tables:
            self._config["batch_ops"] = batch_tables
        self._check()

    def _check(self) -> None:
        """Check the tables now, naming the one at fault (``ops[0] (decod): unknown variant
        ...``); the dataset is opened only when the pipeline is built."""
        _imgfeed.Pipeline.check_config(self.to_json())

    @classmethod
    def from_file(cls, path: PathLike) -> "Pipeline":
        """Read a pipeline file (TOML); a relative ``root`` is relative to the file."""
        return cls._trusted(json.loads(_imgfeed.Pipeline.load_config(os.fspath(path))))

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

    def replace(self, **settings: Any) -> "Pipeline":
        """A copy with the given settings changed: the command line's flags of the same names
        (``shuffle=False`` is ``--no-shuffle``), applied and checked by the same code in the
        engine (``ValueError`` naming a setting it refuses; ``num_shards`` and ``shard_id``
        go together). A relative ``data`` or ``cache_dir`` is made absolute here; a dataset in
        object storage (``s3://bucket/prefix``) is passed as given.

        The settings (the engine's table, :func:`settings`):

        """
        overrides = overrides_json(settings, "replace")
        if overrides == "{}":
            return Pipeline._trusted(self._config)
        config = _imgfeed.Pipeline.apply_overrides(self.to_json(), overrides)
        return Pipeline._trusted(json.loads(config))

    @classmethod
    def _trusted(cls, config: Mapping[str, Any]) -> "Pipeline":
        """From tables the engine has just written or checked (not checked again)."""
        p = cls.__new__(cls)
        p._config = copy.deepcopy(dict(config))
        return p

    replace.__doc__ = (replace.__doc__ or "").rstrip() + "\n\n" + settings_doc()

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

    def _repr_png_(self) -> Optional[bytes]:
        """Jupyter shows the first eight samples as the trainer gets them (``imgfeed.preview``)."""
        from ._preview import repr_png

        return repr_png(self)

    def __repr__(self) -> str:
        ops: Sequence[Dict[str, Any]] = self._config.get("ops", [])
        names = ", ".join(str(o.get("op")) for o in ops)
        return f"Pipeline(source={self._config['source'].get('kind')!r} at {self._config['source'].get('root')!r}, ops=[{names}], batch={self._config.get('batch')})"
