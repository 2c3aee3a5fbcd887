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

The op classes live in modules of their own by kind (``_decode``, ``_geometry``, ``_values``,
``_color``, ``_augment``; the modes in ``_modes``); this module names them.
"""

from __future__ import annotations

from typing import Any

from .._mindspore_names import NAMES as _MINDSPORE_NAMES
from ._augment import AutoAugment, RandAugment, TrivialAugmentWide
from ._color import RandomColorAdjust, RandomErasing
from ._decode import Decode
from ._geometry import (
    CenterCrop,
    Pad,
    RandomCrop,
    RandomCropDecodeResize,
    RandomHorizontalFlip,
    RandomResizedCrop,
    RandomVerticalFlip,
    Resize,
)
from ._modes import AutoAugmentPolicy, Border, Inter
from ._values import HWC2CHW, Normalize, Rescale

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
