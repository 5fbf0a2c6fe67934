"""Whole reads of arrays in many small chunks, one thread and two, against python-blosc2.

What it measures
----------------
Arrays written by python-blosc2 (fixed seeds) in chunks of 8 to 64 kB, read whole by
``b2store.open(p)[...]`` and ``blosc2.open(p)[...]`` (opened once, outside the timing), with
``set_nthreads(n)`` in both libraries, n = 1 and 2:

* 2000x2000 int16 in 100x100 chunks (one block each), LZ4: the issue's small 2-d case;
* the same in 100x100 chunks of 50x100 blocks, Zstd;
* 256x256x256 float32 in 32^3 chunks of 16^3 blocks, Zstd (a 3-d field);
* 4,000,000 float64 in 8,192-item chunks, LZ4 (a long 1-d series);
* the 2-d LZ4 array read without its first and last row and column (the chunks along the
  edges cut, the others whole).

Rounds alternate the libraries and rotate their order. Reported: median milliseconds per
read and the ratio of speeds (b2store over python-blosc2; above 1, b2store is faster). No
timed assertions: the numbers are informative.

How to run
----------
    python bench/bench_small_chunks.py                 # 15 rounds (about a minute)
    python bench/bench_small_chunks.py --quick         # smoke run
    python bench/bench_small_chunks.py --json out.json # also write the results as JSON
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import blosc2
import numpy as np
from _common import parse_args, run_case, versions

import b2store
from b2store.chunk import native

CASES = [
    ("2000x2000 int16, 100x100 chunks, lz4", (2000, 2000), "int16", (100, 100), None, "LZ4"),
    ("2000x2000 int16, 100x100 chunks of 50x100, zstd", (2000, 2000), "int16", (100, 100),
     (50, 100), "ZSTD"),
    ("256^3 float32, 32^3 chunks of 16^3, zstd", (256, 256, 256), "float32", (32, 32, 32),
     (16, 16, 16), "ZSTD"),
    ("4,000,000 float64, 8192-item chunks, lz4", (4_000_000,), "float64", (8192,), None, "LZ4"),
]  # fmt: skip


def field(shape, dtype, rng) -> np.ndarray:
    x = np.cumsum(rng.normal(size=int(np.prod(shape)))).reshape(shape)
    return (x * 0.01).astype(dtype) if np.dtype(dtype).kind == "f" else (x * 10).astype(dtype)


def main() -> None:
    args, repeat = parse_args(__doc__, 15, "3 rounds")
    print("versions:", ", ".join(f"{k} {v}" for k, v in versions().items()))
    rng = np.random.default_rng(11)
    tmp = tempfile.mkdtemp(prefix="b2store-bench-")
    rows = []
    print("\n| array | read | threads | b2store ms | blosc2 ms | vs blosc2 |")
    print("|---|---|---|---:|---:|---:|")
    try:
        for k, (label, shape, dtype, chunks, blocks, codec) in enumerate(CASES):
            x = field(shape, dtype, rng)
            path = os.path.join(tmp, f"a{k}.b2nd")
            kw = {"chunks": chunks} | ({"blocks": blocks} if blocks else {})
            cparams = {"codec": blosc2.Codec[codec], "clevel": 5}
            blosc2.asarray(x, urlpath=path, mode="w", cparams=cparams, **kw)
            a, b = b2store.open(path), blosc2.open(path)
            keys = {"whole": ...}
            if k == 0:
                keys["all but the edges"] = tuple(slice(1, n - 1) for n in shape)
            for what, key in keys.items():
                assert np.array_equal(a[key], x[key]) and np.array_equal(b[key], x[key])
                for n in (1, 2):
                    native.set_nthreads(n)
                    blosc2.set_nthreads(n)
                    got = run_case({"b2store": lambda a=a, key=key: a[key],
                                    "blosc2": lambda b=b, key=key: b[key]}, 1, repeat)  # fmt: skip
                    s = {name: 1e-9 / v for name, v in got.items()}
                    r = {"array": label, "read": what, "threads": n, "seconds": s,
                         "vs_blosc2": s["blosc2"] / s["b2store"]}  # fmt: skip
                    rows.append(r)
                    print(f"| {label} | {what} | {n} | {s['b2store'] * 1e3:.2f} "
                          f"| {s['blosc2'] * 1e3:.2f} | {r['vs_blosc2']:.2f} |",
                          flush=True)  # fmt: skip
    finally:
        native.set_nthreads(None)
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
