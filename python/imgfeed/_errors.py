"""The exception a bad sample raises."""

from __future__ import annotations

__all__ = ["SampleError"]


class SampleError(ValueError):
    """One sample failed in one stage: its file could not be read or decoded, or it does not
    fit the pipeline.

    Raised by iteration when ``on_error="error"`` (the default). With ``on_error="skip"`` or
    ``"replace"`` the same errors are reported in ``Batch.skipped`` instead.

    Attributes:
        path: the file (or ``FILE:RECORD`` for record files), relative to the dataset root.
        index: the sample's index in the source.
        stage: the stage that failed (``read``, ``decode``, ``resize``, ...).
        kind: a stable name for programs: ``io``, ``empty``, ``file_too_large``,
            ``unknown_format``, ``unsupported``, ``too_many_pixels``, ``truncated``,
            ``corrupt``, ``bad_label``, ``shape``, ``panic`` or ``other``.
        reason: what is wrong, for people.
    """

    path: str
    index: int
    stage: str
    kind: str
    reason: str

    def __init__(self, message: str, path: str, index: int, stage: str, kind: str, reason: str) -> None:
        super().__init__(message)
        self.path = path
        self.index = index
        self.stage = stage
        self.kind = kind
        self.reason = reason

    def __reduce__(self):  # type: ignore[override]
        return (SampleError, (str(self), self.path, self.index, self.stage, self.kind, self.reason))
