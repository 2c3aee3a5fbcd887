"""The engine's ops that the MindSpore-shaped layer does not expose, each with the reason.

Every op of the native engine (``_imgfeed.op_names()``, ``_imgfeed.batch_op_names()``) is
either made by an op class of :mod:`imgfeed.dataset.vision` / ``.transforms`` or listed
here; ``tests/test_dataset.py`` checks it, so a new engine op cannot go unnoticed.
"""

from __future__ import annotations

from typing import Dict

_BATCH_OP = (
    "a batch op: MindSpore applies its counterpart with map after batch (OneHot, "
    "MixUpBatch, CutMixBatch), which this layer refuses; write it as a [[batch_ops]] table "
    "of a pipeline file and use imgfeed.Pipeline.from_file / imgfeed.Loader"
)

NOT_EXPOSED: Dict[str, str] = {
    "one_hot": _BATCH_OP,
    "mixup": _BATCH_OP,
    "cutmix": _BATCH_OP,
    "mixup_cutmix": _BATCH_OP,
}
