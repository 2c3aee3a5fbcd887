"""PyTorch DistributedDataParallel fed by imgfeed, under torchrun (CPU, gloo).

    torchrun --nproc_per_node=2 --master_addr 127.0.0.1 --master_port 29500 \\
        examples/torch_ddp.py --data fixtures/imagefolder --epochs 2

Each process reads its rank's shard: ``imgfeed.Loader`` takes ``WORLD_SIZE``/``RANK`` from
torchrun's environment (MindSpore's DistributedSampler: every rank gets ``ceil(N / world)``
samples, the last round wrapping to the start of the epoch's order), so every rank runs the
same number of steps and DDP's all-reduces line up. ``set_epoch`` reshuffles each epoch.

Stopping and resuming mid-epoch::

    torchrun ... examples/torch_ddp.py --stop-after 4 --checkpoint ckpt.pt   # 4 steps, then save
    torchrun ... examples/torch_ddp.py --resume ckpt.pt                      # the rest, exactly

The checkpoint holds the model, the optimizer and rank 0's ``loader.state_dict()`` (any
rank's says where the job stands); the resumed run yields exactly the batches the
interrupted one would have yielded next. Resumed with another ``--nproc_per_node``, the new
ranks split the rest of the epoch among them (each sample once with ``--uneven exact``),
and the following epochs are ordinary epochs of the new world.

``--report FILE``: each rank writes ``FILE.rank<R>.json`` — its sample indices, a digest of
the pixels it trained on and the loss, per step, and its final parameters — which
``python/tests/test_torch_ddp.py`` checks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import imgfeed

REPO = Path(__file__).resolve().parents[1]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO / "fixtures" / "imagefolder"), help="an ImageFolder tree")
    p.add_argument("--pipeline", default=str(REPO / "pipelines" / "resnet50_train.toml"))
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=2, help="per rank")
    p.add_argument("--workers", type=int, default=1, help="engine threads per rank")
    p.add_argument("--uneven", choices=["pad", "drop", "exact"], help="when the ranks do not divide the dataset")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--stop-after", type=int, metavar="N", help="stop after N steps in all (then --checkpoint)")
    p.add_argument("--checkpoint", metavar="FILE", help="where --stop-after saves the model, optimizer and loader states")
    p.add_argument("--resume", metavar="FILE", help="continue from a --checkpoint file")
    p.add_argument("--report", metavar="FILE", help="each rank writes FILE.rank<R>.json: its steps and final parameters")
    p.add_argument("--no-ddp", action="store_true", help="train each rank alone (no gradient all-reduce; for tests)")
    args = p.parse_args()
    if args.stop_after is not None and not args.checkpoint:
        p.error("--stop-after needs --checkpoint FILE")
    return args


class TinyNet(nn.Module):
    """Small enough to train a step in milliseconds on a CPU."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, kernel_size=7, stride=4, padding=3),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
            nn.Flatten(),
        )
        self.head = nn.Linear(8 * 4 * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()[:16]


def main() -> int:
    args = parse_args()
    if "RANK" not in os.environ:
        sys.exit("run this under torchrun (it sets RANK/WORLD_SIZE); see the docstring")
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    # The shard comes from torchrun's WORLD_SIZE/RANK; as_torch=True iterates as tensors.
    loader = imgfeed.Loader(args.pipeline, data=args.data, batch_size=args.batch_size, drop_last=True,
                            workers=args.workers, uneven=args.uneven, as_torch=True)
    if len(loader) == 0:
        sys.exit(f"rank {rank}: {loader.num_samples} samples make no batch of {args.batch_size}")
    model = TinyNet(len(loader.classes))
    net = model if args.no_ddp else DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    start_epoch, step = 0, 0
    if args.resume:
        ckpt = torch.load(args.resume, weights_only=False)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        # Where the job stands, for this world whatever the saving world's size.
        loader.load_state_dict(ckpt["loader"])
        start_epoch, step = ckpt["loader"]["epoch"], ckpt["step"]

    records = []
    stopped = False
    for epoch in range(start_epoch, args.epochs):
        loader.set_epoch(epoch)  # after load_state_dict, the loaded epoch keeps its position
        total, count = torch.zeros(2), 0
        # batches() gives the source indices beside the arrays; torch.from_numpy shares the
        # memory exactly as iterating the as_torch loader does (`for images, labels in loader`).
        for batch in loader.batches():
            images, labels = torch.from_numpy(batch.images), torch.from_numpy(batch.labels).long()
            opt.zero_grad()
            loss = loss_fn(net(images), labels)
            loss.backward()  # DDP all-reduces the gradients here
            opt.step()
            step += 1
            total += torch.tensor([loss.item() * len(labels), len(labels)])
            count += 1
            records.append({"epoch": epoch, "step": step, "batch": int(batch.number),
                            "indices": [int(i) for i in batch.indices], "pixels": digest(images),
                            "labels": labels.tolist(), "loss": loss.item()})
            if args.stop_after is not None and step == args.stop_after:
                stopped = True
                break
        if stopped:
            break
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: loss {total[0].item() / total[1].item():.4f} "
                  f"({count} steps x {world} ranks x {args.batch_size})", flush=True)

    if stopped and rank == 0:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "loader": loader.state_dict(),
                    "step": step, "world_size": world}, args.checkpoint)
        print(f"stopped after step {step}: saved {args.checkpoint}", flush=True)

    if args.report:
        report = {"rank": rank, "world_size": world, "num_samples": loader.num_samples,
                  "batches_per_epoch": len(loader), "steps": records,
                  "params": {k: v.flatten().tolist() for k, v in model.state_dict().items()}}
        Path(f"{args.report}.rank{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
