"""imgfeed as a Ray Data source: :func:`read` makes a ``ray.data.Dataset`` of an epoch's
ready batches, read by tasks spread over a Ray cluster, each running imgfeed's native
engine over a contiguous range of the epoch's batches; :func:`convert` runs ``imgfeed convert
--slice I/K`` conversions as Ray tasks and joins them::

    import imgfeed.ray
    ds = imgfeed.ray.read("pipelines/resnet50_train.toml", data="/data/train", epoch=3)
    for images, labels, indices in imgfeed.ray.batches(ds):
        ...                             # exactly the batches imgfeed.Loader yields for epoch 3
    # iterating ds again reads epoch 4 (a new shuffle), as Ray Train does once per epoch

Needs Ray Data (``pip install 'ray[data]'``); the cluster's workers need this package
installed and the dataset at the same path (a shared file system).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _imgfeed
from ._pipeline import PathLike, Pipeline, warn_about

try:
    import ray
    import ray.data
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask
except ImportError as e:  # pragma: no cover - exercised only without Ray
    raise ImportError("imgfeed.ray needs Ray Data, which is not importable here: pip install 'ray[data]'") from e

__all__ = ["ImgfeedDatasource", "batches", "convert", "read", "uint8_affine", "uint8_pipeline"]

#: Ops that change an image's values into floats: ``uint8=True`` leaves them to the consumer.
_VALUE_OPS = ("normalize", "rescale")
#: Ops that may follow them when ``uint8=True`` drops them: they move or cast bytes, so they
#: do the same on the uint8 image (``type_cast`` only of the label).
_LAYOUT_OPS = ("hwc_to_chw", "chw_to_hwc")


def uint8_pipeline(pipeline: Pipeline) -> Tuple[Pipeline, List[Dict[str, Any]]]:
    """The pipeline without its ``normalize`` / ``rescale`` ops (so its images stay uint8),
    and those ops' tables (what the consumer then applies, in order). Raises ``ValueError``
    when an op after them would not do the same on uint8 pixels (only layout ops and the
    label's ``type_cast`` may follow), or when the images would not be uint8."""
    cfg = pipeline.config
    kept: List[Dict[str, Any]] = []
    removed: List[Dict[str, Any]] = []
    for i, op in enumerate(cfg.get("ops", [])):
        name = op.get("op")
        if name in _VALUE_OPS:
            removed.append(op)
            continue
        if removed and not (name in _LAYOUT_OPS or (name == "type_cast" and op.get("column") == "label")):
            raise ValueError(
                f"uint8=True: ops[{i}] ({name}) comes after {removed[-1]['op']} and would not do the same "
                "on uint8 pixels; only hwc_to_chw and the label's type_cast may follow normalize/rescale"
            )
        kept.append(op)
    cfg["ops"] = kept
    p = Pipeline.from_config(cfg)
    dtype = p.build().output_spec()["dtype"]
    if dtype != "uint8":
        raise ValueError(f"uint8=True: without normalize/rescale the pipeline's images are {dtype}, not uint8")
    return p, removed


def uint8_affine(ops: Iterable[Dict[str, Any]], channels: int = 3) -> Tuple[np.ndarray, np.ndarray]:
    """``(scale, shift)``, float32 per channel, of the ``normalize`` / ``rescale`` ops that
    :func:`uint8_pipeline` removed, composed in order: the consumer's
    ``images * scale + shift`` (over the channel axis: ``[:, None, None]`` for CHW) gives the
    pipeline's float32 images (the engine computes the same map, ``x * (1/std) - mean/std``,
    with its own rounding: equal to within float32 rounding, not bit for bit)."""
    scale = np.ones(channels, np.float32)
    shift = np.zeros(channels, np.float32)
    for op in ops:
        if op["op"] == "normalize":
            mean = np.resize(np.asarray(op["mean"], np.float32), channels)
            std = np.resize(np.asarray(op["std"], np.float32), channels)
            inv = np.float32(1) / std
            scale, shift = scale * inv, shift * inv - mean * inv
        elif op["op"] == "rescale":
            r, s = np.float32(op.get("rescale", 1.0)), np.float32(op.get("shift", 0.0))
            scale, shift = scale * r, shift * r + s
        else:
            raise ValueError(f"uint8_affine: {op['op']} is not normalize or rescale")
    return scale.astype(np.float32), shift.astype(np.float32)


def _ranges(n: int, parts: int) -> List[Tuple[int, int]]:
    """``parts`` contiguous ranges covering ``0..n``, sizes differing by at most one."""
    parts = max(1, min(parts, n))
    q, r = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        end = start + q + (1 if i < r else 0)
        out.append((start, end))
        start = end
    return out


# One native pipeline per configuration in each Ray worker process: opening the dataset
# (listing an ImageFolder tree) is done once per worker, not once per read task.
_NATIVE: Dict[str, "_imgfeed.Pipeline"] = {}


def _native(config_json: str) -> "_imgfeed.Pipeline":
    native = _NATIVE.get(config_json)
    if native is None:
        _NATIVE.clear()
        native = _NATIVE[config_json] = warn_about(_imgfeed.Pipeline(config_json))
    return native


def _block(b: "_imgfeed.Batch", rows: str, node: Optional[str]) -> Any:
    if rows == "batches":
        cols: Dict[str, Any] = {"image": b.images[None], "label": b.labels[None], "index": b.indices[None]}
        if node is not None:
            cols["node_id"] = np.array([node])
    else:
        cols = {"image": b.images, "label": b.labels, "index": b.indices}
        if node is not None:
            cols["node_id"] = np.array([node] * len(b.indices))
    return BlockAccessor.batch_to_block(cols)


def _read_range(config_json: str, epoch: int, first: int, end: int, rows: str, with_node_id: bool) -> Iterator[Any]:
    """A read task: batches ``first..end`` of the epoch, one block each, from a native
    epoch resumed at ``first`` and closed after ``end - 1``."""
    native = _native(config_json)
    node = ray.get_runtime_context().get_node_id() if with_node_id else None
    running = native.epoch(epoch, first)
    try:
        for number in range(first, end):
            b = next(running, None)
            if b is None:
                raise RuntimeError(
                    f"imgfeed.ray: epoch {epoch} ended at batch {number}, before the task's last batch "
                    f"{end - 1} (the dataset changed since read() counted its batches?)"
                )
            yield _block(b, rows, node)
            del b
    finally:
        running.close()


class ImgfeedDatasource(Datasource):
    """A ``ray.data.Datasource`` over one epoch of an imgfeed pipeline (see :func:`read`)."""

    def __init__(
        self, pipeline: Pipeline, epoch: int = 0, *, rows: str = "batches", with_node_id: bool = False,
        advance: bool = True,
    ) -> None:
        super().__init__()
        if rows not in ("batches", "samples"):
            raise ValueError(f"rows must be 'batches' or 'samples', not {rows!r}")
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, not {epoch}")
        if pipeline.config.get("engine", {}).get("on_error") == "skip":
            raise ValueError(
                "imgfeed.ray.read: on_error='skip' is not supported: a task resumes its range at a batch "
                "number, and skipped samples before it would shift its batches (use 'error' or 'replace')"
            )
        self.pipeline = pipeline
        self.epoch = int(epoch)
        self.advance = bool(advance)
        if self.advance and not hasattr(ray.data.DataContext.get_current(), "_execution_idx"):
            raise ValueError(
                f"imgfeed.ray.read: this Ray ({ray.__version__}) does not count a dataset's executions, so a "
                "second pass cannot move to the next epoch: pass advance_epoch=False and make one dataset per "
                "epoch (read(..., epoch=e))"
            )
        self.rows = rows
        self.with_node_id = with_node_id
        native = pipeline.build()
        self._json = pipeline.to_json()
        self.num_batches: int = native.batches_per_epoch()
        self.num_samples: int = native.samples_per_epoch()
        spec = native.output_spec()
        self.output_spec: Dict[str, Any] = spec
        self._sample_bytes = _sample_bytes(spec)
        self.batch_size = int(pipeline.config["batch"]["size"])
        if self.hold_block_batches and _image_bytes(spec):  # a batch's bytes are known
            # Ray's output buffer holds a task's batches until they fill a block (up to
            # target_max_block_size, 128 MiB: 7 float32 ImageNet batches) before it copies
            # them into the object store; the engine's pool keeps its queue's worth of free
            # buffers, so with the default queue of 2 most batches got freshly allocated
            # memory (page faults, zeroing). A queue of a block's batches lets the buffers
            # go round: measured, BENCHMARKS.md.
            cfg = pipeline.config
            engine = cfg.setdefault("engine", {})
            need = self._block_batches() + 1
            if int(engine.get("queue", 2)) < need:
                engine["queue"] = need
                self._json = json.dumps(cfg)

    #: Raise the read tasks' engine queue to a Ray block's batches (see ``__init__``);
    #: ``False`` keeps the pipeline's own (``benches/ray_read.py`` compares the two).
    hold_block_batches: bool = True

    def _block_batches(self) -> int:
        """Batches in one of Ray's blocks: its target block size over a batch's bytes."""
        target = getattr(ray.data.DataContext.get_current(), "target_max_block_size", None) or 128 * 1024 * 1024
        batch_bytes = max(1, self.batch_size * self._sample_bytes)
        return max(1, min(64, -(-int(target) // batch_bytes)))

    def get_name(self) -> str:
        """The read tasks' name in Ray's progress and stats."""
        return "Imgfeed"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        """The epoch's bytes: samples × (image + label + index)."""
        return self.num_samples * self._sample_bytes

    def _rows_in(self, first: int, end: int) -> Tuple[int, int]:
        """(rows, samples) of batches ``first..end``: only the last batch may be short."""
        samples = min(end * self.batch_size, self.num_samples) - first * self.batch_size
        return (end - first if self.rows == "batches" else samples), samples

    def epoch_of(self, data_context: Any) -> int:
        """The epoch an execution reads: ``epoch``, plus (when advancing) the number of this
        dataset's executions that ended before without an error (Ray Data's execution index,
        kept in the dataset's ``DataContext``, which Ray's own file shuffling reseeds from)."""
        if not self.advance or data_context is None:
            return self.epoch
        return self.epoch + int(getattr(data_context, "_execution_idx", 0))

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None, data_context: Any = None) -> List[ReadTask]:
        """``min(parallelism, batches)`` tasks, each over a contiguous range of the epoch's batches."""
        tasks = []
        epoch = self.epoch_of(data_context)
        for first, end in _ranges(self.num_batches, parallelism):
            rows, samples = self._rows_in(first, end)
            meta = BlockMetadata(num_rows=rows, size_bytes=samples * self._sample_bytes, input_files=None, exec_stats=None)
            args = (self._json, epoch, first, end, self.rows, self.with_node_id)
            tasks.append(ReadTask(lambda args=args: _read_range(*args), meta, per_task_row_limit=per_task_row_limit))
        return tasks


def _numpy_dtype(name: str) -> str:
    return {"bfloat16": "uint16"}.get(name, name)


#: A sample's source index in a batch (``uint64``).
_INDEX_BYTES = 8


def _image_bytes(spec: Dict[str, Any]) -> int:
    """A sample's image bytes in a batch, or 0 when they are not fixed (encoded output, a
    size that varies, a type numpy does not name)."""
    dims = [spec.get(k) for k in ("height", "width", "channels")]
    if not all(dims) or spec.get("encoded"):
        return 0
    try:
        return int(np.prod(dims)) * np.dtype(_numpy_dtype(spec["dtype"])).itemsize
    except TypeError:
        return 0


def _sample_bytes(spec: Dict[str, Any]) -> int:
    """A sample's bytes in a batch: image (when its size is fixed), labels and index."""
    try:
        label = np.dtype(spec.get("label") or "int32").itemsize * int(spec.get("label_columns") or 1)
    except TypeError:  # a type numpy does not name
        label = 8
    return _image_bytes(spec) + label + _INDEX_BYTES


def read(
    pipeline: Union[PathLike, Pipeline],
    data: Optional[PathLike] = None,
    epoch: int = 0,
    *,
    parallelism: Optional[int] = None,
    uint8: bool = False,
    rows: str = "batches",
    with_node_id: bool = False,
    advance_epoch: bool = True,
    ray_remote_args: Optional[Dict[str, Any]] = None,
    **overrides: Any,
) -> "ray.data.Dataset":
    """One epoch of a pipeline as a ``ray.data.Dataset``, read by Ray tasks running imgfeed's
    engine, each over a contiguous range of the epoch's batches (the sampler's order: the
    shuffle seed, ``epoch`` and the sharding as the pipeline says). The blocks in order are
    exactly the epoch :class:`imgfeed.Loader` yields, byte for byte; the dataset preserves
    block order (its ``DataContext`` has ``execution_options.preserve_order = True``).

    Args:
        pipeline: a pipeline file or an :class:`imgfeed.Pipeline`.
        data: the dataset root (the file's ``root`` otherwise); every worker must see it at
            this path.
        epoch: the epoch (seeds the shuffle and the random ops) of the dataset's first pass.
        parallelism: read tasks, at most one per batch (default: two per slot of the
            cluster's CPUs, ``CPU / num_cpus``, so that a task ending early leaves no CPU idle
            for long).
        uint8: leave out ``normalize`` / ``rescale`` (see :func:`uint8_pipeline`): images
            travel as uint8, 4× fewer bytes than float32; the consumer normalizes.
        rows: ``"batches"`` (default): a row is one batch (``image`` [B, C, H, W], ``label``
            [B], ``index`` [B]); a block never splits a batch, so ``streaming_split`` and
            Ray's block resizing keep batches whole. ``"samples"``: a row is one sample.
        with_node_id: add a ``node_id`` column: the Ray node that read the row.
        advance_epoch: each pass over the dataset after a completed one reads the next
            epoch (``epoch``, ``epoch + 1``, ...: a new shuffle and new random draws, as
            :class:`imgfeed.Loader` does without ``set_epoch``). Ray Train executes its
            datasets once per epoch (``get_dataset_shard(...).iter_torch_batches()`` in each
            epoch's loop), so its epochs are imgfeed's. The count is Ray Data's execution
            index of this dataset (kept in its ``DataContext``, the one Ray's own file
            shuffling reseeds from), which counts the passes that ended without an error: a
            pass that failed is read again as the same epoch; one stopped early counts once
            Ray has shut it down (when its iterator is released). ``False``: every pass
            reads ``epoch``.
        ray_remote_args: the read tasks' Ray options, given to ``ray.data.read_datasource``
            (``num_cpus``: default 1; ``memory``, ``resources``, ``runtime_env``, ...).
        **overrides: :meth:`imgfeed.Pipeline.replace`'s settings (``batch_size``, ``seed``,
            ``shuffle``, ``num_shards``/``shard_id``, ``workers``, ...). ``workers``
            defaults to the read task's ``num_cpus``.
    """
    p = pipeline if isinstance(pipeline, Pipeline) else Pipeline.from_file(pipeline)
    remote = dict(ray_remote_args or {})
    remote.setdefault("num_cpus", 1)
    overrides.setdefault("workers", max(1, int(math.ceil(remote["num_cpus"]))))
    p = p.replace(data=data, **overrides)
    if uint8:
        p, _ = uint8_pipeline(p)
    source = ImgfeedDatasource(p, epoch, rows=rows, with_node_id=with_node_id, advance=advance_epoch)
    if parallelism is None:
        parallelism = _default_parallelism(source.num_batches, float(remote["num_cpus"]))
    ctx = ray.data.DataContext.get_current()
    saved = (ctx.execution_options.preserve_order, ctx.op_resource_reservation_enabled)
    # The dataset keeps a copy of the current context: set these there, then restore ours.
    ctx.execution_options.preserve_order = True
    # Ray Data 2.60 reserves half the cluster's CPUs for each operator: a lone read operator
    # ran one task at a time at first (on two CPUs, a second task started only when the
    # first one ended); without the reservation the read tasks fill the cluster at once.
    # (Ray's block size is left alone: blocks of one batch each, sent on sooner, cost more
    # CPU per epoch than its 128 MiB blocks, measured on one node and on two.)
    ctx.op_resource_reservation_enabled = False
    try:
        kwargs: Dict[str, Any] = dict(remote)
        kwargs["override_num_blocks"] = int(parallelism)
        return ray.data.read_datasource(source, **kwargs)
    finally:
        ctx.execution_options.preserve_order, ctx.op_resource_reservation_enabled = saved


def _default_parallelism(batches: int, num_cpus: float) -> int:
    """Two read tasks per slot of the cluster's CPUs (so a task that ends early leaves no
    CPU idle for long), at most one per batch."""
    # Not connected yet: Ray Data starts a local Ray with this machine's CPUs.
    cpus = float(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else float(os.cpu_count() or 1)
    slots = max(1, int(cpus // num_cpus)) if num_cpus > 0 else max(1, int(cpus))
    return max(1, min(batches, 2 * slots))


def batches(source: Any) -> Iterator[Tuple[Any, Any, Any]]:
    """``(images, labels, indices)`` of each imgfeed batch of a :func:`read` dataset with
    ``rows="batches"``, in order.

    ``source`` is the dataset itself, or what iterates it (a ``DataIterator``: a
    ``streaming_split`` part, Ray Train's ``get_dataset_shard(...)``): its blocks are then
    taken whole (``iter_batches(batch_size=None, batch_format="pyarrow")``) and each batch's
    arrays are views of the block in the object store, not copies (Ray's numpy format would
    first concatenate a block's batches, one copy of up to 128 MiB per block). Or an iterable
    of the dicts that ``iter_batches`` / ``iter_torch_batches`` yield (any ``batch_size``:
    each row is one imgfeed batch). The views are read-only and live as long as the block:
    copy what must outlive the next batch."""
    if hasattr(source, "iter_batches"):
        groups: Iterable[Tuple[Any, Any, Any]] = _groups_of_blocks(
            source.iter_batches(batch_size=None, batch_format="pyarrow"))
    else:
        groups = ((g["image"], g["label"], g["index"]) for g in source)
    for images, labels, indices in groups:
        for i in range(len(images)):
            yield images[i], labels[i], indices[i]


def _numpy(chunk: Any) -> Any:
    """An Arrow array as numpy: Ray's tensor arrays without a copy."""
    try:
        return chunk.to_numpy(zero_copy_only=True)
    except (TypeError, ValueError, NotImplementedError):
        return chunk.to_numpy(zero_copy_only=False)


def _groups_of_blocks(blocks: Iterable[Any]) -> Iterator[Tuple[Any, Any, Any]]:
    """Each Arrow block's ``(image, label, index)`` rows, a chunk at a time, as views."""
    for table in blocks:
        columns = [table.column(name) for name in ("image", "label", "index")]
        if len({tuple(len(c) for c in col.chunks) for col in columns}) == 1:
            parts = [col.chunks for col in columns]  # one chunk per batch the task yielded
        else:  # chunked unlike each other: one array per column (a copy)
            parts = [[col.combine_chunks()] for col in columns]
        yield from zip(*([_numpy(c) for c in part] for part in parts))


# --- conversions ---------------------------------------------------------------------------

_SLICES = ".imgfeed-slices"


def _binary(binary: Optional[PathLike]) -> Optional[str]:
    """The ``imgfeed`` command given: ``binary``, else ``IMGFEED_BIN``; None for the one the
    installed wheel carries (:func:`_command`)."""
    return os.fspath(binary) if binary is not None else os.environ.get("IMGFEED_BIN") or None


def _command(binary: Optional[str]) -> List[str]:
    """The command line of ``imgfeed`` on this node: ``binary``, else this package's own
    command (``python -m imgfeed`` with the interpreter running the task, the wheel's
    command line: a node needs nothing beyond the wheel)."""
    return [binary] if binary else [sys.executable, "-m", "imgfeed"]


def _die_with_parent() -> None:
    """In the child: SIGKILL when the Ray worker that started it dies (Linux's
    PR_SET_PDEATHSIG), so a killed task leaves no conversion running."""
    import ctypes
    import signal

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))
    except OSError:
        pass


def _convert_slice(binary: Optional[str], cmd: List[str], out: str, i: int, k: int) -> Dict[str, Any]:
    """A Ray task: ``imgfeed convert ... --slice i/k`` into a folder of its own
    (``OUT/.imgfeed-slices/I.attempt-UUID``), renamed to ``OUT/.imgfeed-slices/I`` once the
    command has succeeded: only a complete slice counts, and a retried task never adds to
    what a failed attempt wrote."""
    slices = Path(out) / _SLICES
    final = slices / f"{i:05d}"
    node = ray.get_runtime_context().get_node_id()
    if final.is_dir():
        return {"slice": i, "node_id": node, "returncode": 0, "stdout": "(done by an earlier attempt)", "stderr": ""}
    attempt = slices / f"{i:05d}.attempt-{uuid.uuid4().hex}"
    run = subprocess.run(
        [*_command(binary), *cmd, "--slice", f"{i}/{k}", "--out", str(attempt)],
        capture_output=True, text=True, preexec_fn=_die_with_parent,
    )
    if run.returncode not in (0, 1):  # 1: bad samples skipped, the rest written (as the CLI)
        shutil.rmtree(attempt, ignore_errors=True)
        raise RuntimeError(f"imgfeed convert slice {i}/{k} exited {run.returncode}: {run.stderr.strip()}")
    try:
        os.rename(attempt, final)
    except OSError:
        if not final.is_dir():
            raise
        shutil.rmtree(attempt, ignore_errors=True)  # another attempt finished first
    return {"slice": i, "node_id": node, "returncode": run.returncode, "stdout": run.stdout, "stderr": run.stderr}


def _concat_npy(parts: List[Path], target: Path) -> None:
    arrays = [np.load(p, mmap_mode="r") for p in parts]
    shape = (sum(a.shape[0] for a in arrays), *arrays[0].shape[1:])
    partial = target.with_name(target.name + ".partial")
    out = np.lib.format.open_memmap(partial, mode="w+", dtype=arrays[0].dtype, shape=shape)
    at = 0
    for a in arrays:
        out[at:at + len(a)] = a
        at += len(a)
    out.flush()
    del out
    os.replace(partial, target)


def convert(
    pipeline: PathLike,
    data: Optional[PathLike],
    out: PathLike,
    slices: int,
    *,
    format: str = "npy",
    args: Iterable[str] = (),
    binary: Optional[PathLike] = None,
    num_cpus: float = 1,
    timeout_s: Optional[float] = None,
) -> Dict[str, Any]:
    """``imgfeed convert PIPELINE --data DATA --format FORMAT --out OUT`` split into ``slices``
    Ray tasks (``--slice I/K``; slice I on the I-th node, round robin, elsewhere if that
    node is gone), then joined: ``merge-index`` for
    ``format="shards"`` (the same records as one machine's conversion), concatenation for
    ``"npy"`` (``images.npy``, ``labels.npy``, ``samples.txt`` byte for byte those of one
    machine's conversion). ``args``: more ``imgfeed convert`` flags (``--store raw``,
    ``--shard-size 256MB``, ``--workers 4``, sampling flags for npy, ...).

    Every node runs the ``imgfeed`` command (``binary``, else ``IMGFEED_BIN``, else the one
    the installed wheel carries, ``python -m imgfeed``) and sees ``pipeline``, ``data`` and ``out`` at the same paths. A task writes
    into a folder of its own that counts once the command succeeded, so a task Ray retries
    (its worker died) never duplicates records. Returns ``{"slices": [each task's slice,
    node_id, returncode, stdout, stderr], "merge": merge-index's output or None}``; raises
    ``RuntimeError`` naming the slice whose command failed.
    """
    if isinstance(pipeline, Pipeline):
        raise TypeError("imgfeed.ray.convert takes a pipeline file (the imgfeed command reads TOML), not an imgfeed.Pipeline")
    if format not in ("npy", "shards"):
        raise ValueError(f"format must be 'npy' or 'shards', not {format!r}")
    if slices < 1:
        raise ValueError(f"slices must be >= 1, not {slices}")
    exe = _binary(binary)
    out_dir = Path(os.path.abspath(os.fspath(out)))
    done = [n for n in ("images.npy", "manifest.json") if (out_dir / n).exists()]
    if done:
        raise FileExistsError(f"{out_dir} already holds a conversion ({', '.join(done)})")
    (out_dir / _SLICES).mkdir(parents=True, exist_ok=True)
    cmd = ["convert", os.path.abspath(os.fspath(pipeline)), "--format", format]
    if data is not None:
        cmd += ["--data", os.path.abspath(os.fspath(data))]
    cmd += list(args)
    # Slice i on the i-th alive node with the CPUs (round robin; soft: elsewhere if it dies).
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) >= num_cpus)
    task = ray.remote(_convert_slice)
    refs = [
        task.options(
            num_cpus=num_cpus,
            max_retries=3,
            scheduling_strategy=NodeAffinitySchedulingStrategy(nodes[i % len(nodes)], soft=True) if nodes else "SPREAD"
        ).remote(exe, cmd, str(out_dir), i, slices)
        for i in range(slices)
    ]
    results = ray.get(refs, timeout=timeout_s)
    parts = [out_dir / _SLICES / f"{i:05d}" for i in range(slices)]
    merge = None
    if format == "shards":
        for part in parts:
            for f in sorted(part.iterdir()):
                os.replace(f, out_dir / f.name)
        run = subprocess.run([*_command(exe), "merge-index", str(out_dir)], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"imgfeed merge-index {out_dir} exited {run.returncode}: {run.stderr.strip()}")
        merge = run.stdout
    else:
        classes = {(p / "classes.json").read_text() for p in parts if (p / "classes.json").exists()}
        if len(classes) > 1:
            raise RuntimeError(f"the slices of {out_dir} name different classes: {sorted(classes)}")
        _concat_npy([p / "labels.npy" for p in parts], out_dir / "labels.npy")
        with open(out_dir / "samples.txt.partial", "wb") as f:
            for p in parts:
                f.write((p / "samples.txt").read_bytes())
        os.replace(out_dir / "samples.txt.partial", out_dir / "samples.txt")
        if classes:
            (out_dir / "classes.json").write_text(classes.pop())
        _concat_npy([p / "images.npy" for p in parts], out_dir / "images.npy")  # last: it marks the result complete
    shutil.rmtree(out_dir / _SLICES)
    return {"slices": results, "merge": merge}
