"""``Decode``: encoded bytes to RGB ``uint8`` HWC."""

from __future__ import annotations

from typing import Any, Dict, List

from .._op import Op, unsupported


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
