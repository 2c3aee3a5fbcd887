"""The wheel's ``imgfeed`` command (a console script, ``[project.scripts]``): the crate's own
command line, compiled into the native module — the same code as the ``imgfeed`` binary
``cargo install`` builds, so ``imgfeed validate``, ``bench`` and ``convert`` need no Rust."""

from __future__ import annotations

import sys


def main() -> None:
    from ._imgfeed import cli_main

    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(cli_main(["imgfeed", *sys.argv[1:]]))
