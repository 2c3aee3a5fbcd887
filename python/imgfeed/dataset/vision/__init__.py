"""MindSpore's vision ops (``mindspore.dataset.vision`` / ``.vision.c_transforms``), run by
imgfeed's native engine. Each op object stands for the engine op(s) of the same meaning;
pass them to ``Dataset.map(operations=[...], input_columns="image")``.

Interpolation: ``Inter.LINEAR`` / ``Inter.BILINEAR`` (the default of ``Resize`` and the
random crops) are the engine's ``bilinear``: Pillow's antialiased bilinear, bit-identical to
torchvision on PIL images and the filter of imgfeed's canonical ResNet-50 pipelines.
MindSpore's own C++ kernel for ``Inter.LINEAR`` is OpenCV's plain 2×2 interpolation, which
is not antialiased; ask for it by name with ``Inter.OPENCV_LINEAR`` (the engine's
``linear``). ``Inter.PILCUBIC`` is Pillow's bicubic; OpenCV's bicubic (``Inter.CUBIC``) is
not in the engine and is refused.
"""

from __future__ import annotations

import enum
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .._mindspore_names import NAMES as _MINDSPORE_NAMES
from .._op import Op, pair, size_value, unsupported

__all__ = [
    "Inter",
    "Border",
    "Decode",
    "Resize",
    "CenterCrop",
    "Normalize",
    "HWC2CHW",
    "Rescale",
    "RandomCrop",
    "RandomHorizontalFlip",
    "RandomVerticalFlip",
    "RandomColorAdjust",
    "Pad",
    "RandomErasing",
    "AutoAugmentPolicy",
    "AutoAugment",
    "RandAugment",
    "TrivialAugmentWide",
    "RandomResizedCrop",
    "RandomCropDecodeResize",
]


class Inter(enum.Enum):
    """Interpolation modes, by MindSpore's names (see the module doc for what each runs)."""

    NEAREST = "nearest"
    LINEAR = "bilinear"
    BILINEAR = "bilinear"
    ANTIALIAS = "antialias"
    PILCUBIC = "bicubic"
    CUBIC = "cubic"
    BICUBIC = "cubic"
    AREA = "area"
    #: imgfeed's name for OpenCV's (and MindSpore's C++) non-antialiased bilinear.
    OPENCV_LINEAR = "linear"


def _filter(name: str, interpolation: Inter) -> str:
    if not isinstance(interpolation, Inter):
        raise TypeError(f"{name}: interpolation must be an Inter, not {interpolation!r}")
    if interpolation.value == "cubic":
        unsupported(
            name,
            "Inter.CUBIC (OpenCV's bicubic) is not in imgfeed's engine; Inter.PILCUBIC is Pillow's bicubic",
        )
    if interpolation.value == "antialias":
        unsupported(name, "Inter.ANTIALIAS (Pillow's Lanczos, MindSpore's PIL-only filter) is not in imgfeed's engine")
    return interpolation.value


class Border(enum.Enum):
    """Padding modes, by MindSpore's names (``np.pad``'s: ``REFLECT`` mirrors without
    repeating the edge pixel, ``SYMMETRIC`` repeats it)."""

    CONSTANT = "constant"
    EDGE = "edge"
    REFLECT = "reflect"
    SYMMETRIC = "symmetric"


class Decode(Op):
    """Decode JPEG, PNG, BMP or WebP bytes to RGB ``uint8`` HWC (libjpeg-turbo or zune-jpeg
    for JPEG, as the engine was built)."""

    def __init__(self, rgb: bool = True, to_pil: bool = False) -> None:
        if not rgb:
            unsupported("Decode", "rgb=False (BGR output) is not supported")
        if to_pil:
            unsupported("Decode", "to_pil=True: the engine's images are arrays, not PIL images")
        self.rgb = rgb

    def _tables(self) -> List[Dict[str, Any]]:
        return [{"op": "decode"}]


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


class AutoAugmentPolicy(enum.Enum):
    """The learned AutoAugment policies, by MindSpore's names."""

    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"
    SVHN = "svhn"


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


#: MindSpore vision ops the engine does not have (yet): naming one raises at once.
_NOT_IN_ENGINE = frozenset(
    """AdjustBrightness AdjustContrast AdjustGamma AdjustHue AdjustSaturation AdjustSharpness
    Affine AutoContrast BoundingBoxAugment ConvertColor Crop CutMixBatch CutOut
    Equalize Erase GaussianBlur Grayscale HorizontalFlip HsvToRgb Invert MixUp MixUpBatch
    NormalizePad PadToSize Perspective Posterize RandomAdjustSharpness
    RandomAffine RandomAutoContrast RandomColor RandomCropDecodeResizeWithBBox
    RandomCropWithBBox RandomEqualize RandomGrayscale RandomHorizontalFlipWithBBox
    RandomInvert RandomLighting RandomPerspective RandomPosterize RandomResize
    RandomResizedCropWithBBox RandomResizeWithBBox RandomRotation RandomSelectSubpolicy
    RandomSharpness RandomSolarize RandomVerticalFlipWithBBox ResizedCrop
    ResizeWithBBox RgbToHsv Rotate SlicePatches Solarize ToPIL ToTensor ToType
    UniformAugment VerticalFlip""".split()
)


def __getattr__(name: str) -> Any:
    # _NOT_IN_ENGINE, and every other public name of MindSpore's module (generated from
    # MindSpore's own: python/tools/mindspore_names.py)
    if name in _NOT_IN_ENGINE or name in _MINDSPORE_NAMES["vision"]:
        raise NotImplementedError(f"vision.{name} is a MindSpore op that imgfeed's engine does not have")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
