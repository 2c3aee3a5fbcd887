"""The iterators over a dataset's rows: ``create_tuple_iterator`` and
``create_dict_iterator``, epoch after epoch, as numpy arrays viewing the engine's batches or
as ``mindspore.Tensor`` s."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    from ._dataset import Dataset


class TupleIterator:
    """Rows of a dataset, epoch after epoch: each ``for`` loop over it is one epoch (as
    MindSpore's iterators). Ends for good after ``num_epochs`` epochs (-1: never). After
    an error (a bad sample, Ctrl-C) it raises ``RuntimeError``: create a new one."""

    _as_dict = False

    def __init__(
        self,
        dataset: Dataset,
        columns: Optional[Sequence[str]],
        num_epochs: int,
        output_numpy: bool,
        do_copy: bool = True,
        start_step: int = 0,
        start_state: Optional[str] = None,
    ) -> None:
        if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or (num_epochs < 1 and num_epochs != -1):
            raise ValueError(f"num_epochs must be a positive int or -1, not {num_epochs!r}")
        names = dataset.get_col_names()
        if columns is None:
            picked = list(range(len(names)))
        else:
            cols = [columns] if isinstance(columns, str) else list(columns)
            for c in cols:
                if c not in names:
                    raise ValueError(f"columns: {c!r} is not one of {names}")
            picked = [names.index(c) for c in cols]
        self._names = [names[i] for i in picked]
        self._picked = picked
        self._convert: Any = None
        if not output_numpy:
            try:
                import mindspore  # type: ignore[import-not-found]
            except ImportError:
                raise ValueError(
                    "output_numpy=False yields mindspore.Tensor, but mindspore is not installed: pass output_numpy=True"
                ) from None
            from_numpy = mindspore.Tensor.from_numpy
            if do_copy:
                self._convert = lambda a: from_numpy(np.array(a, copy=True))
            else:
                self._convert = lambda a: from_numpy(np.ascontiguousarray(a))
        self._native = dataset._build()
        # Each repetition is an engine epoch; none runs after the last: nothing is kept in
        # the cache for one. Said every time (endless: no last), as the dataset's source,
        # and what an earlier iterator said of it, may be shared.
        if num_epochs != -1 and dataset._repeat is not None:
            self._native.last_epoch(num_epochs * dataset._repeat - 1)
        else:
            self._native.last_epoch(2**64 - 1)
        self._batched = dataset._batch is not None
        self._repeat = dataset._repeat
        self._epochs_left = num_epochs
        self._engine_epoch = 0
        self._repeats_done = 0
        self._running: Any = None
        self._failed: Optional[BaseException] = None
        per_engine_epoch = self._native.batches_per_epoch()
        self._empty = per_engine_epoch == 0
        self._start_batch = 0
        self._start_state: Optional[str] = None
        if start_state is not None and not self._empty:
            # A job state (Dataset.load_state_dict): its engine epoch, resumed on this world.
            self._start_state = start_state
            self._engine_epoch = int(json.loads(start_state)["epoch"])
            if self._repeat is not None:
                epoch, self._repeats_done = divmod(self._engine_epoch, self._repeat)
                if num_epochs != -1:
                    self._epochs_left = max(0, num_epochs - epoch)
        elif start_step and not self._empty:
            # Global step -> (dataset epoch, repetition, batch): each repetition is an engine epoch.
            if self._repeat is None:
                self._engine_epoch, self._start_batch = divmod(start_step, per_engine_epoch)
            else:
                epoch, step = divmod(start_step, per_engine_epoch * self._repeat)
                self._repeats_done, self._start_batch = divmod(step, per_engine_epoch)
                self._engine_epoch = epoch * self._repeat + self._repeats_done
                if num_epochs != -1:
                    self._epochs_left = max(0, num_epochs - epoch)

    def __iter__(self) -> "TupleIterator":
        return self

    def _row(self, b: Any) -> Any:
        images, labels = b.images, b.labels
        if labels.ndim == 2:
            cols = [images] + [labels[:, k] for k in range(labels.shape[1])]
        else:
            cols = [images, labels]
        if not self._batched:
            cols = [c[0, ...] for c in cols]
        out = [cols[i] for i in self._picked]
        if self._convert is not None:
            out = [self._convert(c) for c in out]
        if self._as_dict:
            return dict(zip(self._names, out))
        return out

    def __next__(self) -> Any:
        if self._failed is not None:
            raise RuntimeError(f"this iterator stopped on an error ({self._failed!r}): create a new one") from self._failed
        while True:
            if self._running is None:
                if self._epochs_left == 0:
                    raise StopIteration
                if self._start_state is not None:
                    self._running = self._native.epoch(self._engine_epoch, 0, None, self._start_state)
                    self._start_state = None
                elif self._start_batch:
                    self._running = self._native.epoch(self._engine_epoch, self._start_batch, None)
                    self._start_batch = 0
                else:
                    self._running = self._native.epoch(self._engine_epoch)
                self._engine_epoch += 1
            try:
                b = next(self._running, None)
            except BaseException as e:
                # A bad sample or Ctrl-C: the engine's epoch is closed, and carrying on would
                # count the rest of it as read.
                self._failed = e
                self._running = None
                raise
            if b is not None:
                return self._row(b)
            self._running = None
            self._repeats_done += 1
            if self._empty or (self._repeat is not None and self._repeats_done >= self._repeat):
                # One epoch of the (repeated) dataset is done: this pass ends here; the next
                # pass starts the next epoch.
                self._repeats_done = 0
                if self._epochs_left > 0:
                    self._epochs_left -= 1
                raise StopIteration

    def job_state(self) -> str:
        """Where this iterator stands, as a job state (JSON): the engine epoch in flight
        and the batch it yields next, else the start of the next engine epoch."""
        if self._running is not None:
            return self._running.job_state()
        if self._start_state is not None:
            return self._start_state
        return self._native.job_state(self._engine_epoch, self._start_batch)

    def stop(self) -> None:
        """Stop the engine's workers now (also done when the iterator is released)."""
        if self._running is not None:
            self._running.close()
            self._running = None
        self._epochs_left = 0

    def get_col_names(self) -> List[str]:
        """The columns of each row."""
        return list(self._names)


class DictIterator(TupleIterator):
    """Rows as ``{column: value}`` dicts (see :class:`TupleIterator`)."""

    _as_dict = True

