"""``imgfeed.Loader``: a PyTorch-shaped loader over a pipeline."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from . import _imgfeed, _torch_names
from ._pipeline import Pipeline, PathLike

__all__ = ["Loader"]

_LAUNCHER_VARS = (("WORLD_SIZE", "RANK"), ("RANK_SIZE", "RANK_ID"))


def _launched_distributed() -> bool:
    """True when torchrun (``WORLD_SIZE``/``RANK``) or msrun (``RANK_SIZE``/``RANK_ID``)
    started this process."""
    return any(size in os.environ or rank in os.environ for size, rank in _LAUNCHER_VARS)


class Loader:
    """Batches of a pipeline for a training loop, shaped like ``torch.utils.data.DataLoader``::

        loader = imgfeed.Loader("pipelines/resnet50_train.toml", data="/data/imagenet/train",
                                batch_size=256, workers=8)
        for epoch in range(90):
            loader.set_epoch(epoch)
            for images, labels in loader:      # numpy arrays (torch tensors with as_torch=True)
                ...

    ``images`` and ``labels`` view the engine's batch buffer (no copy); the buffer is reused
    once every array viewing it is released. The GIL is released while the engine works and
    while the loop waits for a batch.

    Args:
        pipeline: a pipeline file or an :class:`imgfeed.Pipeline`.
        data: the dataset root (the file's ``root`` otherwise).
        batch_size, drop_last, workers, shuffle, seed, num_shards, shard_id, on_error, usage:
            override the pipeline's settings (``drop_last`` is ``drop_remainder``).
        as_torch: yield ``torch.Tensor`` s sharing the batch memory (torch must be importable).

    Sharding: without ``num_shards``/``shard_id``, a process started by ``torchrun``
    (``WORLD_SIZE``/``RANK``) or ``msrun`` (``RANK_SIZE``/``RANK_ID``) reads its rank's
    shard (MindSpore's DistributedSampler: every rank gets ``ceil(N / world)`` samples).

    Epochs: every pass over the loader is one epoch; the epoch number seeds the shuffle and
    the random ops. :meth:`set_epoch` picks it; without it, each completed pass moves to the
    next epoch. :meth:`state_dict` / :meth:`load_state_dict` resume exactly mid-epoch.
    """

    def __init__(
        self,
        pipeline: Union[PathLike, Pipeline],
        data: Optional[PathLike] = None,
        *,
        batch_size: Optional[int] = None,
        drop_last: Optional[bool] = None,
        workers: Optional[int] = None,
        shuffle: Optional[bool] = None,
        seed: Optional[int] = None,
        num_shards: Optional[int] = None,
        shard_id: Optional[int] = None,
        on_error: Optional[str] = None,
        usage: Optional[str] = None,
        as_torch: bool = False,
        **unknown: Any,
    ) -> None:
        _torch_names.refuse("Loader()", unknown)
        p = pipeline if isinstance(pipeline, Pipeline) else Pipeline.from_file(pipeline)
        p = p.replace(
            data=data,
            batch_size=batch_size,
            drop_remainder=drop_last,
            workers=workers,
            shuffle=shuffle,
            seed=seed,
            num_shards=num_shards,
            shard_id=shard_id,
            on_error=on_error,
            usage=usage,
        )
        config = p.config
        src = config["source"]
        if num_shards is None and src.get("shard", "config") == "config" and src.get("num_shards", 1) == 1:
            if _launched_distributed():
                src["shard"] = "env"
                p = Pipeline.from_config(config)
        self._torch: Any = None
        if as_torch:
            try:
                import torch  # noqa: F401
            except ImportError as e:
                raise ImportError("Loader(as_torch=True) needs torch, which is not importable") from e
            self._torch = torch
        self.pipeline: Pipeline = p
        self._native = p.build()
        self._epoch = 0
        self._resume: Optional[Tuple[int, int, Optional[int]]] = None
        self._running: Optional[_imgfeed.Epoch] = None
        self._state: Tuple[int, int, Optional[int]] = (0, 0, 0)
        #: ``on_error="skip"``: the ``SampleError`` s of the last pass's samples that no
        #: yielded batch reports (a last batch dropped by ``drop_last``, or left empty).
        self.tail_errors: List[BaseException] = []

    # --- sizes and facts -------------------------------------------------------------
    def __len__(self) -> int:
        """Batches per epoch (this rank's shard)."""
        return self._native.batches_per_epoch()

    @property
    def batch_size(self) -> int:
        """Samples per batch."""
        return int(self.pipeline.config["batch"]["size"])

    @property
    def num_samples(self) -> int:
        """Samples per epoch (this rank's shard)."""
        return self._native.samples_per_epoch()

    @property
    def classes(self) -> Dict[str, int]:
        """Class name → label, for sources that name their classes (ImageFolder, shards)."""
        return dict(self._native.classes())

    @property
    def output_spec(self) -> Dict[str, Any]:
        """What one output sample looks like (shape, dtype, label type)."""
        return self._native.output_spec()

    @property
    def fusions(self) -> List[str]:
        """The fusions the engine applies, in words."""
        return self._native.fusions()

    # --- epochs and resume -----------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """The epoch the next pass runs (seeds the shuffle and the random ops). After
        :meth:`load_state_dict`, setting the loaded epoch keeps the loaded position."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, not {epoch}")
        self._close()
        self._epoch = int(epoch)
        if self._resume is not None and self._resume[0] == self._epoch:
            return  # resuming this very epoch: keep the loaded position
        self._resume = None
        self._state = (self._epoch, 0, 0)

    def state_dict(self) -> Dict[str, Any]:
        """Where the loader stands: the epoch and the next batch it would yield.

        Saved beside a checkpoint and given to :meth:`load_state_dict`, the next pass yields
        exactly the batches this one would have yielded next, with any worker count.
        """
        if self._running is not None:
            epoch, batch, sample = self._running.state()
        else:
            epoch, batch, sample = self._state
        return {"epoch": int(epoch), "batch": int(batch), "sample": sample}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`'s value on the next pass."""
        try:
            epoch, batch = int(state["epoch"]), int(state["batch"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a Loader state: {state!r} (needs 'epoch' and 'batch')") from e
        sample = state.get("sample")
        if epoch < 0 or batch < 0:
            raise ValueError(f"not a Loader state: {state!r}")
        self._close()
        self._epoch = epoch
        self._resume = (epoch, batch, None if sample is None else int(sample))
        self._state = self._resume

    # --- iteration -------------------------------------------------------------------
    def _close(self) -> None:
        if self._running is not None:
            self._running.close()
            self._running = None

    def _run(self) -> Iterator[_imgfeed.Batch]:
        """One pass: the current epoch from its start, or from the loaded state."""
        self._close()
        if self._resume is not None:
            epoch, batch, sample = self._resume
            self._resume = None
        else:
            epoch, batch, sample = self._epoch, 0, 0
        running = self._native.epoch(epoch, batch, sample)
        self._running = running
        self.tail_errors = []
        completed = False
        try:
            for b in running:
                yield b
                if self._running is not running:
                    raise RuntimeError(
                        "another pass over this Loader started while this one was unfinished: "
                        "a Loader runs one pass at a time (make a second Loader to read two at once)"
                    )
            completed = True
        finally:
            if self._running is running:
                self._running = None
                running.close()
                self.tail_errors = running.dropped_tail_errors()
                if completed:
                    # The whole epoch was read: the next pass is the next epoch.
                    self._epoch = epoch + 1
                    self._state = (epoch + 1, 0, 0)
                else:
                    self._state = running.state()

    def __iter__(self) -> Iterator[Tuple[Any, Any]]:
        torch = self._torch
        if torch is None:
            for b in self._run():
                yield b.images, b.labels
        else:
            bf16 = self._native.output_spec()["dtype"] == "bfloat16"
            for b in self._run():
                images = torch.from_numpy(b.images)
                # numpy has no bfloat16: the batch holds its bits as uint16
                yield (images.view(torch.bfloat16) if bf16 else images), torch.from_numpy(b.labels)

    def batches(self) -> Iterator[_imgfeed.Batch]:
        """Like iterating the loader, but yields whole batch objects: ``images``, ``labels``,
        ``indices`` (each sample's index in the source), ``number`` and ``skipped`` (the
        ``SampleError`` of every sample left out or replaced)."""
        return self._run()

    def __repr__(self) -> str:
        return f"Loader({self.pipeline!r}, {len(self)} batches/epoch, epoch {self._epoch})"
