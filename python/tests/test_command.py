"""The wheel's ``imgfeed`` command (a console script into the native module): the crate's own
command line, so a fresh environment with only the wheel runs ``validate``, ``bench`` and
``convert`` without Rust; and the integrations' extras pin what their tests run against."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from conftest import FIXTURES, REPO, _binary


def command(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "imgfeed"  # where pip puts the wheel's scripts
    assert exe.exists(), f"the wheel installed no imgfeed command beside {sys.executable}"
    return subprocess.run([str(exe), *args], capture_output=True, text=True)


def crate_version() -> str:
    text = (REPO / "Cargo.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


def test_the_wheel_carries_the_command_at_the_crates_version():
    out = command("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"imgfeed {crate_version()} (JPEG: ")
    # the same line as the binary cargo builds (same decoder too)
    binary = subprocess.run([str(_binary()), "--version"], capture_output=True, text=True)
    assert out.stdout == binary.stdout
    # and as `python -m imgfeed` (what imgfeed.ray.convert runs on a node)
    module = subprocess.run([sys.executable, "-m", "imgfeed", "--version"], capture_output=True, text=True)
    assert module.stdout == out.stdout


def _untimed(text: str) -> str:
    return re.sub(r"in [0-9.]+ s", "in T s", text)


def test_the_wheels_command_validates_a_tree_as_the_binary_does():
    tree = str(FIXTURES / "imagefolder")
    out = command("validate", tree, "--workers", "2")
    assert out.returncode == 0, out.stderr
    assert "checked 12 of 12 samples" in out.stdout
    binary = subprocess.run([str(_binary()), "validate", tree, "--workers", "2"], capture_output=True, text=True)
    assert _untimed(out.stdout) == _untimed(binary.stdout)


def test_the_wheels_command_exits_as_the_binary_does():
    # a usage error: clap's message and exit code 2, from inside the Python process
    out = command("run", "--no-such-flag")
    assert out.returncode == 2
    assert "--no-such-flag" in out.stderr
    bad = command("validate", str(FIXTURES / "no-such-folder"))
    assert bad.returncode == 2 and "error:" in bad.stderr


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, 1)[0].lower()


def test_the_extras_pin_what_the_framework_tests_run_against():
    requires = metadata.requires("imgfeed") or []
    for extra in ("ray", "torch", "mindspore"):
        pins = [r.split(";")[0].strip() for r in requires if re.search(rf"extra\s*==\s*['\"]{extra}['\"]", r)]
        assert pins, f"no imgfeed[{extra}] extra"
        tested = [line.strip() for line in (REPO / "python" / "envs" / f"{extra}.txt").read_text().splitlines()
                  if line.strip() and not line.startswith("#")]
        by_name = {_name(t): t for t in tested}
        for pin in pins:
            assert _name(pin) in by_name, f"imgfeed[{extra}] pins {pin}, which python/envs/{extra}.txt does not test"
            want = re.sub(r"^[^<>=!~]*", "", by_name[_name(pin)])
            got = re.sub(r"^[^<>=!~]*", "", pin.replace(" ", ""))
            assert got == want, f"imgfeed[{extra}] pins {pin}, python/envs/{extra}.txt tests {by_name[_name(pin)]}"
        assert extra in by_name, f"imgfeed[{extra}] does not pin {extra} itself"
