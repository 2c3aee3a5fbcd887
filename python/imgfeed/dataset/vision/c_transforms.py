"""``mindspore.dataset.vision.c_transforms``' older import path: the same ops as
:mod:`imgfeed.dataset.vision`."""

from typing import Any

from . import *  # noqa: F401,F403
from . import __all__ as __all__  # noqa: F401
from . import __getattr__ as _vision_getattr


def __getattr__(name: str) -> Any:
    return _vision_getattr(name)
