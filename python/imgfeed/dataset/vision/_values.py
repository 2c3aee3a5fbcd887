"""The ops that change pixel values or their layout: ``Normalize``, ``Rescale``,
``HWC2CHW``."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from .._op import Op, unsupported


def _channels(name: str, what: str, values: Sequence[float]) -> List[float]:
    try:
        out = [float(v) for v in values]
    except TypeError:
        raise TypeError(f"{name}: {what} must be a sequence of numbers, not {values!r}") from None
    if len(out) not in (1, 3):
        raise ValueError(f"{name}: {what} needs 1 or 3 values, got {len(out)}")
    return out * 3 if len(out) == 1 else out


class Normalize(Op):
    """``(x - mean) / std`` per channel, in 0–255 units as MindSpore takes them (output
    ``float32``)."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], is_hwc: bool = True) -> None:
        if not is_hwc:
            unsupported("Normalize", "is_hwc=False: normalize HWC images, then HWC2CHW")
        self.mean = _channels("Normalize", "mean", mean)
        self.std = _channels("Normalize", "std", std)
        if any(s == 0 for s in self.std):
            raise ValueError("Normalize: std must be non-zero")

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": "normalize", "mean": self.mean, "std": self.std}]


class HWC2CHW(Op):
    """Interleaved ``[h, w, c]`` to planar ``[c, h, w]``."""

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": "hwc_to_chw"}]


class Rescale(Op):
    """``x * rescale + shift`` (output ``float32``)."""

    def __init__(self, rescale: float, shift: float) -> None:
        self.rescale = float(rescale)
        self.shift = float(shift)

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": "rescale", "rescale": self.rescale, "shift": self.shift}]
