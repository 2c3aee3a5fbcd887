"""``python -m imgfeed ARGS``: the ``imgfeed`` command of this installation (what
:mod:`imgfeed.ray` runs on a node when it is given no ``binary``)."""

from ._cli import main

main()
