"""The base of the op objects of ``imgfeed.dataset.vision`` and ``.transforms``."""

from __future__ import annotations

from typing import Any, Dict, List, NoReturn, Sequence, Tuple, Union


class Op:
    """An op the native engine runs: it stands for one or more op tables of a pipeline file.

    ``column`` is the column it applies to (``"image"`` for the vision ops, a label column
    for ``TypeCast``).
    """

    column = "image"

    def _tables(self) -> List[Dict[str, Any]]:
        raise NotImplementedError  # pragma: no cover - every op defines it

    def _retarget(self, columns: List[str]) -> "Op":
        """This op for the map's ``input_columns`` (an op whose column follows them, such
        as ``TypeCast``, returns a copy for them)."""
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError(
            f"{type(self).__name__} runs inside the engine's pipeline (Dataset.map); calling it "
            "eagerly on one image is not supported"
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def unsupported(name: str, why: str) -> NoReturn:
    """Raise the error for an op, argument or combination the engine cannot run."""
    raise NotImplementedError(f"{name}: {why}")


def size_value(name: str, size: Union[int, Sequence[int]]) -> Union[int, List[int]]:
    """MindSpore's ``size``: an int, or ``(height, width)``."""
    if isinstance(size, bool):
        raise TypeError(f"{name}: size must be an int or a (height, width) pair, not {size!r}")
    if isinstance(size, int):
        if size <= 0:
            raise ValueError(f"{name}: size must be positive, not {size}")
        return size
    try:
        seq = [int(v) for v in size]
    except TypeError:
        raise TypeError(f"{name}: size must be an int or a (height, width) pair, not {size!r}") from None
    if len(seq) == 1:
        return size_value(name, seq[0])
    if len(seq) != 2 or min(seq) <= 0:
        raise ValueError(f"{name}: size must be a positive int or (height, width), not {size!r}")
    return seq


def pair(name: str, what: str, value: Sequence[float]) -> Tuple[float, float]:
    """A ``(min, max)`` pair such as ``scale`` or ``ratio``."""
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: {what} must be a (min, max) pair, not {value!r}") from None
    return lo, hi
