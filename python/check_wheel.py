"""Checks that a built imgfeed wheel is self-contained and lean (python/test.sh runs it):

* every shared object in it needs (ELF ``NEEDED``) only the C runtime every Linux has
  (glibc's libraries, libgcc_s, the dynamic loader) or a library the wheel itself carries —
  not the system libjpeg (``libjpeg.so.62``) a training node may lack;
* no shared object in it carries debug info (``.debug_*`` sections: the release profile's
  ``debug = 1`` is for profiling builds, not for the wheel);
* it installs the ``imgfeed`` command (``console_scripts``: ``imgfeed = imgfeed._cli:main``);
* its size is the figure docs/getting-started.md gives ("the wheel is N MB"), within 0.5 MB.

    python3 python/check_wheel.py WHEEL

Needs ``readelf`` (binutils, beside gcc). Exits 1 listing what is wrong.

    PYTHON python/check_wheel.py --decode

with the Python of an environment the wheel is installed in: decodes the fixture tree's
JPEGs with ``decoder = "libjpeg"`` (the libjpeg-turbo the wheel carries; an error if the
build fell back to zune-jpeg). python/test.sh runs it with the system libjpeg hidden.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# What manylinux's policies call the system: glibc's own libraries, libgcc_s, the loader.
SYSTEM = {
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}


def readelf(flag: str, path: Path) -> str:
    return subprocess.run(["readelf", flag, "-W", str(path)], check=True, capture_output=True, text=True).stdout


def needed(path: Path) -> list:
    return [line.split("[", 1)[1].rstrip("]") for line in readelf("-d", path).splitlines()
            if "(NEEDED)" in line]


def debug_sections(path: Path) -> list:
    return sorted({word for line in readelf("-S", path).splitlines() for word in line.split()
                   if word.startswith(".debug_")})


def main(wheel: str) -> int:
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        zipfile.ZipFile(wheel).extractall(tmp)
        objects = [p for p in Path(tmp).rglob("*.so*") if p.is_file()]
        if not objects:
            problems.append("no shared object in the wheel")
        carried = {p.name for p in objects}
        for so in objects:
            rel = so.relative_to(tmp)
            libs = needed(so)
            print(f"check_wheel: {rel}: NEEDED {', '.join(libs) or '(none)'}")
            foreign = [lib for lib in libs if lib not in SYSTEM and lib not in carried]
            if foreign:
                problems.append(f"{rel} needs {', '.join(foreign)}, which is neither a system library "
                                f"({', '.join(sorted(SYSTEM))}) nor in the wheel")
            debug = debug_sections(so)
            if debug:
                problems.append(f"{rel} carries debug info ({', '.join(debug)})")
        scripts = list(Path(tmp).glob("*.dist-info/entry_points.txt"))
        entry = scripts[0].read_text().replace(" ", "") if scripts else ""
        if "[console_scripts]" not in entry or "imgfeed=imgfeed._cli:main" not in entry.splitlines():
            problems.append("the wheel installs no `imgfeed` command (console_scripts imgfeed = imgfeed._cli:main)")
    size = Path(wheel).stat().st_size
    print(f"check_wheel: {Path(wheel).name}: {size / 1e6:.1f} MB")
    guide = Path(__file__).resolve().parents[1] / "docs" / "getting-started.md"
    said = re.search(r"the wheel is ([0-9.]+) MB", guide.read_text())
    if not said:
        problems.append(f"{guide} gives no wheel size (\"the wheel is N MB\")")
    elif abs(float(said.group(1)) * 1e6 - size) > 0.5e6:
        problems.append(f"{guide} says the wheel is {said.group(1)} MB; it is {size / 1e6:.1f} MB")
    for p in problems:
        print(f"check_wheel: {p}", file=sys.stderr)
    return 1 if problems else 0


def decode() -> int:
    # The installed package, not the source folder beside this script.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    import imgfeed

    repo = Path(__file__).resolve().parents[1]
    config = imgfeed.Pipeline.from_file(repo / "pipelines" / "resnet50_eval.toml").config
    assert config["ops"][0]["op"] == "decode"
    config["ops"][0]["decoder"] = "libjpeg"
    loader = imgfeed.Loader(imgfeed.Pipeline.from_config(config), data=repo / "fixtures" / "imagefolder",
                            batch_size=4, workers=1)
    n = sum(len(labels) for _, labels in loader)
    if n != 12:
        print(f"check_wheel: decoded {n} of the fixture tree's 12 images", file=sys.stderr)
        return 1
    print(f"check_wheel: {imgfeed._imgfeed.__file__} decoded the fixture tree with libjpeg-turbo")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(decode() if sys.argv[1] == "--decode" else main(sys.argv[1]))
