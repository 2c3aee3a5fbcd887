"""``mindspore.dataset.transforms.c_transforms``' older import path: the same transforms
as :mod:`imgfeed.dataset.transforms`."""

from typing import Any

from . import *  # noqa: F401,F403
from . import __all__ as __all__  # noqa: F401
from . import __getattr__ as _transforms_getattr


def __getattr__(name: str) -> Any:
    return _transforms_getattr(name)
