"""The modes MindSpore's vision ops take, by MindSpore's names: interpolation (``Inter``,
and the engine filter each runs), padding (``Border``) and the AutoAugment policies."""

from __future__ import annotations

import enum

from .._op import unsupported


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


class AutoAugmentPolicy(enum.Enum):
    """The learned AutoAugment policies, by MindSpore's names."""

    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"
    SVHN = "svhn"
