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

The package: ``_read`` (the datasource, :func:`read`, :func:`batches`), ``_convert``
(:func:`convert`); :func:`uint8_pipeline` and :func:`uint8_affine` are ``imgfeed._uint8``'s.
"""

from __future__ import annotations

try:
    import ray  # noqa: F401
    import ray.data  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without Ray
    raise ImportError("imgfeed.ray needs Ray Data, which is not importable here: pip install 'ray[data]'") from e

from .._uint8 import uint8_affine, uint8_pipeline
from ._convert import convert
from ._read import ImgfeedDatasource, batches, read, state

__all__ = ["ImgfeedDatasource", "batches", "convert", "read", "state", "uint8_affine", "uint8_pipeline"]
