"""The bridge to MindSpore's own datasets: ``imgfeed.dataset.Dataset.to_mindspore()``.

MindSpore's dataset sink mode (``Model.train(..., dataset_sink_mode=True)`` on Ascend or
GPU) sends a dataset through a device queue that only MindSpore's own datasets have. The
bridge is a ``mindspore.dataset.GeneratorDataset`` whose source yields imgfeed's batches,
one batch a row: the engine's native workers decode, augment and batch; MindSpore only
moves the rows (no second batching, no shuffle, no Python worker processes).
"""

from __future__ import annotations

import json

from typing import TYPE_CHECKING, Any, Iterator, List

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from ._dataset import Dataset


class BatchSource:
    """The GeneratorDataset's source: ``len()`` is the batches of one epoch (the dataset's
    ``get_dataset_size()``) and each pass yields one epoch's rows. A complete pass moves to
    the next epoch (engine epoch ``e`` is seeded with the seed and ``e``, so the rows equal
    ``create_tuple_iterator``'s, epoch after epoch); a pass left unfinished, such as MindSpore
    reading a first row for the shapes, leaves the epoch where it was."""

    def __init__(self, dataset: "Dataset") -> None:
        if dataset._repeat is None:
            raise NotImplementedError(
                "to_mindspore: a dataset repeated forever has no epoch for the GeneratorDataset to read: "
                "repeat it a finite number of times, or not at all (Model.train runs the epochs)"
            )
        self._native = dataset._build()
        self._repeat: int = dataset._repeat
        self._per_repeat = self._native.batches_per_epoch()
        self._batched = dataset._batch is not None
        self.column_names: List[str] = dataset.get_col_names()
        #: The epoch the next pass reads: the dataset's init step's (set_init_step), which
        #: must be an epoch's start, as in MindSpore's sink mode.
        self.epoch = 0
        step = dataset.get_init_step()
        if step:
            size = len(self)
            if size == 0 or step % size:
                raise NotImplementedError(
                    f"to_mindspore: set_init_step({step}) is inside an epoch of {size} batches: the bridge starts "
                    "at an epoch's first batch (as MindSpore's sink mode does)"
                )
            self.epoch = step // size
        loaded = getattr(dataset, "_job_state", None)
        if loaded is not None:
            state = json.loads(loaded)
            if state["position"] != 0 or state["epoch"] % self._repeat:
                raise NotImplementedError(
                    "to_mindspore: the loaded state (load_state_dict) is inside an epoch: sink mode reads whole "
                    "epochs of get_dataset_size() steps, so train the rest of that epoch without sink mode "
                    "(Model.train(..., dataset_sink_mode=False)) and save the state again at its end"
                )
            self.epoch = state["epoch"] // self._repeat

    def __len__(self) -> int:
        return self._per_repeat * self._repeat

    def _row(self, b: Any) -> tuple:
        images, labels = b.images, b.labels
        if labels.ndim == 2:
            cols = [images] + [np.ascontiguousarray(labels[:, k]) for k in range(labels.shape[1])]
        else:
            cols = [images, labels]
        if not self._batched:
            cols = [c[0, ...] for c in cols]
        return tuple(cols)

    def __iter__(self) -> Iterator[tuple]:
        epoch = self.epoch
        for r in range(self._repeat):
            running = self._native.epoch(epoch * self._repeat + r)
            try:
                for b in running:
                    yield self._row(b)
            finally:
                running.close()
        if self.epoch == epoch:
            self.epoch = epoch + 1


def generator_dataset(dataset: "Dataset") -> Any:
    """``mindspore.dataset.GeneratorDataset`` over ``dataset``'s batches (see
    :meth:`imgfeed.dataset.Dataset.to_mindspore`)."""
    try:
        import mindspore.dataset as msds  # type: ignore[import-not-found]
    except ImportError:
        raise ImportError("to_mindspore() makes a mindspore.dataset.GeneratorDataset: mindspore is not importable") from None
    source = BatchSource(dataset)
    return msds.GeneratorDataset(
        source,
        column_names=source.column_names,
        shuffle=False,
        num_parallel_workers=1,
        python_multiprocessing=False,
    )
