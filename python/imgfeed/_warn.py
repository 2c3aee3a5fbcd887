"""imgfeed's warnings: ``UserWarning`` s whose message starts ``imgfeed:``, attributed to the
user's line — the first frame outside the imgfeed package — rather than to imgfeed's own
(the native module issues its warnings through this too)."""

from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str) -> None:
    if not message.startswith("imgfeed:"):
        message = f"imgfeed: {message}"
    level = 2  # the caller of warn()
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, UserWarning, stacklevel=level)
