"""The fixed cost around b2store's kernels per call, against the C libraries (issue 37).

What it measures
----------------
In one process, interleaved round by round (a new order each round), medians in microseconds:

* ``decode``: ``b2store.decode_chunk`` against ``blosc2.decompress2`` on a 128 kB float32
  chunk (a random walk, shuffle, clevel 5) of every codec (LZ4, BloscLZ, Zstd, zlib), and on a
  4 kB chunk, where the call's fixed cost is most of the time;
* ``numcodecs``: the numcodecs codec ``blosc2`` against ``numcodecs.Blosc`` on the same
  128 kB data: decode of numcodecs' Blosc1 chunk (a new buffer, and into a float32 ``out`` as
  zarr passes it), and encode (against ``blosc2.compress2`` too: c-blosc1 picks other block
  sizes and Zstd levels, so only python-blosc2 writes the same bytes);
* ``small``: one element and a slab ``[k, 40:60]`` of an open ``.b2nd`` array, in the layout
  python-blosc2 picks by default (Zstd level 1) for a 4096x8192 float32, a 1000x1000
  float64 and a 100x200x300 float32, and a 3000x3000 uint8 of noise (stored raw), against
  python-blosc2's array;
* the Python calls one b2store call makes (``sys.setprofile``), where it matters.

Ratios are b2store's speed over the other's (> 1: b2store is faster). One thread throughout.
No timed assertions: the numbers are informative.

How to run
----------
    python bench/bench_fixed_cost.py               # 2001 rounds (a minute or two)
    python bench/bench_fixed_cost.py --quick       # smoke run
    python bench/bench_fixed_cost.py --json out.json
"""

from __future__ import annotations

import json
import operator
import os
import statistics
import sys
import tempfile
import time
from functools import partial

import blosc2
import numcodecs
import numcodecs.blosc
import numpy as np
from _common import parse_args, round_orders
from _common import versions as common_versions

import b2store
from b2store.integrations.numcodecs.codec import Blosc2

CODECS = {
    "lz4": blosc2.Codec.LZ4,
    "blosclz": blosc2.Codec.BLOSCLZ,
    "zstd": blosc2.Codec.ZSTD,
    "zlib": blosc2.Codec.ZLIB,
}
SHAPES = [((4096, 8192), np.float32), ((1000, 1000), np.float64), ((100, 200, 300), np.float32)]
# Data that does not compress: python-blosc2 stores its chunks raw (no block starts).
NOISE = ((3000, 3000), np.uint8)


def medians(funcs: dict, repeat: int) -> dict[str, float]:
    """Median microseconds per contender; one call each per round, in a new order each round."""
    names = list(funcs)
    times: dict[str, list[float]] = {n: [] for n in names}
    for order in round_orders(names, repeat):
        for name in order:
            f = funcs[name]
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    return {n: statistics.median(ts) * 1e6 for n, ts in times.items()}


def python_calls(f) -> int:
    """The Python functions and builtins one call of ``f`` enters."""
    f()
    n = [0]

    def count(frame, event, arg):
        if event in ("call", "c_call"):
            n[0] += 1

    sys.setprofile(count)
    f()
    sys.setprofile(None)
    return n[0] - 1  # setprofile


def walk(shape, dtype) -> np.ndarray:
    rng = np.random.default_rng(37)
    return np.cumsum(rng.normal(size=shape), axis=-1).astype(dtype)


def decode_rows(repeat: int) -> list[dict]:
    rows = []
    for nitems in (32768, 1024):
        data = walk(nitems, np.float32)
        for name, codec in CODECS.items():
            chunk = blosc2.compress2(
                data, typesize=4, codec=codec, clevel=5, filters=[blosc2.Filter.SHUFFLE]
            )
            assert bytes(b2store.decode_chunk(chunk)) == data.tobytes()
            t = medians(
                {
                    "b2store": partial(b2store.decode_chunk, chunk),
                    "blosc2": partial(blosc2.decompress2, chunk, nthreads=1),
                },
                repeat,
            )
            rows.append(
                {
                    "case": f"decode_chunk {data.nbytes >> 10} kB {name}",
                    "us": t,
                    "ratio": t["blosc2"] / t["b2store"],
                    "calls": python_calls(partial(b2store.decode_chunk, chunk)),
                }
            )
    return rows


def numcodecs_rows(repeat: int) -> list[dict]:
    data = walk((64, 512), np.float32)
    rows = []
    for name, codec in list(CODECS.items())[:3]:
        theirs = numcodecs.Blosc(cname=name, clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
        ours = Blosc2(cname=name, clevel=5)
        chunk = theirs.encode(data)
        out = np.empty_like(data)
        assert np.array_equal(ours.decode(chunk, out=out), data)
        cases = {
            "decode": (
                {
                    "b2store": partial(ours.decode, chunk),
                    "numcodecs": partial(theirs.decode, chunk),
                },
                "numcodecs",
            ),
            "decode into out": (
                {
                    "b2store": partial(ours.decode, chunk, out=out),
                    "numcodecs": partial(theirs.decode, chunk, out=out),
                },
                "numcodecs",
            ),
            "encode": (
                {
                    "b2store": partial(ours.encode, data),
                    "numcodecs": partial(theirs.encode, data),
                    "blosc2": partial(
                        blosc2.compress2,
                        data,
                        typesize=4,
                        codec=codec,
                        clevel=5,
                        filters=[blosc2.Filter.SHUFFLE],
                    ),
                },
                "numcodecs",
            ),
        }
        for what, (funcs, other) in cases.items():
            t = medians(funcs, repeat)
            row = {
                "case": f"codec {what} 128 kB {name}",
                "us": t,
                "ratio": t[other] / t["b2store"],
                "calls": python_calls(funcs["b2store"]),
            }
            if "blosc2" in t:
                row["ratio_vs_blosc2"] = t["blosc2"] / t["b2store"]
            rows.append(row)
    return rows


def small_rows(repeat: int, tmp: str) -> list[dict]:
    rows = []
    for shape, dtype in [*SHAPES, NOISE]:
        path = os.path.join(tmp, "x".join(map(str, shape)) + ".b2nd")
        if (shape, dtype) == NOISE:
            data = np.random.default_rng(38).integers(0, 256, shape, dtype)
        else:
            data = walk(shape, dtype)
        blosc2.asarray(data, urlpath=path, mode="w", cparams={"clevel": 1})
        theirs, ours = blosc2.open(path), b2store.open(path)
        k = tuple(n // 3 for n in shape)
        slab = (k[0], slice(40, 60))
        assert ours[k] == theirs[k] and np.array_equal(ours[slab], theirs[slab])
        for what, key in (("one element", k), ("slab [k, 40:60]", slab)):
            mine = partial(operator.getitem, ours, key)
            t = medians({"b2store": mine, "blosc2": partial(operator.getitem, theirs, key)}, repeat)
            rows.append(
                {
                    "case": f"{what} of {shape} {np.dtype(dtype).name} "
                    f"(chunks {theirs.chunks}, blocks {theirs.blocks}"
                    f"{', noise: stored raw' if (shape, dtype) == NOISE else ''})",
                    "us": t,
                    "ratio": t["blosc2"] / t["b2store"],
                    "calls": python_calls(mine),
                }
            )
    return rows


def main() -> None:
    args, repeat = parse_args(__doc__, 2001, "51 rounds")
    repeat = 51 if args.quick else repeat
    blosc2.set_nthreads(1)
    numcodecs.blosc.set_nthreads(1)
    versions = common_versions()
    print(" ".join(f"{k} {v}" for k, v in versions.items()) + f"; {repeat} rounds, 1 thread")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print("| case | b2store us | other us | ratio | b2store's Python calls |")
    print("|---|---:|---:|---:|---:|")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for part in (decode_rows, numcodecs_rows, lambda r: small_rows(r, tmp)):
            for row in part(repeat):
                rows.append(row)
                others = [v for k, v in row["us"].items() if k != "b2store"]
                extra = (
                    f" ({row['ratio_vs_blosc2']:.2f} vs blosc2)" if "ratio_vs_blosc2" in row else ""
                )
                print(
                    f"| {row['case']} | {row['us']['b2store']:.1f} | {others[0]:.1f} | "
                    f"{row['ratio']:.2f}{extra} | {row['calls']} |",
                    flush=True,
                )
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"versions": versions, "repeat": repeat, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
