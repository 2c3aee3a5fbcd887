"""imgfeed: image datasets to training batches, from a native multi-threaded engine.

Three ways in:

* :class:`imgfeed.Loader` — a PyTorch-shaped loader over a pipeline file or an
  :class:`imgfeed.Pipeline` built in Python;
* :mod:`imgfeed.dataset` — MindSpore's dataset API (``ImageFolderDataset``, ``map``,
  ``batch``, ``create_tuple_iterator``, ...): a MindSpore ``create_dataset`` runs by changing
  its imports;
* :class:`imgfeed.Pipeline` — the pipeline description itself;
* :mod:`imgfeed.ray` (imported on its own, needs ``ray[data]``) — an epoch as a Ray Data
  dataset read by tasks over a cluster, and conversions split into Ray tasks.

:func:`imgfeed.preview` shows what a pipeline makes (a PIL image of its first samples, as
the trainer gets them); loaders, pipelines and datasets show it themselves in Jupyter.

Batches are numpy arrays viewing the engine's buffers (no copy); a bad sample raises
:class:`imgfeed.SampleError`.
"""

from __future__ import annotations

from . import dtype
from ._errors import SampleError
from ._imgfeed import Batch, __version__
from ._loader import Loader
from ._pipeline import Pipeline, settings
from ._preview import preview

__all__ = ["Batch", "Loader", "Pipeline", "SampleError", "dtype", "preview", "settings", "__version__"]
