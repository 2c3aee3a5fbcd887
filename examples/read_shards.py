#!/usr/bin/env python3
"""Read an imgfeed shards dataset with numpy alone (format: docs/shards.md).

    python3 examples/read_shards.py DIR

prints one line per sample: its name and label, then for `raw` storage the pixel array's
shape and the sum of its values, for `jpeg`/`original` storage the size of the encoded file
(decode it with any JPEG library: Pillow's `Image.open(io.BytesIO(data))`). Every record's
CRC-32 is checked, as imgfeed checks it.

`ShardsReader` is the part to copy: random access by index, memory-mapped, no decoding.
"""

import json
import sys
import zlib
from pathlib import Path

import numpy as np

VERSION = 1
HEADER_LEN = 32
ENTRY = np.dtype(
    [
        ("offset", "<u8"),
        ("length", "<u8"),
        ("name_offset", "<u8"),
        ("shard", "<u4"),
        ("crc32", "<u4"),
        ("height", "<u4"),
        ("width", "<u4"),
        ("labels", "<u4", (2,)),
        ("name_len", "<u4"),
        ("reserved", "<u4"),
    ]
)
assert ENTRY.itemsize == 56


def check_header(buf, magic, path):
    if bytes(buf[:8]) != magic:
        raise ValueError(f"{path}: bad magic")
    version = int(np.frombuffer(buf, "<u4", 1, 8)[0])
    if version != VERSION:
        raise ValueError(f"{path}: format version {version}, this reader reads {VERSION}")
    field = int(np.frombuffer(buf, "<u4", 1, 12)[0])
    count = int(np.frombuffer(buf, "<u8", 1, 16)[0])
    return field, count


class ShardsReader:
    def __init__(self, root):
        self.root = Path(root)
        self.manifest = json.loads((self.root / "manifest.json").read_text())
        m = self.manifest
        if m.get("format") != "imgfeed-shards" or m.get("version") != VERSION:
            raise ValueError(f"{root}: not a version-{VERSION} imgfeed shards dataset")
        self.storage = m["storage"]
        self.label_columns = m["label_columns"]
        self.classes = {name: label for name, label in m["classes"]}
        index = self._map(m["index"])
        entry_len, count = check_header(index, b"IMGFINDX", m["index"]["file"])
        if entry_len != ENTRY.itemsize or count != m["samples"]:
            raise ValueError("index header does not match the manifest")
        self.index = np.frombuffer(index, ENTRY, count, HEADER_LEN)
        self.names = self._map(m["names"])
        self.shards = []
        for f in m["shards"]:
            shard = self._map(f, check_crc=False)  # records are checked one by one
            check_header(shard, b"IMGFSHRD", f["file"])
            self.shards.append(shard)

    def _map(self, f, check_crc=True):
        path = self.root / f["file"]
        if path.stat().st_size != f["size"]:
            raise ValueError(f"{path}: size differs from the manifest (truncated?)")
        buf = np.memmap(path, np.uint8, "r") if f["size"] else np.zeros(0, np.uint8)
        if check_crc and zlib.crc32(buf) != f["crc32"]:
            raise ValueError(f"{path}: checksum mismatch")
        return buf

    def __len__(self):
        return len(self.index)

    def name(self, i):
        e = self.index[i]
        start = int(e["name_offset"])
        return bytes(self.names[start : start + int(e["name_len"])]).decode("utf-8")

    def labels(self, i):
        return self.index[i]["labels"][: self.label_columns]

    def __getitem__(self, i):
        """Sample i: (uint8 HWC array for raw storage, or the encoded bytes, labels)."""
        e = self.index[i]
        start = int(e["offset"])
        record = self.shards[int(e["shard"])][start : start + int(e["length"])]
        if zlib.crc32(record) != int(e["crc32"]):
            shard = self.manifest["shards"][int(e["shard"])]["file"]
            raise ValueError(f"{self.name(i)}: checksum mismatch in {shard}")
        if self.storage == "raw":
            image = np.asarray(record).reshape(int(e["height"]), int(e["width"]), 3)
        else:
            image = bytes(record)
        return image, self.labels(i)


def main():
    reader = ShardsReader(sys.argv[1])
    print(f"{sys.argv[1]}: {len(reader)} samples, {reader.storage} storage")
    for i in range(len(reader)):
        image, labels = reader[i]
        label = " ".join(str(int(v)) for v in labels)
        if isinstance(image, np.ndarray):
            print(f"{reader.name(i)} {label} {image.shape} {int(image.sum(dtype=np.uint64))}")
        else:
            print(f"{reader.name(i)} {label} {len(image)} bytes")


if __name__ == "__main__":
    main()
