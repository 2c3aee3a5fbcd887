"""The learned and random augmentation policies: ``AutoAugment``, ``RandAugment``,
``TrivialAugmentWide``."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

from .._op import Op, unsupported
from ._modes import AutoAugmentPolicy, Inter


def _aug_fill(name: str, interpolation: Inter, fill_value: Union[int, Sequence[int]]) -> Any:
    if interpolation != Inter.NEAREST:
        unsupported(name, f"interpolation={interpolation}: the engine's augmentations use NEAREST (torchvision's default)")
    if isinstance(fill_value, int):
        fills = [fill_value]
    else:
        fills = [int(v) for v in fill_value]
    if len(fills) not in (1, 3) or not all(0 <= v <= 255 for v in fills):
        raise ValueError(f"{name}: fill_value must be 0..255 or three of them, not {fill_value!r}")
    return fills[0] if len(fills) == 1 else fills


class AutoAugment(Op):
    """One of the learned AutoAugment policies; each operation computed as torchvision computes
    it on a PIL image (Pillow's arithmetic, every pixel equal to torchvision's)."""

    def __init__(self, policy: AutoAugmentPolicy = AutoAugmentPolicy.IMAGENET, interpolation: Optional[Inter] = None,
                 fill_value: Union[int, Sequence[int]] = 0) -> None:
        if not isinstance(policy, AutoAugmentPolicy):
            raise TypeError(f"AutoAugment: policy must be an AutoAugmentPolicy, not {policy!r}")
        fill = _aug_fill("AutoAugment", interpolation or Inter.NEAREST, fill_value)
        self._table = {"op": "auto_augment", "policy": policy.value, "fill": fill}

    def _tables(self) -> List[Dict[str, Any]]:
        return [dict(self._table)]


class RandAugment(Op):
    """RandAugment: ``num_ops`` operations drawn per sample, at magnitude bin ``magnitude`` of
    ``num_magnitude_bins`` (torchvision's operation set and tables)."""

    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation: Optional[Inter] = None, fill_value: Union[int, Sequence[int]] = 0) -> None:
        if not 0 <= magnitude < num_magnitude_bins:
            raise ValueError(f"RandAugment: magnitude must be in [0, {num_magnitude_bins}), not {magnitude}")
        fill = _aug_fill("RandAugment", interpolation or Inter.NEAREST, fill_value)
        self._table = {"op": "rand_augment", "num_ops": int(num_ops), "magnitude": int(magnitude),
                       "num_magnitude_bins": int(num_magnitude_bins), "fill": fill}

    def _tables(self) -> List[Dict[str, Any]]:
        return [dict(self._table)]


class TrivialAugmentWide(Op):
    """TrivialAugmentWide: one operation and one magnitude bin drawn per sample
    (torchvision's wide tables)."""

    def __init__(self, num_magnitude_bins: int = 31, interpolation: Optional[Inter] = None,
                 fill_value: Union[int, Sequence[int]] = 0) -> None:
        fill = _aug_fill("TrivialAugmentWide", interpolation or Inter.NEAREST, fill_value)
        self._table = {"op": "trivial_augment_wide", "num_magnitude_bins": int(num_magnitude_bins), "fill": fill}

    def _tables(self) -> List[Dict[str, Any]]:
        return [dict(self._table)]
