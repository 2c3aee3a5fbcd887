"""``imgfeed.Loader``: a PyTorch-shaped loader over a pipeline."""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from . import _imgfeed
from ._pipeline import PathLike, Pipeline, overrides_json, warn_about

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
        drop_last: ``drop_remainder`` (PyTorch's name).
        as_torch: yield ``torch.Tensor`` s sharing the batch memory (torch must be importable).
        **settings: :meth:`imgfeed.Pipeline.replace`'s settings (``batch_size``, ``workers``,
            ``shuffle``, ``seed``, ``num_shards``/``shard_id``, ``on_error``, ``usage``, ...;
            :func:`imgfeed.settings` lists them), applied and checked by the engine.

    Sharding: without ``num_shards``/``shard_id``, a process started by ``torchrun``
    (``WORLD_SIZE``/``RANK``) or ``msrun`` (``RANK_SIZE``/``RANK_ID``) reads its rank's
    shard (MindSpore's DistributedSampler: every rank gets ``ceil(N / world)`` samples).

    Epochs: every pass over the loader is one epoch; the epoch number seeds the shuffle and
    the random ops. :meth:`set_epoch` picks it; without it, each completed pass moves to the
    next epoch. :meth:`state_dict` / :meth:`load_state_dict` resume exactly mid-epoch, on
    any number of ranks: any rank's state, loaded by the ranks of a new world, splits what
    the epoch had left among them (README, "Resuming on another number of ranks").
    """

    def __init__(
        self,
        pipeline: Union[PathLike, Pipeline],
        data: Optional[PathLike] = None,
        *,
        drop_last: Optional[bool] = None,
        as_torch: bool = False,
        **settings: Any,
    ) -> None:
        given = dict(settings)
        for name, value in (("data", data), ("drop_remainder", drop_last)):
            if name in given:
                raise TypeError(f"Loader() got {name!r} twice")
            given[name] = value
        overrides = overrides_json(given, "Loader")
        # The one crossing: the tables (or the file's path) and the overrides, built there.
        if isinstance(pipeline, Pipeline):
            native = _imgfeed.Pipeline.with_overrides(pipeline.to_json(), None, overrides, _launched_distributed())
        else:
            native = _imgfeed.Pipeline.with_overrides(None, os.fspath(pipeline), overrides, _launched_distributed())
        self._native = warn_about(native)
        self._pipeline: Optional[Pipeline] = None
        self._torch: Any = None
        if as_torch:
            try:
                import torch  # noqa: F401
            except ImportError as e:
                raise ImportError("Loader(as_torch=True) needs torch, which is not importable") from e
            self._torch = torch
        self._epoch = 0
        # (epoch, job state JSON or None, batch, sample): where the next pass starts
        self._resume: Optional[Tuple[int, Optional[str], int, Optional[int]]] = None
        self._running: Optional[_imgfeed.Epoch] = None
        # the job state (JSON) when no pass runs; None: the start of `_epoch`
        self._state: Optional[str] = None
        #: ``on_error="skip"``: the ``SampleError`` s of the last pass's samples that no
        #: yielded batch reports (a last batch dropped by ``drop_last``, or left empty).
        self.tail_errors: List[BaseException] = []

    # --- sizes and facts -------------------------------------------------------------
    @property
    def pipeline(self) -> Pipeline:
        """The pipeline it runs: the tables with the settings applied (and a shard read from
        the launcher's variables filled in)."""
        if self._pipeline is None:
            self._pipeline = Pipeline._trusted(json.loads(self._native.config_json()))
        return self._pipeline

    def __len__(self) -> int:
        """Batches per epoch (this rank's shard)."""
        return self._native.batches_per_epoch()

    @property
    def batch_size(self) -> int:
        """Samples per batch."""
        return int(self.pipeline._config["batch"]["size"])

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
        self._state = None

    def state_dict(self) -> Dict[str, Any]:
        """Where the job stands: the epoch, the global position its ranks reached together,
        the worlds (ranks, batch size) that read it and a fingerprint of the dataset,
        pipeline and seed.

        Saved beside a checkpoint and given to :meth:`load_state_dict`, the next pass yields
        exactly the batches this one would have yielded next, with any worker count; any
        rank's state, loaded on another number of ranks, splits the rest of the epoch
        among them. A state from another dataset, pipeline or seed is refused.
        """
        if self._running is not None:
            text = self._running.job_state()
        elif self._state is not None:
            text = self._state
        else:
            text = self._native.job_state(self._epoch)
        return json.loads(text)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`'s value (from any rank, of any world) on the next
        pass. ``ValueError`` if it comes from another dataset, pipeline, seed or split."""
        if not isinstance(state, dict):
            raise ValueError(f"not a Loader state: {state!r}")
        if "worlds" in state or "version" in state:
            text = json.dumps(state)
            epoch = self._native.check_state(text)
            self._close()
            self._epoch = int(epoch)
            self._resume = (self._epoch, text, 0, None)
            self._state = text
            return
        # The per-rank format of earlier versions: {"epoch", "batch", "sample"}.
        try:
            epoch, batch = int(state["epoch"]), int(state["batch"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a Loader state: {state!r} (needs 'epoch' and 'batch')") from e
        sample = state.get("sample")
        if epoch < 0 or batch < 0:
            raise ValueError(f"not a Loader state: {state!r}")
        warnings.warn(
            "imgfeed: this Loader state has no world and no fingerprint (the per-rank format "
            "of imgfeed before job states): it is taken as this rank's own position under the "
            "same num_shards, batch size, dataset and seed, which cannot be checked; a "
            "state_dict() saved now resumes on any number of ranks and is checked",
            UserWarning,
            stacklevel=2,
        )
        self._close()
        self._epoch = epoch
        self._resume = (epoch, None, batch, None if sample is None else int(sample))
        self._state = self._native.job_state(epoch, batch, self._resume[3])

    # --- iteration -------------------------------------------------------------------
    def _close(self) -> None:
        if self._running is not None:
            self._running.close()
            self._running = None

    def _run(self) -> Iterator[_imgfeed.Batch]:
        """One pass: the current epoch from its start, or from the loaded state."""
        self._close()
        if self._resume is not None:
            epoch, text, batch, sample = self._resume
            self._resume = None
        else:
            epoch, text, batch, sample = self._epoch, None, 0, 0
        running = self._native.epoch(epoch, batch, sample, text)
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
                    self._state = None
                else:
                    self._state = running.job_state()

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

    def _repr_png_(self) -> Optional[bytes]:
        """Jupyter shows the first eight samples as the trainer gets them (``imgfeed.preview``)."""
        from ._preview import repr_png

        return repr_png(self)

    def __repr__(self) -> str:
        return f"Loader({self.pipeline!r}, {len(self)} batches/epoch, epoch {self._epoch})"
