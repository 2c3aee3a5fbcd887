"""Reading: an epoch of a pipeline as a ``ray.data.Dataset`` (:func:`read`, over
:class:`ImgfeedDatasource`: read tasks each running the native engine over a contiguous range
of the epoch's batches), and the consumer's side (:func:`batches`)."""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np
import ray
import ray.data
from ray.data.block import BlockAccessor, BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from .. import _imgfeed
from .._pipeline import PathLike, Pipeline, warn_about
from .._uint8 import uint8_pipeline


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


def _read_range(
    config_json: str, epoch: int, first: int, end: int, rows: str, with_node_id: bool, state: Optional[str] = None
) -> Iterator[Any]:
    """A read task: batches ``first..end`` of the epoch, one block each, from a native
    epoch resumed at ``first`` (or at ``state``, a job state already advanced to
    ``first``) and closed after ``end - 1``."""
    native = _native(config_json)
    node = ray.get_runtime_context().get_node_id() if with_node_id else None
    running = native.epoch(epoch, first) if state is None else native.epoch(epoch, 0, None, state)
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
        advance: bool = True, start: Optional[Dict[str, Any]] = None,
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
        #: The job state the first pass resumes (JSON), and that pass's (batches, samples).
        self._start: Optional[str] = None
        self._start_extent = (self.num_batches, self.num_samples)
        if start is not None:
            text = json.dumps(start)
            state_epoch = native.check_state(text)
            if epoch not in (0, state_epoch):
                raise ValueError(f"imgfeed.ray.read: epoch={epoch} but start is a state of epoch {state_epoch}")
            self.epoch = int(state_epoch)
            self._start = text
            self._start_extent = tuple(native.state_extent(text))
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

    def _rows_in(self, first: int, end: int, total: Optional[int] = None) -> Tuple[int, int]:
        """(rows, samples) of batches ``first..end`` of a pass of ``total`` samples (an
        epoch's by default): only the last batch may be short."""
        total = self.num_samples if total is None else total
        samples = min(end * self.batch_size, total) - first * self.batch_size
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
        # The pass that resumes `start` (the first): the rest of its epoch on this world.
        resumed = self._start is not None and epoch == self.epoch
        batches, samples_total = self._start_extent if resumed else (self.num_batches, self.num_samples)
        native = _native(self._json) if resumed else None
        for first, end in _ranges(batches, parallelism):
            rows, samples = self._rows_in(first, end, samples_total)
            meta = BlockMetadata(num_rows=rows, size_bytes=samples * self._sample_bytes, input_files=None, exec_stats=None)
            state = native.advance_state(self._start, first) if native is not None else None
            args = (self._json, epoch, first, end, self.rows, self.with_node_id, state)
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
    start: Optional[Dict[str, Any]] = None,
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
        start: a job state (:func:`state`, :meth:`imgfeed.Loader.state_dict`, from any
            rank of any number of ranks): the first pass reads the rest of its epoch as
            this read's shard (``num_shards``/``shard_id``) of the new world, later passes
            the next epochs. A Ray Train job restarted on another number of workers, each
            reading its shard, continues the epoch: no sample lost or repeated under
            ``uneven="exact"`` (README, "Resuming on another number of ranks").
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
    source = ImgfeedDatasource(p, epoch, rows=rows, with_node_id=with_node_id, advance=advance_epoch, start=start)
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


def state(
    pipeline: Union[PathLike, Pipeline],
    data: Optional[PathLike] = None,
    *,
    epoch: int = 0,
    batches: int = 0,
    start: Optional[Dict[str, Any]] = None,
    **overrides: Any,
) -> Dict[str, Any]:
    """The job state of a consumer that read ``batches`` batches of its shard of ``epoch``
    (the pipeline and ``overrides`` as given to :func:`read`: ``num_shards``/``shard_id``,
    ``batch_size``, ...), or of the pass that resumed ``start``: save it with the
    checkpoint, and give it to :func:`read`'s ``start`` on any number of consumers.

    Consumers that each read their own shard in lockstep (``num_shards`` = consumers,
    ``shard_id`` = rank) make it exact. One dataset split by Ray (``streaming_split``)
    hands batches to whichever consumer asks: there ``batches`` is every consumer's count
    together, taken as the epoch's first batches."""
    p = pipeline if isinstance(pipeline, Pipeline) else Pipeline.from_file(pipeline)
    overrides.pop("workers", None)
    native = p.replace(data=data, **overrides).build()
    if start is not None:
        return json.loads(native.advance_state(json.dumps(start), int(batches)))
    return json.loads(native.job_state(int(epoch), int(batches)))


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
