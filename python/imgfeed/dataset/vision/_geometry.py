"""The ops that move pixels: resizing, cropping, padding and flipping."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .._op import Op, pair, size_value, unsupported
from ._modes import Border, Inter, _filter


class Resize(Op):
    """Resize: an int is the shorter side (the longer one ``int(size * long / short)``), a
    ``(height, width)`` pair the exact size."""

    def __init__(self, size: Union[int, Sequence[int]], interpolation: Inter = Inter.LINEAR) -> None:
        self.size = size_value("Resize", size)
        self.interpolation = interpolation
        self._filter = _filter("Resize", interpolation)

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": "resize", "size": self.size, "filter": self._filter}]


class CenterCrop(Op):
    """Crop the centre (offsets rounded as torchvision rounds them; zero padding when the
    image is smaller)."""

    def __init__(self, size: Union[int, Sequence[int]]) -> None:
        self.size = size_value("CenterCrop", size)

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": "center_crop", "size": self.size}]


class RandomCrop(Op):
    """Crop at a random place after optional padding (drawn from the seed, the epoch and
    the sample, so the same for any worker count)."""

    def __init__(
        self,
        size: Union[int, Sequence[int]],
        padding: Optional[Union[int, Sequence[int]]] = None,
        pad_if_needed: bool = False,
        fill_value: Union[int, Tuple[int, int, int]] = 0,
        padding_mode: Border = Border.CONSTANT,
    ) -> None:
        self.size = size_value("RandomCrop", size)
        if padding is None:
            pad = 0
        elif isinstance(padding, int):
            pad = padding
        else:
            values = [int(v) for v in padding]
            if len(values) not in (1, 2, 4) or len(set(values)) != 1:
                unsupported("RandomCrop", f"padding={padding!r}: the engine pads every side by the same amount")
            pad = values[0]
        if pad < 0:
            raise ValueError(f"RandomCrop: padding must be >= 0, not {padding!r}")
        if pad_if_needed:
            unsupported("RandomCrop", "pad_if_needed=True is not supported")
        if not isinstance(padding_mode, Border):
            raise TypeError(f"RandomCrop: padding_mode must be a Border, not {padding_mode!r}")
        self.padding_mode = padding_mode
        fills = [fill_value] * 3 if isinstance(fill_value, int) else [int(v) for v in fill_value]
        if len(fills) != 3 or len(set(fills)) != 1 or not 0 <= fills[0] <= 255:
            unsupported("RandomCrop", f"fill_value={fill_value!r}: the engine fills every channel with one value in 0..255")
        self.padding = pad
        self.fill_value = fills[0]

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": "random_crop", "size": self.size, "padding": self.padding, "fill": self.fill_value,
                 "padding_mode": self.padding_mode.value}]


class Pad(Op):
    """Add pixels around the image: ``padding`` is one number, ``(left/right, top/bottom)``
    or ``(left, top, right, bottom)``; the new pixels are ``fill_value`` or, by
    ``padding_mode``, copied from the image."""

    def __init__(
        self,
        padding: Union[int, Sequence[int]],
        fill_value: int = 0,
        padding_mode: Border = Border.CONSTANT,
    ) -> None:
        if isinstance(padding, int):
            sides = [padding] * 4
        else:
            values = [int(v) for v in padding]
            if len(values) == 2:
                sides = [values[0], values[1], values[0], values[1]]
            elif len(values) == 4:
                sides = values
            else:
                raise ValueError(f"Pad: padding must be an int or 2 or 4 ints, not {padding!r}")
        if min(sides) < 0:
            raise ValueError(f"Pad: padding must be >= 0, not {padding!r}")
        if not isinstance(fill_value, int) or not 0 <= fill_value <= 255:
            unsupported("Pad", f"fill_value={fill_value!r}: the engine fills every channel with one value in 0..255")
        if not isinstance(padding_mode, Border):
            raise TypeError(f"Pad: padding_mode must be a Border, not {padding_mode!r}")
        self._table = {"op": "pad", "padding": sides, "fill": fill_value, "padding_mode": padding_mode.value}

    def _tables(self) -> List[Dict[str, Any]]:
        return [dict(self._table)]


class RandomHorizontalFlip(Op):
    """Mirror left-right with probability ``prob``."""

    _name, _op = "RandomHorizontalFlip", "random_horizontal_flip"

    def __init__(self, prob: float = 0.5) -> None:
        if not 0.0 <= prob <= 1.0:
            raise ValueError(f"{self._name}: prob must be in [0, 1], not {prob}")
        self.prob = float(prob)

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": self._op, "prob": self.prob}]


class RandomVerticalFlip(RandomHorizontalFlip):
    """Mirror top-bottom with probability ``prob``."""

    _name, _op = "RandomVerticalFlip", "random_vertical_flip"


def _rrc_table(name: str, size: Any, scale: Sequence[float], ratio: Sequence[float], interpolation: Inter, max_attempts: int) -> Dict[str, Any]:
    if max_attempts < 1:
        raise ValueError(f"{name}: max_attempts must be >= 1, not {max_attempts}")
    return {
        "op": "random_resized_crop",
        "size": size_value(name, size),
        "scale": list(pair(name, "scale", scale)),
        "ratio": list(pair(name, "ratio", ratio)),
        "filter": _filter(name, interpolation),
        "attempts": int(max_attempts),
    }


class RandomResizedCrop(Op):
    """Crop a box of random area (``scale``) and aspect ratio (``ratio``), resized to
    ``size``: the training crop (torchvision's algorithm, 10 attempts then the central
    crop)."""

    _name = "RandomResizedCrop"

    def __init__(
        self,
        size: Union[int, Sequence[int]],
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3.0 / 4.0, 4.0 / 3.0),
        interpolation: Inter = Inter.BILINEAR,
        max_attempts: int = 10,
    ) -> None:
        self._table = _rrc_table(self._name, size, scale, ratio, interpolation, max_attempts)
        self.size, self.scale, self.ratio = size, tuple(scale), tuple(ratio)
        self.interpolation, self.max_attempts = interpolation, max_attempts

    def _tables(self) -> List[Dict[str, Any]]:
        return [dict(self._table)]


class RandomCropDecodeResize(RandomResizedCrop):
    """Decode and :class:`RandomResizedCrop` in one op (only the box is decoded where the
    decoder can)."""

    _name = "RandomCropDecodeResize"

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": "decode"}, dict(self._table)]
