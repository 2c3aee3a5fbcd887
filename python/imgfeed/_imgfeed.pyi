"""Type stubs of the native module ``imgfeed._imgfeed`` (PyO3)."""

from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

__version__: str
OFFSET64: int

Spec = Dict[str, Any]

class Source:
    """A dataset opened once: listed (ImageFolder) or mapped (CIFAR, shards), no sample read."""

    def __init__(self, source_json: str) -> None: ...
    def __len__(self) -> int: ...
    def describe(self) -> str:
        """One line: kind, root, sample and class counts."""
    def classes(self) -> List[Tuple[str, int]]:
        """``[(class name, label)]`` for sources that name their classes, else ``[]``."""
    def spec(self) -> Spec:
        """What a sample looks like as read."""
    def samples_per_epoch(self, source_json: str) -> int:
        """The samples an epoch reads with the sampling of ``source_json``: what one rank sees."""
    def check_ops(self, ops_json: str) -> List[Tuple[str, Spec]]:
        """``[(stage, spec)]`` after each op, or ``ValueError`` naming the first op that cannot take its input."""

class Pipeline:
    """A checked pipeline, ready to run epochs."""

    def __init__(self, config_json: str, source: Optional[Source] = None) -> None: ...
    @staticmethod
    def check_config(config_json: str) -> None:
        """Check the tables without opening the dataset (``ValueError`` naming the table)."""
    @staticmethod
    def with_overrides(
        config_json: Optional[str], path: Optional[str], overrides_json: str, launched: bool
    ) -> "Pipeline":
        """The tables (or the pipeline file at ``path``) with the overrides applied, built:
        a ``Loader``'s one crossing; ``launched``: read the shard from the launcher's variables
        when the pipeline names none."""
    @staticmethod
    def apply_overrides(config_json: str, overrides_json: str) -> str:
        """The tables with the overrides applied and checked, as JSON."""
    @staticmethod
    def load_config(path: str) -> str:
        """A pipeline file's tables as JSON, with ``root`` made absolute."""
    def config_json(self) -> str:
        """The configuration it was built from, as JSON."""
    def preview_png(
        self, epoch: int = 0, batch: int = 0, count: int = 16, with_source: bool = False, tile: Optional[int] = None
    ) -> bytes:
        """The contact sheet of the epoch's first ``count`` samples from ``batch``, as PNG bytes
        (what ``imgfeed preview --out FILE.png`` writes)."""
    def samples_per_epoch(self) -> int:
        """Samples per epoch (this shard)."""
    def batches_per_epoch(self) -> int:
        """Batches per epoch (this shard)."""
    def last_epoch(self, epoch: int) -> None:
        """The run reads no epoch after ``epoch``: nothing is kept in the cache for one."""
    def source_len(self) -> int:
        """Samples in the dataset (every shard)."""
    def describe(self) -> str:
        """One line about the source."""
    def classes(self) -> List[Tuple[str, int]]:
        """``[(class name, label)]`` for sources that name their classes."""
    def stages(self) -> List[Tuple[str, Spec]]:
        """``[(stage, spec)]``, starting with the source."""
    def fusions(self) -> List[str]:
        """The fusions the engine applies, in words."""
    def warnings(self) -> List[str]:
        """What looks like a mistake but runs (normalize given 0–1 units on 0–255 pixels)."""
    def output_spec(self) -> Spec:
        """The spec of one output sample."""
    def epoch(
        self, epoch: int, batch: int = 0, sample: Optional[int] = None, state: Optional[str] = None
    ) -> Epoch:
        """Start epoch ``epoch``, or resume it at ``batch`` (and ``sample``), or resume the
        job state ``state`` (JSON) on this pipeline's world."""
    def job_state(self, epoch: int, batch: int = 0, sample: Optional[int] = None) -> str:
        """The job state (JSON) of this rank at ``batch`` of an ordinary ``epoch``."""
    def advance_state(self, state: str, batches: int) -> str:
        """The job state once ``state`` is resumed here and ``batches`` more batches yielded."""
    def state_extent(self, state: str) -> Tuple[int, int]:
        """``(batches, samples)`` this rank yields resuming ``state``."""
    def check_state(self, state: str) -> int:
        """``ValueError`` saying why ``state`` (JSON) cannot be resumed here; its epoch otherwise."""

class Epoch:
    """One epoch in flight; closing or dropping it stops the engine's threads."""

    def __iter__(self) -> Iterator[Batch]: ...
    def __next__(self) -> Batch: ...
    def __len__(self) -> int: ...
    def state(self) -> Tuple[int, int, Optional[int]]:
        """``(epoch, next batch, position of its first sample)``."""
    def job_state(self) -> str:
        """Where the job stands, as JSON: any rank's resumes the epoch on any world."""
    def dropped_tail_errors(self) -> List[BaseException]:
        """Skip mode with ``drop_remainder``: the bad samples of the dropped last batch."""
    def close(self) -> None:
        """Stop the workers now."""

class BatchMemory:
    """Owns one batch's buffer while numpy arrays view it (their ``base``)."""

class Batch:
    """One batch: numpy arrays over the engine's buffer, and what went into it."""

    images: npt.NDArray[Any]
    labels: npt.NDArray[Any]
    indices: npt.NDArray[np.uint64]
    number: int
    skipped: List[BaseException]
    def __len__(self) -> int: ...

def fingerprint(data: bytes) -> int:
    """The 64-bit fingerprint the engine's workers compute for each sample."""

def fold(h: int, value: int) -> int:
    """One FNV-1a 64 step of ``imgfeed run``'s digest."""

def op_names() -> List[str]:
    """Every per-sample op's name in pipeline files."""

def batch_op_names() -> List[str]:
    """Every batch op's name in pipeline files."""

def source_kinds() -> List[str]:
    """Every source kind's name in pipeline files (``kind = ...`` of ``[source]``)."""

def settings() -> List[Dict[str, Any]]:
    """The settings ``Pipeline.replace`` and ``Loader`` take (the engine's table)."""

def check_overrides(overrides_json: str) -> None:
    """Check the rules between settings that need no pipeline (``num_shards`` with ``shard_id``)."""

def cli_main(args: List[str]) -> int:
    """The ``imgfeed`` command with ``args`` (the program's name first); its exit code."""
