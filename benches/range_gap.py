#!/usr/bin/env python3
"""What one ranged GET costs, in bytes of transfer, on a loopback store: the measure behind
range mode's coalescing gap (`GAP` in src/store/ranges.rs, docs/object-storage.md).

  unshare -n sh -c 'ip link set lo up && python3 benches/range_gap.py gcs'   # or moto

Puts one 32 MiB object, then GETs ranges of 1 KiB to 4 MiB at random offsets, one at a
time on one keep-alive connection (60 of each, 20 of the largest), and fits the median
times to t = a + b * size: a / b is what a request costs in bytes. moto_server reads the
whole object for every range (Python), so its figure depends on the object's size."""
import http.client, random, statistics, sys, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from store_cache import Server

kind = sys.argv[1]
s = Server(kind)
try:
    s.create("gap")
    blob = random.randbytes(32 << 20)
    s.put("gap", "obj", blob)
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    path = s.get_path("gap", "obj")
    pts = []
    for size in [1024, 64 << 10, 256 << 10, 1 << 20, 4 << 20]:
        n = 60 if size <= (1 << 20) else 20
        t = []
        for _ in range(n):
            off = random.randrange(0, len(blob) - size)
            t0 = time.perf_counter()
            c.request("GET", path, headers={"Range": f"bytes={off}-{off + size - 1}"})
            r = c.getresponse(); d = r.read()
            t.append(time.perf_counter() - t0)
            assert r.status == 206 and len(d) == size, (r.status, len(d))
        pts.append((size, statistics.median(t)))
        print(f"{kind}: {size:>8} B: {statistics.median(t) * 1e3:.2f} ms per GET")
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    print(f"{kind}: a GET costs {a * 1e3:.2f} ms + {b * 1e9:.2f} ns/B ({1 / b / 1e6:.0f} MB/s): "
          f"a request = {a / b / 1024:.0f} KiB of transfer")
finally:
    s.close()
