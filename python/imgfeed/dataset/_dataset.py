"""``Dataset``: a source followed by map, batch, shuffle and repeat steps, translated to
the engine's pipeline at each call; and where MindSpore's ``Model`` starts an iterator."""

from __future__ import annotations

import copy
import json
import math
import sys
import weakref
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _imgfeed
from . import config
from ._args import _no, _positive
from ._iterators import DictIterator, TupleIterator
from ._op import Op

#: Attributes MindSpore's Model sets on the datasets it trains on (and the iterator a
#: dataset's state_dict reads), not carried to a derived dataset.
_MODEL_STATE = ("_dataset_helper", "_warmup_epoch", "_last_iterator", "_job_state")


class Dataset:
    """A dataset pipeline: a source followed by map, batch, shuffle and repeat steps.

    Every step returns a new dataset and leaves this one as it was (as MindSpore's do).
    """

    # Set by the source datasets' constructors.
    _source: Dict[str, Any]
    _native_source: Any
    _columns: List[str]
    _label_columns: List[str]
    _class_count: Optional[int]

    def __init__(self) -> None:
        raise TypeError("Dataset is abstract: create an ImageFolderDataset, Cifar10Dataset or Cifar100Dataset")

    def _init(self, call: str, source: Dict[str, Any], workers: Optional[int], columns: List[str]) -> None:
        self._call = call
        self._source = source
        self._columns = columns
        self._label_columns = columns[1:]
        self._ops: List[Dict[str, Any]] = []
        self._batch: Optional[Tuple[int, bool]] = None
        self._repeat: Optional[int] = 1
        self._workers = _positive(call, "num_parallel_workers", workers)
        self._native_source = _imgfeed.Source(json.dumps(source))
        self._class_count = None
        self._global_step = 0
        self._job_state: Optional[str] = None

    def _derive(self) -> "Dataset":
        d = copy.copy(self)
        # What MindSpore's Model and DatasetHelper set on a dataset they use
        # (__model_hash__, __transfer_dataset__, _dataset_helper, ...) is not the new one's.
        for name in [n for n in vars(d) if (n.startswith("__") and n.endswith("__")) or n in _MODEL_STATE]:
            delattr(d, name)
        d._ops = list(self._ops)
        d._source = dict(self._source)
        return d

    def _more_workers(self, call: str, workers: Optional[int]) -> None:
        w = _positive(call, "num_parallel_workers", workers)
        if w is not None:
            self._workers = max(self._workers or 0, w)

    def _stages(self, ops: List[Dict[str, Any]]) -> List[Tuple[str, Dict[str, Any]]]:
        return self._native_source.check_ops(json.dumps(ops))

    # --- steps -----------------------------------------------------------------------
    def map(
        self,
        operations: Any,
        input_columns: Optional[Union[str, Sequence[str]]] = None,
        output_columns: Optional[Union[str, Sequence[str]]] = None,
        column_order: Optional[Sequence[str]] = None,
        num_parallel_workers: Optional[int] = None,
        python_multiprocessing: bool = False,
        cache: Any = None,
        callbacks: Any = None,
        max_rowsize: Any = 16,
        offload: Optional[bool] = None,
    ) -> "Dataset":
        """Apply ``operations`` (ops of :mod:`imgfeed.dataset.vision` on ``"image"``,
        ``transforms.TypeCast`` on a label column) to every row."""
        if self._batch is not None:
            _no("map", "map after batch", "the engine's ops run on samples before batching")
        if self._repeat != 1:
            _no("map", "map after repeat")
        ops = list(operations) if isinstance(operations, (list, tuple)) else [operations]
        if not ops:
            raise ValueError("map: operations is empty")
        if input_columns is None:
            cols = [self._columns[0]]
        elif isinstance(input_columns, str):
            cols = [input_columns]
        else:
            cols = list(input_columns)
        for c in cols:
            if c not in self._columns:
                raise ValueError(f"map: input column {c!r} is not one of {self._columns}")
        if output_columns is not None:
            outs = [output_columns] if isinstance(output_columns, str) else list(output_columns)
            if outs != cols:
                _no("map", f"output_columns={output_columns!r}", "ops write back to their input columns")
        if column_order is not None and list(column_order) != self._columns:
            _no("map", f"column_order={column_order!r}")
        if python_multiprocessing:
            _no("map", "python_multiprocessing=True", "the engine's workers are native threads")
        if cache is not None:
            _no("map", "cache")
        if callbacks is not None:
            _no("map", "callbacks")
        if offload:
            _no("map", "offload=True")
        d = self._derive()
        d._more_workers("map", num_parallel_workers)
        # The first column is the image whatever its name (MindRecord's "data", TFRecord's
        # "image/encoded"): the ops know it as "image".
        cols = ["image" if c == self._columns[0] else c for c in cols]
        for op in ops:
            name = getattr(type(op), "__name__", repr(op))
            if not isinstance(op, Op):
                if callable(op):
                    _no("map", f"the Python callable {op!r}", "a Python function cannot run inside the native engine; "
                        "use the ops of imgfeed.dataset.vision / transforms")
                _no("map", f"{op!r}", "not an op of imgfeed.dataset.vision / transforms")
            op = op._retarget(cols)
            if op.column == "image":
                if cols != ["image"]:
                    _no("map", f"{name} on input_columns={cols}", f"{name} is an image op")
            else:
                if cols == ["image"]:
                    _no("map", f"{name} on the image column",
                        "the image's type follows from Normalize/Rescale (float32) or stays uint8")
                if sorted(cols) != sorted(self._label_columns):
                    _no("map", f"{name} on {cols}",
                        f"the engine casts the label columns {self._label_columns} together: name them all")
            tables = op._tables()
            try:
                d._stages(d._ops + tables)
            except ValueError as e:
                raise ValueError(f"map: {name}: {e}") from None
            d._ops.extend(tables)
        return d

    def batch(
        self,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_workers: Optional[int] = None,
        per_batch_map: Any = None,
        input_columns: Any = None,
        output_columns: Any = None,
        column_order: Any = None,
        pad_info: Any = None,
        python_multiprocessing: bool = False,
        max_rowsize: Any = 16,
    ) -> "Dataset":
        """Combine ``batch_size`` consecutive rows; ``drop_remainder`` drops the last,
        incomplete batch."""
        if self._batch is not None:
            _no("batch", "batch of batches")
        if self._repeat != 1:
            _no("batch", "batch after repeat",
                "MindSpore batches across repeats; the engine's batches end with each epoch: call repeat after batch")
        if callable(batch_size):
            _no("batch", "a callable batch_size")
        for arg, value in (("per_batch_map", per_batch_map), ("input_columns", input_columns),
                           ("output_columns", output_columns), ("column_order", column_order),
                           ("pad_info", pad_info)):
            if value is not None:
                _no("batch", arg)
        if python_multiprocessing:
            _no("batch", "python_multiprocessing=True")
        _positive("batch", "batch_size", batch_size, allow_none=False)
        d = self._derive()
        d._more_workers("batch", num_parallel_workers)
        d._batch = (batch_size, bool(drop_remainder))
        return d

    def shuffle(self, buffer_size: int) -> "Dataset":
        """Shuffle the rows every epoch. The engine shuffles the whole shard (a seeded
        permutation, new every epoch): a ``buffer_size`` at least the shard's size asks for
        exactly that; a smaller buffer's partial shuffle is refused."""
        if self._batch is not None:
            _no("shuffle", "shuffle after batch")
        if self._repeat != 1:
            _no("shuffle", "shuffle after repeat")
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 2:
            raise ValueError(f"shuffle: buffer_size must be an int > 1, not {buffer_size!r}")
        src = self._source
        if not src.get("shuffle") and (src.get("num_samples") is not None or src.get("num_shards", 1) > 1):
            _no("shuffle", "shuffle of an unshuffled dataset with num_samples or num_shards",
                "the engine shuffles before it picks a shard's samples, so each epoch would read other samples; "
                "pass shuffle=True to the dataset instead")
        n = self._samples()
        if buffer_size < n:
            _no("shuffle", f"buffer_size={buffer_size} below the {n} rows",
                "the engine shuffles globally: pass shuffle=True to the dataset or buffer_size >= the dataset size")
        d = self._derive()
        d._source["shuffle"] = True
        d._native_source = self._native_source
        return d

    def repeat(self, count: Optional[int] = None) -> "Dataset":
        """Repeat the dataset ``count`` times (``None`` or ``-1``: forever); each repetition
        is a new engine epoch, reshuffled."""
        if count is None or count == -1:
            n: Optional[int] = None
        else:
            n = _positive("repeat", "count", count, allow_none=False)
        if self._batch is None and n != 1:
            _no("repeat", "repeat before batch",
                "MindSpore would batch across the repetitions; call batch first, then repeat")
        d = self._derive()
        d._repeat = None if (n is None or self._repeat is None) else self._repeat * n
        return d

    # --- facts -----------------------------------------------------------------------
    def _samples(self) -> int:
        return self._native_source.samples_per_epoch(json.dumps(self._source))

    def _batches_per_repeat(self) -> int:
        n = self._samples()
        if self._batch is None:
            return n
        bs, drop = self._batch
        return n // bs if drop else math.ceil(n / bs)

    def get_dataset_size(self) -> int:
        """Rows per epoch: batches once batched (× the repeat count), samples before. A
        dataset repeated forever has no size: -1."""
        if self._repeat is None:
            return -1
        return self._batches_per_repeat() * self._repeat

    def get_col_names(self) -> List[str]:
        """The columns: ``["image", "label"]`` (CIFAR-100: ``["image", "coarse_label", "fine_label"]``)."""
        return list(self._columns)

    def get_batch_size(self) -> int:
        """Rows per batch (1 before ``batch``)."""
        return self._batch[0] if self._batch else 1

    def get_repeat_count(self) -> int:
        """How many times ``repeat`` repeats (-1: forever)."""
        return -1 if self._repeat is None else self._repeat

    def get_class_indexing(self) -> Dict[str, int]:
        """Class name → label (ImageFolder; ``{}`` for CIFAR)."""
        return dict(self._native_source.classes())

    def num_classes(self) -> Optional[int]:
        """Number of classes (ImageFolder: class folders read; CIFAR-10: 10; CIFAR-100: 100)."""
        if self._class_count is not None:
            return self._class_count
        return len(set(label for _, label in self._native_source.classes())) or None

    def _final_spec(self) -> Dict[str, Any]:
        spec = self._stages(self._ops)[-1][1]
        if spec["encoded"]:
            raise ValueError("the images are still encoded: map a vision.Decode() (or pass decode=True)")
        if spec["height"] is None or spec["width"] is None:
            raise ValueError(
                "the image size varies from sample to sample; imgfeed batches fixed sizes: end the image ops "
                "with CenterCrop, RandomCrop, RandomResizedCrop or Resize((h, w))"
            )
        return spec

    def output_shapes(self) -> List[List[int]]:
        """The shape of each column of the first row (``[batch, ...]`` once batched)."""
        spec = self._final_spec()
        h, w, c = spec["height"], spec["width"], spec["channels"]
        image = [c, h, w] if spec["layout"] == "chw" else [h, w, c]
        lead: List[int] = []
        if self._batch is not None:
            lead = [min(self._batch[0], self._samples())]
        return [lead + image] + [list(lead) for _ in self._label_columns]

    def output_types(self) -> List[Any]:
        """The numpy dtype of each column."""
        spec = self._final_spec()
        # numpy has no bfloat16: such images are their bits, uint16
        image = np.dtype("uint16") if spec["dtype"] == "bfloat16" else np.dtype(spec["dtype"])
        return [image] + [np.dtype(spec["label"]) for _ in self._label_columns]

    # --- running ---------------------------------------------------------------------
    def _pipeline_json(self) -> str:
        self._final_spec()  # encoded or varying sizes: the dataset's own words, before the engine's
        src = dict(self._source)
        src["seed"] = config._pipeline_seed()
        bs, drop = self._batch if self._batch is not None else (1, False)
        cfg = {
            "source": src,
            "ops": self._ops,
            "batch": {"size": bs, "drop_remainder": drop},
            "engine": {
                "workers": self._workers or config.get_num_parallel_workers(),
                "on_error": config.get_error_samples_mode().value,
            },
        }
        return json.dumps(cfg)

    def _build(self) -> Any:
        from .._pipeline import warn_about

        return warn_about(_imgfeed.Pipeline(self._pipeline_json(), self._native_source))

    def create_tuple_iterator(
        self,
        columns: Optional[Sequence[str]] = None,
        num_epochs: int = -1,
        output_numpy: bool = False,
        do_copy: bool = True,
    ) -> "TupleIterator":
        """An iterator of rows as lists, one item per column (``columns`` picks and orders
        them). Each pass over it is one epoch; ``num_epochs`` passes (-1: no limit).

        ``output_numpy=False`` yields ``mindspore.Tensor`` s: ``do_copy=True`` copies each
        column into a new tensor, ``do_copy=False`` shares the batch's memory
        (``Tensor.from_numpy``). The first row is the dataset's init step
        (:meth:`set_init_step`), or, for the iterator MindSpore's ``Model.train(...,
        initial_epoch=k)`` creates, the first batch of epoch ``k``."""
        it = TupleIterator(self, columns, num_epochs, output_numpy, do_copy, *_start(self))
        self._last_iterator = weakref.ref(it)
        return it

    def create_dict_iterator(
        self,
        num_epochs: int = -1,
        output_numpy: bool = False,
        do_copy: bool = True,
    ) -> "DictIterator":
        """An iterator of rows as ``{column: value}`` dicts (see :meth:`create_tuple_iterator`)."""
        it = DictIterator(self, None, num_epochs, output_numpy, do_copy, *_start(self))
        self._last_iterator = weakref.ref(it)
        return it

    def __iter__(self) -> Iterator[List[Any]]:
        return iter(self.create_tuple_iterator(num_epochs=1))

    # --- MindSpore's Model ------------------------------------------------------------
    def reset(self) -> None:
        """The end of an epoch (MindSpore's ``Model`` calls it after every training epoch
        and every evaluation). As in MindSpore, it changes nothing: the iterator the model
        reads carries on with the next epoch, reshuffled (engine epoch ``e`` uses the seed
        and ``e``, as ``imgfeed run --epochs N`` does)."""

    def set_init_step(self, init_step: int) -> None:
        """MindSpore's resume hook: iterators created after this call start at global step
        ``init_step`` (the batch ``init_step % get_dataset_size()`` of epoch
        ``init_step // get_dataset_size()``, reshuffled as that epoch), as if ``init_step``
        rows had been read; ``num_epochs`` still counts from epoch 0."""
        if isinstance(init_step, bool) or not isinstance(init_step, int) or init_step < 0:
            raise ValueError(f"set_init_step: init_step must be a non-negative int, not {init_step!r}")
        self._global_step = init_step
        self._job_state = None

    def state_dict(self) -> Dict[str, Any]:
        """Where training on this dataset stands (imgfeed's, not MindSpore's): the state of
        the last iterator created over it (the one ``Model.train`` reads; in a callback,
        ``run_context.original_args().train_dataset.state_dict()``) — the engine epoch, the
        global position all ranks reached together, the worlds that read it and a
        fingerprint of the dataset, pipeline and seed. Any rank's state resumes training on
        any ``num_shards`` (RANK_SIZE) with :meth:`load_state_dict`."""
        ref = getattr(self, "_last_iterator", None)
        it = ref() if ref is not None else None
        if it is not None:
            text = it.job_state()
        elif self._job_state is not None:
            text = self._job_state
        else:
            size = max(1, self._build().batches_per_epoch())
            epoch, batch = divmod(self._global_step, size)
            text = self._build().job_state(epoch, batch)
        return json.loads(text)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Iterators created after this call start where ``state`` (:meth:`state_dict`'s,
        from any rank of any number of ranks) says: the rest of its epoch split among this
        dataset's shards, then ordinary epochs. Pass ``initial_epoch`` = its epoch (the
        ``"epoch"`` field, counted as ``Model.train`` counts: engine epochs over
        ``repeat``) to ``Model.train``. ``ValueError`` for a state from another dataset,
        pipeline, seed or split. Replaces :meth:`set_init_step` (and the other way round)."""
        if not isinstance(state, dict):
            raise ValueError(f"not a dataset state: {state!r}")
        text = json.dumps(state)
        self._build().check_state(text)
        self._job_state = text
        self._global_step = 0

    def get_init_step(self) -> int:
        """The global step the next iterator starts at (0 unless :meth:`set_init_step`)."""
        return self._global_step

    def to_mindspore(self) -> Any:
        """This dataset as a ``mindspore.dataset.GeneratorDataset``, for MindSpore's
        dataset sink mode (``Model.train(..., dataset_sink_mode=True)``), which needs one of
        MindSpore's own datasets.

        One row is one of imgfeed's batches (already batched by the engine's native
        workers: the GeneratorDataset neither batches nor shuffles again, and reads in the
        calling process, ``python_multiprocessing=False``). Each complete pass is the next
        epoch, reshuffled as :meth:`create_tuple_iterator`'s; a pass left unfinished (such as
        MindSpore reading one row for the shapes) is read again from its start. Columns,
        sizes and ``get_dataset_size()`` are this dataset's.

        Resume: MindSpore's ``Model`` tells the GeneratorDataset nothing of ``initial_epoch``;
        call :meth:`set_init_step` with ``initial_epoch * get_dataset_size()`` before
        ``to_mindspore()`` and its first pass is epoch ``initial_epoch``.
        """
        from ._mindspore import generator_dataset

        return generator_dataset(self)

    def __len__(self) -> int:
        return self.get_dataset_size()

    _MINDSPORE_METHODS = frozenset(
        "add_sampler apply bucket_batch_by_length build_sentencepiece_vocab build_vocab concat "
        "filter flat_map padded_batch project rename save skip split sync_update "
        "sync_wait take zip".split()
    )
    #: What MindSpore's device queue (dataset sink mode on Ascend/GPU) reads or calls.
    _SINK_METHODS = frozenset("device_que to_device send input_indexs".split())

    def __add__(self, other: Any) -> Any:
        # MindSpore's `ds1 + ds2` is Dataset.concat
        raise NotImplementedError(
            "Dataset + Dataset is MindSpore's Dataset.concat, which imgfeed's engine does not support "
            "(one pipeline reads one dataset: put the images in one tree, or convert each and read them in turn)"
        )

    def __getattr__(self, name: str) -> Any:
        if name in Dataset._MINDSPORE_METHODS:
            raise NotImplementedError(f"Dataset.{name} is not supported by imgfeed's engine")
        if name in Dataset._SINK_METHODS:
            raise NotImplementedError(
                f"Dataset.{name}: MindSpore's dataset sink mode (a device queue) needs one of MindSpore's own "
                "datasets: pass dataset.to_mindspore() (a GeneratorDataset over imgfeed's batches) to "
                "Model.train(..., dataset_sink_mode=True)"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _repr_png_(self) -> Optional[bytes]:
        """Jupyter shows the first eight samples as the trainer gets them (``imgfeed.preview``)."""
        from .._preview import repr_png

        return repr_png(self)

    def __repr__(self) -> str:
        steps = [f"{self._call}({self._source.get('root')!r})"]
        if self._ops:
            steps.append("map(" + ", ".join(o["op"] for o in self._ops) + ")")
        if self._batch:
            steps.append(f"batch({self._batch[0]}, drop_remainder={self._batch[1]})")
        if self._repeat != 1:
            steps.append(f"repeat({self.get_repeat_count()})")
        return " -> ".join(steps)


def _model_initial_epoch(dataset: "Dataset") -> int:
    """``initial_epoch`` of the MindSpore ``Model.train`` / ``Model.fit`` that is creating an
    iterator over ``dataset`` as its training set now (0 when no training loop of MindSpore's
    ``Model`` is on the stack, or when it trains on another dataset: ``Model.fit``'s
    evaluation set is read from inside the training loop).

    MindSpore's ``Model`` tells a dataset nothing about ``initial_epoch``: its training loop
    (``Model._train_process``) creates the iterator with ``num_epochs=epoch`` and reads
    ``epoch - initial_epoch`` epochs from it, so MindSpore's own datasets restart at their
    epoch 0 on resume. imgfeed starts the iterator at epoch ``initial_epoch``, so a resumed
    run reads the batches the uninterrupted run would have read."""
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if code.co_name == "_train_process" and code.co_filename.replace("\\", "/").endswith("mindspore/train/model.py"):
            local = f.f_locals
            if "initial_epoch" not in local or "train_dataset" not in local:
                raise NotImplementedError(
                    "this MindSpore's Model._train_process has no initial_epoch or train_dataset: imgfeed cannot "
                    "tell which epoch Model.train starts at (it knows MindSpore 2.10's)"
                )
            return int(local["initial_epoch"]) if local["train_dataset"] is dataset else 0
        f = f.f_back
    return 0


def _start(dataset: Dataset) -> Tuple[int, Optional[str]]:
    """Where a new iterator starts: a global step, or a loaded job state."""
    state = getattr(dataset, "_job_state", None)
    if state is None:
        return _start_step(dataset), None
    epoch = _model_initial_epoch(dataset)
    engine_epoch = json.loads(state)["epoch"]
    repeat = dataset._repeat or 1
    if epoch != 0 and engine_epoch // repeat != epoch:
        raise NotImplementedError(
            f"Model.train(initial_epoch={epoch}) over a dataset whose loaded state is in epoch "
            f"{engine_epoch // repeat}: pass initial_epoch={engine_epoch // repeat}"
        )
    return 0, state


def _start_step(dataset: Dataset) -> int:
    """The global step (batches of ``dataset`` read before) a new iterator starts at."""
    step = dataset.get_init_step()
    epoch = _model_initial_epoch(dataset)
    if epoch == 0:
        return step
    size = dataset.get_dataset_size()
    if size < 0:
        raise NotImplementedError("Model.train(initial_epoch=...) over a dataset repeated forever (it has no epochs)")
    if step != 0 and step // size != epoch:
        raise NotImplementedError(
            f"Model.train(initial_epoch={epoch}) over a dataset whose set_init_step({step}) is in epoch "
            f"{step // size}: imgfeed cannot tell which to start at"
        )
    return step if step != 0 else epoch * size

