"""A pipeline whose images stay uint8: its ``normalize`` / ``rescale`` ops taken out, to be
applied by the consumer (``imgfeed.ray.read(uint8=True)``: 4× fewer bytes travel than as
float32). Needs no Ray: the names it checks are the engine's ops (a test compares them with
the native op list)."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

import numpy as np

from ._pipeline import Pipeline

__all__ = ["uint8_affine", "uint8_pipeline"]

#: Ops that change an image's values into floats: ``uint8=True`` leaves them to the consumer.
_VALUE_OPS = ("normalize", "rescale")
#: Ops that may follow them when ``uint8=True`` drops them: they move or cast bytes, so they
#: do the same on the uint8 image (``type_cast`` only of the label).
_LAYOUT_OPS = ("hwc_to_chw",)


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
