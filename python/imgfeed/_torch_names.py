"""The keywords of ``torch.utils.data.DataLoader`` a user types into :class:`imgfeed.Loader`,
answered with imgfeed's own (or why there is none) instead of a bare ``TypeError``."""

from __future__ import annotations

from typing import Any, Dict

TORCH: Dict[str, str] = {
    "num_workers": "imgfeed's is workers= (the native engine's decoding threads, in this process)",
    "shuffle": "shuffle=",
    "drop_last": "drop_last=",
    "sampler": "there is no sampler: shuffle=, seed=, num_shards= and shard_id= are the sampling "
               "(MindSpore's DistributedSampler)",
    "batch_sampler": "there is no batch sampler: batch_size= and drop_last= make the batches",
    "collate_fn": "there is no collate function: batches come out stacked (the pipeline's batch "
                  "ops, e.g. one_hot or mixup, work on whole batches)",
    "pin_memory": "there is no pin_memory: batches are numpy arrays over the engine's buffers "
                  "(as_torch=True shares them as tensors; pin or move them in the training loop)",
    "prefetch_factor": "the engine prefetches by itself (engine.prefetch in the pipeline file)",
    "persistent_workers": "the engine's threads live as long as the loader",
    "timeout": "there is no timeout",
    "worker_init_fn": "there are no worker processes to initialise: workers are native threads",
    "multiprocessing_context": "there are no worker processes: workers are native threads",
    "generator": "seed= seeds the shuffle and the random ops",
    "dataset": "the first argument is a pipeline file or an imgfeed.Pipeline",
}


def refuse(call: str, given: Dict[str, Any]) -> None:
    """Raise ``TypeError`` for the unknown keywords ``given`` to ``call``, saying which of
    imgfeed's a torch keyword corresponds to."""
    if not given:
        return
    name = sorted(given)[0]
    hint = TORCH.get(name)
    raise TypeError(f"{call} got an unexpected keyword argument {name!r}" + (f": {hint}" if hint else ""))
