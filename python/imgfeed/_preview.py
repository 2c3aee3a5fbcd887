"""``imgfeed.preview``: what a pipeline makes, as a PIL image — the native contact sheet of
``imgfeed preview``, from the same code: the first samples of an epoch as the trainer gets
them, undone into pictures (normalize, rescale, layout, cast), each captioned with its class
(or its soft labels' weights) and its file."""

from __future__ import annotations

import io
from typing import Any, Optional, Tuple

from . import _imgfeed


def _native(obj: Any) -> Tuple["_imgfeed.Pipeline", int]:
    """The native pipeline behind ``obj`` and the epoch it is at."""
    from ._loader import Loader
    from ._pipeline import Pipeline
    from .dataset._dataset import Dataset

    if isinstance(obj, Loader):
        return obj._native, obj._epoch
    if isinstance(obj, Pipeline):
        return obj.build(), 0
    if isinstance(obj, Dataset):
        return obj._build(), 0
    if isinstance(obj, _imgfeed.Pipeline):
        return obj, 0
    raise TypeError(
        f"imgfeed.preview takes an imgfeed.Loader, imgfeed.Pipeline or imgfeed.dataset dataset, not {type(obj).__name__}"
    )


def preview_png(
    obj: Any,
    count: int = 16,
    *,
    epoch: Optional[int] = None,
    batch: int = 0,
    with_source: bool = False,
    tile: Optional[int] = None,
) -> bytes:
    """The contact sheet as PNG bytes (what ``imgfeed preview --out FILE.png`` writes)."""
    native, at = _native(obj)
    return native.preview_png(at if epoch is None else epoch, batch, count, with_source, tile)


def preview(
    obj: Any,
    count: int = 16,
    *,
    epoch: Optional[int] = None,
    batch: int = 0,
    with_source: bool = False,
    tile: Optional[int] = None,
) -> Any:
    """The first ``count`` samples of an epoch of ``obj`` (a :class:`imgfeed.Loader` — at its
    epoch —, an :class:`imgfeed.Pipeline` or an :mod:`imgfeed.dataset` dataset), from batch
    ``batch``, as the trainer gets them, on a contact sheet: a ``PIL.Image.Image`` (RGB).
    ``with_source`` puts each decoded original beside it; ``tile`` scales each picture so its
    longer side is that many pixels. Needs Pillow."""
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - Pillow is in the test environment
        raise ImportError("imgfeed.preview returns a PIL image: pip install pillow") from e
    image = Image.open(io.BytesIO(preview_png(obj, count, epoch=epoch, batch=batch, with_source=with_source, tile=tile)))
    image.load()
    return image


def repr_png(obj: Any) -> Optional[bytes]:
    """Jupyter's ``_repr_png_``: eight samples, or nothing (the text repr) when the pipeline
    cannot run here."""
    try:
        return preview_png(obj, 8)
    except Exception:  # noqa: BLE001 - a notebook falls back to the text repr
        return None
