"""Beyond run_all's two datasets: chunk sizes, item sizes, bytedelta, and arrays of other shapes.

``run_all.py`` measures what the performance issue names: 8 MB chunks of two dtypes, and one
256 MiB array whose blocks are whole rows. Data often looks otherwise, and these cases were
where b2store lost the most when they were first measured:

* chunks of 32 KB, 256 KB and 2 MB of float32, int16, uint8 and float64 (a random walk),
  with zstd+shuffle, lz4+shuffle+bytedelta, blosclz+bitshuffle, lz4+shuffle and
  lz4+delta+shuffle in blocks of 32 KB: decode and
  encode with one thread in both libraries (``b2store.decode_chunk``/``encode_chunk`` against
  ``blosc2.decompress2``/``compress2``);
* arrays written by python-blosc2 and read by both (``open(p)[...]``) with each library's
  default threads: 4096x4096 float32 in 256x256 chunks, 2000x2000 int16 in 100x100 chunks
  (lz4), 512x512x64 float64 in 64^3 chunks of 16^3 blocks, 20,000,000 uint8 in 1 MB chunks
  (lz4): the whole array, one element, a box of a tenth of each dimension (a few chunks,
  partly), a layer one item thick along the last dimension (every chunk, partly; not of the
  1-d array), and the whole array written by ``asarray`` (same chunks and blocks, to a path
  written in the round before).

Every figure is a median over rounds in which the two libraries alternate; ratios are speed
b2store / python-blosc2 (> 1: b2store is faster). Nothing is asserted.

    python bench/bench_shapes.py            # about two minutes on 2 cores
    python bench/bench_shapes.py --quick    # smoke run
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import blosc2
import numpy as np
from _common import gmean, parse_args, run_case, versions

import b2store

CHUNK_BYTES = (32 << 10, 256 << 10, 2 << 20)
DTYPES = ("float32", "int16", "uint8", "float64")
# (codec, filters, blocksize: 0 for each library's own choice, the same for both)
PIPELINES = {
    "zstd shuffle": ("zstd", ["shuffle"], 0),
    "lz4 shuffle+bytedelta": ("lz4", ["shuffle", "bytedelta"], 0),
    "blosclz bitshuffle": ("blosclz", ["bitshuffle"], 0),
    "lz4 shuffle": ("lz4", ["shuffle"], 0),
    # DELTA codes every block against the first: blocks of 32 KB make several of them.
    "lz4 delta+shuffle, 32 KB blocks": ("lz4", ["delta", "shuffle"], 32 << 10),
}
ARRAYS = [
    ((4096, 4096), "float32", (256, 256), None, "zstd"),
    ((2000, 2000), "int16", (100, 100), None, "lz4"),
    ((512, 512, 64), "float64", (64, 64, 64), (16, 16, 16), "zstd"),
    ((20_000_000,), "uint8", (1_000_000,), None, "lz4"),
]


def walk(dtype: str, n: int, rng) -> np.ndarray:
    x = np.cumsum(rng.normal(size=n))
    return (x * 0.01).astype(dtype) if np.dtype(dtype).kind == "f" else (x * 10).astype(dtype)


def chunks(repeat: int, quick: bool) -> list[dict]:
    rng = np.random.default_rng(5)
    rows = []
    print("\n| chunk | dtype | pipeline | decode us (b2store / blosc2) | vs blosc2 "
          "| encode us (b2store / blosc2) | vs blosc2 |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---:|")
    for nbytes in CHUNK_BYTES[:1] if quick else CHUNK_BYTES:
        for dtype in DTYPES:
            data = walk(dtype, nbytes // np.dtype(dtype).itemsize, rng)
            for name, (codec, filters, blocksize) in PIPELINES.items():
                ids = [blosc2.Filter[f.upper()] for f in filters]
                kw = dict(typesize=data.itemsize, codec=blosc2.Codec[codec.upper()], clevel=5,
                          filters=ids, filters_meta=[0] * len(ids), blocksize=blocksize,
                          nthreads=1)  # fmt: skip
                c = blosc2.compress2(data, **kw)
                assert b2store.decode_chunk(c).tobytes() == data.tobytes()
                # Enough rounds for a median of small times, as few for the large ones.
                rounds = max(repeat, min(200, (2 << 20) // nbytes * repeat))
                dec = run_case(
                    {"b2store": lambda c=c: b2store.decode_chunk(c, nthreads=1),
                     "blosc2": lambda c=c: blosc2.decompress2(c, nthreads=1)},
                    nbytes, rounds,
                )  # fmt: skip
                enc = run_case(
                    {"b2store": lambda d=data, co=codec, f=filters, b=blocksize or None: (
                        b2store.encode_chunk(d, codec=co, clevel=5, filters=f, blocksize=b,
                                             nthreads=1)),
                     "blosc2": lambda d=data, kw=kw: blosc2.compress2(d, **kw)},
                    nbytes, rounds,
                )  # fmt: skip
                us = {k: {n: nbytes / v / 1e3 for n, v in g.items()} for k, g in
                      (("decode", dec), ("encode", enc))}  # fmt: skip
                r = {"chunk_bytes": nbytes, "dtype": dtype, "pipeline": name, "us": us,
                     "decode": dec["b2store"] / dec["blosc2"],
                     "encode": enc["b2store"] / enc["blosc2"]}  # fmt: skip
                rows.append(r)
                dec_us, enc_us = us["decode"], us["encode"]
                print(f"| {nbytes >> 10} KB | {dtype} | {name} "
                      f"| {dec_us['b2store']:.1f} / {dec_us['blosc2']:.1f} | {r['decode']:.2f} "
                      f"| {enc_us['b2store']:.1f} / {enc_us['blosc2']:.1f} "
                      f"| {r['encode']:.2f} |", flush=True)  # fmt: skip
    dec, enc = gmean([r["decode"] for r in rows]), gmean([r["encode"] for r in rows])
    print(f"\nchunks, geometric mean vs python-blosc2: decode {dec:.2f}x, encode {enc:.2f}x")
    return rows


def arrays(repeat: int, quick: bool) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    tmp = tempfile.mkdtemp(prefix="b2store-bench-")
    print("\n| array | chunks | codec | what | b2store ms | blosc2 ms | vs blosc2 |")
    print("|---|---|---|---|---:|---:|---:|")
    try:
        for shape, dtype, chunkshape, blocks, codec in ARRAYS[:2] if quick else ARRAYS:
            n = int(np.prod(shape))
            x = walk(dtype, n, rng).reshape(shape) if dtype != "uint8" else (
                np.arange(n) // 7).astype(dtype)  # fmt: skip
            kw = {"chunks": chunkshape} | ({"blocks": blocks} if blocks else {})
            mine, theirs = os.path.join(tmp, "b2store.b2nd"), os.path.join(tmp, "blosc2.b2nd")
            cparams = {"codec": blosc2.Codec[codec.upper()]}
            blosc2.asarray(x, urlpath=theirs, mode="w", cparams=cparams, **kw)
            cases = _array_cases(x, kw, codec, mine, theirs)
            label = "x".join(map(str, shape)) + f" {dtype}"
            for what, (f, g) in cases.items():
                rounds = repeat if "write" in what or "whole" in what else 5 * repeat
                # run_case gives nbytes / seconds / 1e9: with nbytes 1, 1e-9 / seconds.
                got = run_case({"b2store": f, "blosc2": g}, 1, rounds)
                s = {k: 1e-9 / v for k, v in got.items()}
                r = {"array": label, "chunks": chunkshape, "what": what, "seconds": s,
                     "vs_blosc2": s["blosc2"] / s["b2store"]}  # fmt: skip
                rows.append(r)
                print(f"| {label} | {'x'.join(map(str, chunkshape))} | {codec} | {what} "
                      f"| {s['b2store'] * 1e3:.3f} | {s['blosc2'] * 1e3:.3f} "
                      f"| {r['vs_blosc2']:.2f} |", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def _array_cases(x, kw, codec, mine, theirs) -> dict:
    """The four timings of one array: (b2store, python-blosc2) callables by name."""
    cparams = {"codec": blosc2.Codec[codec.upper()]}
    blosc2.asarray(x, urlpath=theirs, mode="w", cparams=cparams, **kw)
    a, b = b2store.open(theirs), blosc2.open(theirs)
    at = tuple(s // 3 for s in x.shape)
    box = tuple(slice(s // 3, s // 3 + max(1, s // 10)) for s in x.shape)
    assert np.array_equal(a[box], b[box])
    # One item thick along the last dimension, across every chunk: a few blocks of each.
    layer = (slice(None),) * (x.ndim - 1) + (slice(x.shape[-1] // 3, x.shape[-1] // 3 + 1),)
    cases = {
        "write (asarray)": (
            lambda: b2store.asarray(x, urlpath=mine, mode="w", codec=codec, **kw),
            lambda: blosc2.asarray(x, urlpath=theirs + "2", mode="w", cparams=cparams, **kw),
        ),
        "whole read": (lambda: b2store.open(theirs)[:], lambda: blosc2.open(theirs)[:]),
        "one element (held open)": (lambda: a[at], lambda: b[at]),
        "a tenth of each dimension (held open)": (lambda: a[box], lambda: b[box]),
    }
    if x.ndim > 1:
        cases["a layer of the last dimension (held open)"] = (lambda: a[layer], lambda: b[layer])
    return cases


def main() -> None:
    args, repeat = parse_args(__doc__, 7, "3 rounds, fewer cases")
    print("versions:", ", ".join(f"{k} {v}" for k, v in versions().items()))
    result = {"chunks": chunks(repeat, args.quick), "arrays": arrays(repeat, args.quick)}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
