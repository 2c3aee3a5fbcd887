"""The random colour ops: ``RandomColorAdjust`` and ``RandomErasing``."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Union

from .._op import Op, pair, unsupported


def _jitter(name: str, what: str, value: Union[float, Sequence[float]]) -> Union[float, List[float]]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{name}: {what} must be non-negative, not {value}")
        return float(value)
    return list(pair(name, what, value))


class RandomColorAdjust(Op):
    """Jitter brightness, contrast, saturation and hue by factors drawn per sample, applied
    in a random order (torchvision's ``ColorJitter``; each adjustment is Pillow's, as
    torchvision applies it to a PIL image). A number ``x`` is the range ``[max(0, 1 - x),
    1 + x]`` (hue: ``[-x, x]``); a ``(min, max)`` pair is the range; the defaults change
    nothing."""

    def __init__(
        self,
        brightness: Union[float, Sequence[float]] = (1, 1),
        contrast: Union[float, Sequence[float]] = (1, 1),
        saturation: Union[float, Sequence[float]] = (1, 1),
        hue: Union[float, Sequence[float]] = (0, 0),
    ) -> None:
        name = "RandomColorAdjust"
        self._table = {
            "op": "random_color_adjust",
            "brightness": _jitter(name, "brightness", brightness),
            "contrast": _jitter(name, "contrast", contrast),
            "saturation": _jitter(name, "saturation", saturation),
            "hue": _jitter(name, "hue", hue),
        }

    def _tables(self) -> List[Dict[str, Any]]:
        return [dict(self._table)]


class RandomErasing(Op):
    """Erase a random box with probability ``prob`` (torchvision's algorithm: 10 attempts at
    an area in ``scale`` and a log-uniform aspect ratio in ``ratio``); ``value`` is a number,
    one per channel, or ``"random"`` (standard normal values). Put it after ``Normalize``, as
    torchvision applies it to the normalized tensor."""

    def __init__(
        self,
        prob: float = 0.5,
        scale: Sequence[float] = (0.02, 0.33),
        ratio: Sequence[float] = (0.3, 3.3),
        value: Union[float, Sequence[float], str] = 0,
        inplace: bool = False,
        max_attempts: int = 10,
    ) -> None:
        if max_attempts != 10:
            unsupported("RandomErasing", "max_attempts other than 10 (torchvision's)")
        if isinstance(value, str):
            if value != "random":
                raise ValueError(f"RandomErasing: value must be a number, 3 numbers or 'random', not {value!r}")
            v: Any = "random"
        elif isinstance(value, (int, float)):
            v = float(value)
        else:
            v = [float(x) for x in value]
            if len(v) != 3:
                raise ValueError(f"RandomErasing: value must be a number, 3 numbers or 'random', not {value!r}")
        self._table = {"op": "random_erasing", "prob": float(prob), "scale": list(pair("RandomErasing", "scale", scale)),
                       "ratio": list(pair("RandomErasing", "ratio", ratio)), "value": v}

    def _tables(self) -> List[Dict[str, Any]]:
        return [dict(self._table)]
