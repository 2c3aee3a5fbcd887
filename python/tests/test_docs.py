"""The documentation's Python snippets run (issue 34): every ```python block of README.md and
docs/*.md marked ``<!-- docs: run -->`` on the line before it runs here, in the wheel's
environment, from the repository's root; the others say why not (``<!-- docs: skip: WHY -->``,
checked with the shell snippets by tests/docs.rs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from conftest import REPO

MARKER = re.compile(r"^\s*<!--\s*docs:\s*(run|skip:.*?)\s*-->\s*$")


def python_blocks() -> List[Tuple[str, str, str]]:
    """(place, marker, code) of every ```python block."""
    found = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        lines = doc.read_text().splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].lstrip().startswith("```"):
                i += 1
                continue
            lang, start = lines[i].strip()[3:].strip(), i
            i += 1
            body = []
            while i < len(lines) and not lines[i].lstrip().startswith("```"):
                body.append(lines[i])
                i += 1
            i += 1
            if lang != "python":
                continue
            before = next((l for l in reversed(lines[:start]) if l.strip()), "")
            m = MARKER.match(before)
            found.append((f"{doc.relative_to(REPO)}:{start + 1}", m.group(1) if m else "", "\n".join(body)))
    return found


BLOCKS = python_blocks()


def test_the_docs_have_python_snippets_that_run():
    assert sum(1 for _, m, _ in BLOCKS if m == "run") >= 1, BLOCKS


@pytest.mark.parametrize("place,marker,code", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_a_python_snippet(place, marker, code):
    if marker != "run":
        assert marker.startswith("skip:") and len(marker) > 15, f"{place}: no <!-- docs: run/skip: WHY --> marker"
        pytest.skip(f"{place}: {marker}")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{place} exited {out.returncode}\n{code}\n{out.stdout}\n{out.stderr}"
