#!/usr/bin/env python3
"""MindSpore's ResNet-50 ``train.py`` flow over imgfeed: ``create_dataset`` with imgfeed's
imports, ``Model.train`` (LossMonitor, ModelCheckpoint), then ``Model.eval`` — with a tiny
network, so that it runs on the bundled fixtures in seconds on a CPU.

    python3 examples/mindspore_train.py                        # fixtures/imagefolder, 2 epochs
    python3 examples/mindspore_train.py --dataset_path DIR --epochs 5 --batch_size 32
    python3 examples/mindspore_train.py --sink                 # dataset sink mode, via to_mindspore()
    python3 examples/mindspore_train.py --mode pynative        # PyNative instead of graph mode
    RANK_SIZE=8 RANK_ID=3 python3 examples/mindspore_train.py  # rank 3's shard (msrun sets these)

Prints the loss at the end of every epoch (``epoch N loss X``) and the accuracy on the
evaluation set (``eval accuracy X``). Needs mindspore (``bash python/envs.sh mindspore``).
With ``--sink`` the training set is handed to ``Model.train(..., dataset_sink_mode=True)``
as a ``mindspore.dataset.GeneratorDataset`` over imgfeed's batches (``to_mindspore()``);
on a CPU MindSpore feeds sink mode from the host, on Ascend through the device queue.
"""

import argparse
import os
from pathlib import Path

import mindspore as ms
from mindspore import nn, ops
from mindspore.train import Callback, CheckpointConfig, LossMonitor, Model, ModelCheckpoint, TimeMonitor

import imgfeed.dataset as ds
import imgfeed.dataset.transforms as C2
import imgfeed.dataset.vision as C
from imgfeed import dtype as mstype

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imagefolder"


def create_dataset(dataset_path, do_train, batch_size=32, rank_size=1, rank_id=0):
    """MindSpore's ResNet-50 create_dataset; only the imports are imgfeed's."""
    if rank_size == 1:
        data_set = ds.ImageFolderDataset(dataset_path, num_parallel_workers=8, shuffle=do_train)
    else:
        data_set = ds.ImageFolderDataset(dataset_path, num_parallel_workers=8, shuffle=do_train,
                                         num_shards=rank_size, shard_id=rank_id)
    image_size = 224
    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255]
    std = [0.229 * 255, 0.224 * 255, 0.225 * 255]
    if do_train:
        trans = [
            C.RandomCropDecodeResize(image_size, scale=(0.08, 1.0), ratio=(0.75, 1.333)),
            C.RandomHorizontalFlip(prob=0.5),
            C.Normalize(mean=mean, std=std),
            C.HWC2CHW(),
        ]
    else:
        trans = [C.Decode(), C.Resize(256), C.CenterCrop(image_size), C.Normalize(mean=mean, std=std), C.HWC2CHW()]
    type_cast_op = C2.TypeCast(mstype.int32)
    data_set = data_set.map(operations=trans, input_columns="image", num_parallel_workers=8)
    data_set = data_set.map(operations=type_cast_op, input_columns="label", num_parallel_workers=8)
    data_set = data_set.batch(batch_size, drop_remainder=do_train)
    return data_set


class TinyNet(nn.Cell):
    """Stands in for ResNet-50: a 4x4-strided convolution, global average pooling, a dense layer."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=4, stride=4, has_bias=True)
        self.relu = nn.ReLU()
        self.fc = nn.Dense(8, num_classes)

    def construct(self, x):
        x = self.relu(self.conv(x))
        return self.fc(ops.mean(x, (2, 3)))


class EpochLoss(Callback):
    """Prints the last step's loss at the end of every epoch."""

    def on_train_epoch_end(self, run_context):
        p = run_context.original_args()
        print(f"epoch {p.cur_epoch_num} loss {float(p.net_outputs.asnumpy()):.4f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description="ResNet-50-style training over imgfeed with MindSpore's Model")
    parser.add_argument("--dataset_path", default=str(FIXTURES), help="an ImageFolder tree (default: the fixtures)")
    parser.add_argument("--eval_path", default=None, help="the evaluation tree (default: --dataset_path)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--ckpt_dir", default="./ckpt")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sink", action="store_true", help="dataset sink mode, through Dataset.to_mindspore()")
    parser.add_argument("--mode", choices=["graph", "pynative"], default="graph", help="MindSpore's execution mode")
    args = parser.parse_args()

    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    ms.set_seed(args.seed)
    ds.config.set_seed(args.seed)
    rank_size = int(os.getenv("RANK_SIZE", "1"))
    rank_id = int(os.getenv("RANK_ID", "0"))

    dataset = create_dataset(args.dataset_path, do_train=True, batch_size=args.batch_size,
                             rank_size=rank_size, rank_id=rank_id)
    step_size = dataset.get_dataset_size()
    num_classes = len(dataset.get_class_indexing())
    train_data = dataset.to_mindspore() if args.sink else dataset

    net = TinyNet(num_classes)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    model = Model(net, loss_fn=loss, optimizer=opt, metrics={"acc"})

    config_ck = CheckpointConfig(save_checkpoint_steps=step_size, keep_checkpoint_max=args.epochs)
    ckpt_cb = ModelCheckpoint(prefix="tinynet", directory=args.ckpt_dir, config=config_ck)
    callbacks = [TimeMonitor(data_size=step_size), LossMonitor(), EpochLoss(), ckpt_cb]
    model.train(args.epochs, train_data, callbacks=callbacks, sink_size=step_size, dataset_sink_mode=args.sink)

    eval_data = create_dataset(args.eval_path or args.dataset_path, do_train=False, batch_size=args.batch_size,
                               rank_size=rank_size, rank_id=rank_id)
    acc = model.eval(eval_data)["acc"]
    print(f"eval accuracy {acc:.4f}", flush=True)


if __name__ == "__main__":
    main()
