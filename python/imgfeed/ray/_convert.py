"""Conversions split into Ray tasks: :func:`convert` runs ``imgfeed convert --slice I/K``
on the cluster's nodes and joins the slices with the command that knows the output's layout
(``imgfeed merge-index`` for shards, ``imgfeed merge-npy`` for npy)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

import ray

from .._pipeline import PathLike, Pipeline

_SLICES = ".imgfeed-slices"


def _binary(binary: Optional[PathLike]) -> Optional[str]:
    """The ``imgfeed`` command given: ``binary``, else ``IMGFEED_BIN``; None for the one the
    installed wheel carries (:func:`_command`)."""
    return os.fspath(binary) if binary is not None else os.environ.get("IMGFEED_BIN") or None


def _command(binary: Optional[str]) -> List[str]:
    """The command line of ``imgfeed`` on this node: ``binary``, else this package's own
    command (``python -m imgfeed`` with the interpreter running the task, the wheel's
    command line: a node needs nothing beyond the wheel)."""
    return [binary] if binary else [sys.executable, "-m", "imgfeed"]


def _die_with_parent() -> None:
    """In the child: SIGKILL when the Ray worker that started it dies (Linux's
    PR_SET_PDEATHSIG), so a killed task leaves no conversion running."""
    import ctypes
    import signal

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))
    except OSError:
        pass


def _convert_slice(binary: Optional[str], cmd: List[str], out: str, i: int, k: int) -> Dict[str, Any]:
    """A Ray task: ``imgfeed convert ... --slice i/k`` into a folder of its own
    (``OUT/.imgfeed-slices/I.attempt-UUID``), renamed to ``OUT/.imgfeed-slices/I`` once the
    command has succeeded: only a complete slice counts, and a retried task never adds to
    what a failed attempt wrote."""
    slices = Path(out) / _SLICES
    final = slices / f"{i:05d}"
    node = ray.get_runtime_context().get_node_id()
    if final.is_dir():
        return {"slice": i, "node_id": node, "returncode": 0, "stdout": "(done by an earlier attempt)", "stderr": ""}
    attempt = slices / f"{i:05d}.attempt-{uuid.uuid4().hex}"
    run = subprocess.run(
        [*_command(binary), *cmd, "--slice", f"{i}/{k}", "--out", str(attempt)],
        capture_output=True, text=True, preexec_fn=_die_with_parent,
    )
    if run.returncode not in (0, 1):  # 1: bad samples skipped, the rest written (as the CLI)
        shutil.rmtree(attempt, ignore_errors=True)
        raise RuntimeError(f"imgfeed convert slice {i}/{k} exited {run.returncode}: {run.stderr.strip()}")
    try:
        os.rename(attempt, final)
    except OSError:
        if not final.is_dir():
            raise
        shutil.rmtree(attempt, ignore_errors=True)  # another attempt finished first
    return {"slice": i, "node_id": node, "returncode": run.returncode, "stdout": run.stdout, "stderr": run.stderr}


def convert(
    pipeline: PathLike,
    data: Optional[PathLike],
    out: PathLike,
    slices: int,
    *,
    format: str = "npy",
    args: Iterable[str] = (),
    binary: Optional[PathLike] = None,
    num_cpus: float = 1,
    timeout_s: Optional[float] = None,
) -> Dict[str, Any]:
    """``imgfeed convert PIPELINE --data DATA --format FORMAT --out OUT`` split into ``slices``
    Ray tasks (``--slice I/K``; slice I on the I-th node, round robin, elsewhere if that
    node is gone), then joined: ``merge-index`` for
    ``format="shards"`` (the same records as one machine's conversion), concatenation for
    ``"npy"`` (``images.npy``, ``labels.npy``, ``samples.txt`` byte for byte those of one
    machine's conversion). ``args``: more ``imgfeed convert`` flags (``--store raw``,
    ``--shard-size 256MB``, ``--workers 4``, sampling flags for npy, ...).

    Every node runs the ``imgfeed`` command (``binary``, else ``IMGFEED_BIN``, else the one
    the installed wheel carries, ``python -m imgfeed``) and sees ``pipeline``, ``data`` and ``out`` at the same paths. A task writes
    into a folder of its own that counts once the command succeeded, so a task Ray retries
    (its worker died) never duplicates records. Returns ``{"slices": [each task's slice,
    node_id, returncode, stdout, stderr], "merge": merge-index's or merge-npy's output}``; raises
    ``RuntimeError`` naming the slice whose command failed.
    """
    if isinstance(pipeline, Pipeline):
        raise TypeError("imgfeed.ray.convert takes a pipeline file (the imgfeed command reads TOML), not an imgfeed.Pipeline")
    if format not in ("npy", "shards"):
        raise ValueError(f"format must be 'npy' or 'shards', not {format!r}")
    if slices < 1:
        raise ValueError(f"slices must be >= 1, not {slices}")
    exe = _binary(binary)
    out_dir = Path(os.path.abspath(os.fspath(out)))
    done = [n for n in ("images.npy", "manifest.json") if (out_dir / n).exists()]
    if done:
        raise FileExistsError(f"{out_dir} already holds a conversion ({', '.join(done)})")
    (out_dir / _SLICES).mkdir(parents=True, exist_ok=True)
    cmd = ["convert", os.path.abspath(os.fspath(pipeline)), "--format", format]
    if data is not None:
        cmd += ["--data", os.path.abspath(os.fspath(data))]
    cmd += list(args)
    # Slice i on the i-th alive node with the CPUs (round robin; soft: elsewhere if it dies).
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) >= num_cpus)
    task = ray.remote(_convert_slice)
    refs = [
        task.options(
            num_cpus=num_cpus,
            max_retries=3,
            scheduling_strategy=NodeAffinitySchedulingStrategy(nodes[i % len(nodes)], soft=True) if nodes else "SPREAD"
        ).remote(exe, cmd, str(out_dir), i, slices)
        for i in range(slices)
    ]
    results = ray.get(refs, timeout=timeout_s)
    parts = [out_dir / _SLICES / f"{i:05d}" for i in range(slices)]
    merge = None
    if format == "shards":
        for part in parts:
            for f in sorted(part.iterdir()):
                os.replace(f, out_dir / f.name)
        run = subprocess.run([*_command(exe), "merge-index", str(out_dir)], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"imgfeed merge-index {out_dir} exited {run.returncode}: {run.stderr.strip()}")
        merge = run.stdout
    else:
        # The sink's own join (it knows the files' layout): images.npy last, as one conversion.
        run = subprocess.run([*_command(exe), "merge-npy", str(out_dir), *map(str, parts)], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"imgfeed merge-npy {out_dir} exited {run.returncode}: {run.stderr.strip()}")
        merge = run.stdout
    shutil.rmtree(out_dir / _SLICES)
    return {"slices": results, "merge": merge}
