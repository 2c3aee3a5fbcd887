#!/usr/bin/env python3
"""A MindSpore training-style loop fed three ways, on the canonical eval pipeline
(ImageFolder -> Decode -> Resize(256) -> CenterCrop(224) -> Normalize -> HWC2CHW ->
TypeCast(int32) -> batch(32, drop_remainder)), alternating runs, one epoch each, every
contender in a fresh process:

* `imgfeed`   -- MindSpore's `create_dataset` with imgfeed's imports, read as MindSpore's
                 `Model` reads a dataset in non-sink mode: `create_tuple_iterator(num_epochs=1,
                 do_copy=False)`, `mindspore.Tensor` columns
* `imgfeed-cv` -- the same with `Resize(256, Inter.OPENCV_LINEAR)`: the engine's plain 2x2
                 bilinear, the kind of kernel MindSpore's `Inter.LINEAR` runs
* `bridge`    -- the same pipeline as `imgfeed` through `to_mindspore()` (a `mindspore.dataset.GeneratorDataset`
                 of imgfeed's batches, what sink mode needs), read the same way
* `mindspore` -- MindSpore's own `mindspore.dataset` pipeline with the same ops
                 (`vision.Resize` is OpenCV's bilinear there, Pillow's antialiased bilinear in
                 imgfeed: see docs/mindspore.md's note on `Inter.LINEAR`)

`--loop iterate` (default) touches one value of every batch; `--loop model` runs a tiny
network's `Model.train(1, ..., dataset_sink_mode=False)` (mean of each channel -> Dense) over
the epoch instead, so the time includes MindSpore's per-step work.

Prints each round's images/s, the medians and the ratios computed per round (imgfeed /
mindspore, bridge / mindspore).

  python benches/mindspore_loop.py DATA_ROOT [--rounds 5] [--workers 2] [--loop iterate|model]

Run it with the Python of the mindspore environment (bash python/envs.sh mindspore) with the
package installed. Timing: from the first request for a batch to the last batch (listing the
dataset is not timed); `model` times the whole Model.train call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def imgfeed_dataset(data: str, workers: int, opencv_linear: bool = False):
    import imgfeed.dataset as ds
    import imgfeed.dataset.transforms as C2
    import imgfeed.dataset.vision as C
    from imgfeed import dtype as mstype

    data_set = ds.ImageFolderDataset(data, num_parallel_workers=workers, shuffle=False)
    resize = C.Resize(256, C.Inter.OPENCV_LINEAR) if opencv_linear else C.Resize(256)
    trans = [C.Decode(), resize, C.CenterCrop(224), C.Normalize(mean=MEAN, std=STD), C.HWC2CHW()]
    data_set = data_set.map(operations=trans, input_columns="image", num_parallel_workers=workers)
    data_set = data_set.map(operations=C2.TypeCast(mstype.int32), input_columns="label")
    return data_set.batch(32, drop_remainder=True)


def mindspore_dataset(data: str, workers: int):
    import mindspore as ms
    import mindspore.dataset as ds
    import mindspore.dataset.transforms as C2
    import mindspore.dataset.vision as C

    data_set = ds.ImageFolderDataset(data, num_parallel_workers=workers, shuffle=False)
    trans = [C.Decode(), C.Resize(256), C.CenterCrop(224), C.Normalize(mean=MEAN, std=STD), C.HWC2CHW()]
    data_set = data_set.map(operations=trans, input_columns="image", num_parallel_workers=workers)
    data_set = data_set.map(operations=C2.TypeCast(ms.int32), input_columns="label", num_parallel_workers=workers)
    return data_set.batch(32, drop_remainder=True)


def make(kind: str, data: str, workers: int):
    if kind == "imgfeed":
        return imgfeed_dataset(data, workers)
    if kind == "imgfeed-cv":
        return imgfeed_dataset(data, workers, opencv_linear=True)
    if kind == "bridge":
        return imgfeed_dataset(data, workers).to_mindspore()
    return mindspore_dataset(data, workers)


def iterate(dataset) -> dict:
    n, touched = 0, 0.0
    t0 = time.perf_counter()
    # as MindSpore's Model creates its iterator (dataset_helper._DatasetIterNormal)
    for images, labels in dataset.create_tuple_iterator(num_epochs=1, do_copy=False):
        touched += float(images.asnumpy()[0, 0, 0, 0])
        n += labels.shape[0]
    return {"images": n, "secs": time.perf_counter() - t0}


def model_train(dataset) -> dict:
    import mindspore as ms
    from mindspore import nn, ops
    from mindspore.train import Model

    class Tiny(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(3, 1000)

        def construct(self, x):
            return self.dense(ops.mean(x, (2, 3)))

    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    net = Tiny()
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                  nn.Momentum(net.trainable_params(), 0.01, 0.9))
    n = dataset.get_dataset_size() * 32
    t0 = time.perf_counter()
    model.train(1, dataset, dataset_sink_mode=False)
    return {"images": n, "secs": time.perf_counter() - t0}


def child(kind: str, data: str, workers: int, loop: str) -> dict:
    import mindspore  # noqa: F401  (a training script has; its import takes seconds, never timed)

    dataset = make(kind, data, workers)
    return iterate(dataset) if loop == "iterate" else model_train(dataset)


def run_child(kind: str, data: str, workers: int, loop: str) -> dict:
    cmd = [sys.executable, __file__, data, "--child", kind, "--workers", str(workers), "--loop", loop]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    r["images_per_s"] = r["images"] / r["secs"]
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--loop", choices=["iterate", "model"], default="iterate")
    ap.add_argument("--child", choices=["imgfeed", "imgfeed-cv", "bridge", "mindspore"])
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.data, a.workers, a.loop)))
        return
    contenders = ["imgfeed", "imgfeed-cv", "bridge", "mindspore"]
    results: dict = {c: [] for c in contenders}
    for i in range(a.rounds):
        # alternate the order from round to round
        order = contenders if i % 2 == 0 else contenders[::-1]
        for c in order:
            results[c].append(run_child(c, a.data, a.workers, a.loop))
        print(f"round {i + 1}: " + ", ".join(f"{c} {results[c][-1]['images_per_s']:.1f}/s" for c in contenders),
              flush=True)
    counts = {c: {r["images"] for r in results[c]} for c in contenders}
    print(f"images per epoch: {counts}")
    for c in contenders:
        print(f"median {c}: {statistics.median(r['images_per_s'] for r in results[c]):.1f} images/s")
    for c in ("imgfeed", "imgfeed-cv", "bridge"):
        ratios = [x["images_per_s"] / y["images_per_s"] for x, y in zip(results[c], results["mindspore"])]
        print(f"median ratio {c} / mindspore: {statistics.median(ratios):.2f} (per round: "
              + ", ".join(f"{r:.2f}" for r in ratios) + ")")


if __name__ == "__main__":
    main()
