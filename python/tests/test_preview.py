"""``imgfeed.preview`` (issue 33): the same contact sheet as ``imgfeed preview``, from the same
native code, as a PIL image; loaders, pipelines and datasets show it in Jupyter
(``_repr_png_``)."""

from __future__ import annotations

import io
import subprocess

import pytest
from conftest import PIPELINES, REPO, TREE, _binary
from PIL import Image

import imgfeed
import imgfeed.dataset as ds
import imgfeed.dataset.vision as vision


def cli_png(tmp_path, *args: str) -> bytes:
    out = tmp_path / "p.png"
    run = subprocess.run([str(_binary()), "preview", *args, "--out", str(out)], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    return out.read_bytes()


def test_preview_of_a_loader_is_the_commands_sheet(tmp_path):
    loader = imgfeed.Loader(str(PIPELINES / "resnet50_train.toml"), data=str(TREE), batch_size=6, workers=2)
    image = imgfeed.preview(loader, count=6, with_source=True, tile=64)
    assert isinstance(image, Image.Image) and image.mode == "RGB"
    want = Image.open(
        io.BytesIO(
            cli_png(
                tmp_path,
                "pipelines/resnet50_train.toml",
                "--data",
                str(TREE),
                "--batch-size",
                "6",
                "--count",
                "6",
                "--with-source",
                "--tile",
                "64",
            )
        )
    )
    assert image.size == want.size
    assert image.tobytes() == want.convert("RGB").tobytes()
    # the loader's epoch is the sheet's: another epoch draws other crops
    loader.set_epoch(1)
    assert imgfeed.preview(loader, count=6, with_source=True, tile=64).tobytes() != image.tobytes()


def test_pipelines_and_datasets_show_themselves_in_jupyter():
    pipeline = imgfeed.Pipeline.from_file(PIPELINES / "cifar10_train.toml").replace(batch_size=15)
    png = pipeline._repr_png_()
    assert png is not None and png.startswith(b"\x89PNG\r\n\x1a\n")
    assert Image.open(io.BytesIO(png)).size == imgfeed.preview(pipeline, count=8).size
    dataset = ds.ImageFolderDataset(str(TREE), shuffle=False)
    dataset = dataset.map(operations=[vision.Decode(), vision.Resize((32, 32))], input_columns="image").batch(4)
    sheet = imgfeed.preview(dataset, count=4)
    assert sheet.size[0] > 2 * 32
    assert dataset._repr_png_() is not None
    with pytest.raises(TypeError, match="imgfeed.preview takes"):
        imgfeed.preview(object())
