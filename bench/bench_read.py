"""Reading b2nd files: ``b2store.open(p)[...]`` against ``blosc2.open(p)[...]``, same files.

What it measures
----------------
A float64 array (a smooth 2-D field plus a little noise, fixed seed; 8192 x 4096 = 256 MiB,
or 2048 x 2048 = 32 MiB with ``--quick``) is written by python-blosc2 as two contiguous
``.b2nd`` files in a temporary directory, with the default cparams (zstd, clevel 5, shuffle):
once with python-blosc2's own chunks and blocks (recorded in the output) and once as 2-D
tiles, chunks (1024, 1024) and blocks (128, 256), where a chunk's blocks must be reordered
into the array. On each file, opening included in every call (both libraries open per read):

* full array: ``open(p)[:]`` (results checked equal once, which also warms the page cache);
* chunk region: ``open(p)[region of one middle chunk]``;
* chunk: ``open(p).schunk.decompress_chunk(k)`` (the raw decoded chunk, no reordering);
* element: ``open(p)[i, j]``, 5 random positions per call, time given per element.

python-blosc2 runs twice, interleaved with b2store in the same rounds: with one thread
(``blosc2.set_nthreads(1)``) and with its default thread count. b2store reads arrays with one
thread. Figures are MEDIAN times over the rounds; ratios are speed b2store / blosc2 (> 1:
b2store is faster). Bytes read: for b2store the sum of the sizes ``FileSource.read`` is asked
for (the method is wrapped during one untimed call); for python-blosc2 the growth of
``rchar`` in ``/proc/self/io`` (Linux; bytes of read syscalls, stdio buffering included).
The files sit in the page cache, so this is decoding and copying, not disk speed.

How to run
----------
    python bench/bench_read.py                 # 256 MiB array, 5 rounds (15 seconds or so)
    python bench/bench_read.py --repeat 9      # more rounds
    python bench/bench_read.py --quick         # smoke run: 32 MiB array, 3 rounds
    python bench/bench_read.py --json out.json # also write the results as JSON
"""

from __future__ import annotations

import json
import os
import tempfile

import blosc2
import numpy as np
from _common import parse_args, run_case
from _common import versions as common_versions

import b2store
from b2store.frame.sources import FileSource
from b2store.nd.geometry import chunk_coords, chunk_region, nchunks

TILES = {"chunks": (1024, 1024), "blocks": (128, 256)}
NPOS = 5


def make_field(shape) -> np.ndarray:
    rng = np.random.default_rng(20240603)
    y = (np.arange(shape[0]) / shape[0])[:, None]
    x = (np.arange(shape[1]) / shape[1])[None, :]
    field = np.sin(6.0 * x) * np.cos(4.0 * y) + 0.5 * x * y
    field += rng.normal(0.0, 1e-3, shape)
    return field


def b2store_bytes(f) -> int:
    """Bytes b2store asks FileSource.read for during one call of ``f``."""
    total, orig = [0], FileSource.read

    def counting(self, offset, size):
        total[0] += size
        return orig(self, offset, size)

    FileSource.read = counting
    try:
        f()
    finally:
        FileSource.read = orig
    return total[0]


def blosc2_bytes(f, div: int) -> int | None:
    """Growth of ``rchar`` (bytes of read syscalls) in /proc/self/io in one call of f, / div."""

    def rchar():
        with open("/proc/self/io") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))

    try:
        before = rchar()
        f()
        return (rchar() - before) // div
    except (OSError, StopIteration):  # not Linux
        return None


def cases(p: str, shape, chunks, nt_default: int, rng):
    k = nchunks(shape, chunks) // 2
    region = chunk_region(chunk_coords(k, shape, chunks), shape, chunks)
    pos = [tuple(int(rng.integers(n)) for n in shape) for _ in range(NPOS)]

    def b2(nt, f):
        def opener(path):
            blosc2.set_nthreads(nt)  # blosc2.open takes its dparams from the global
            return blosc2.open(path)

        return lambda: f(opener)

    def decompress_chunk(a):  # a stays alive: blosc2 frees a temporary NDArray's schunk
        return a.schunk.decompress_chunk(k)

    reads = {  # name: (calls per round, the read given an opener)
        "full array": (1, lambda op: op(p)[:]),
        f"chunk region {tuple((s.start, s.stop) for s in region)}": (1, lambda op: op(p)[region]),
        f"chunk {k} (schunk.decompress_chunk)": (1, lambda op: decompress_chunk(op(p))),
        f"element ({NPOS} random, per element)": (NPOS, lambda op: [op(p)[ij] for ij in pos]),
    }
    for name, (div, f) in reads.items():
        funcs = {
            "b2store": lambda f=f: f(b2store.open),
            "blosc2_1t": b2(1, f),
            "blosc2_nt": b2(nt_default, f),
        }
        yield name, div, funcs


def main() -> None:
    args, repeat = parse_args(__doc__, 5, "32 MiB array, 3 rounds")
    shape = (2048, 2048) if args.quick else (8192, 4096)
    nt = blosc2.nthreads  # python-blosc2's default, before any set_nthreads
    versions = common_versions()
    print(
        " ".join(f"{k} {v}" for k, v in versions.items())
        + f"; {repeat} rounds; b2store 1 thread, blosc2 1 and {nt} threads; {os.cpu_count()} cores"
    )
    rows, layouts = [], []
    with tempfile.TemporaryDirectory(prefix="bench_read_") as tmp:
        data = make_field(shape)
        for name, kw in (("default", {}), ("tiles", TILES)):
            p = os.path.join(tmp, f"{name}.b2nd")
            a = blosc2.asarray(data, urlpath=p, mode="w", contiguous=True, **kw)
            layouts.append(
                {
                    "layout": name,
                    "path": p,
                    "chunks": a.chunks,
                    "blocks": a.blocks,
                    "nchunks": a.schunk.nchunks,
                    "cratio": a.schunk.cratio,
                }
            )
            del a
        print(f"array {shape} float64, {data.nbytes / 2**20:.0f} MiB, zstd clevel 5 shuffle")
        del data
        for lay in layouts:
            print(
                f"- {lay['layout']}: chunks {lay['chunks']}, blocks {lay['blocks']}, "
                f"{lay['nchunks']} chunks, cratio {lay['cratio']:.2f}"
            )
        cols = [
            "layout",
            "read",
            "b2store ms",
            "blosc2 1 thr ms",
            "ratio (1 thr)",
            f"blosc2 {nt} thr ms",
            f"ratio ({nt} thr)",
            "b2store bytes read",
            "blosc2 bytes read (rchar)",
        ]
        print("\n| " + " | ".join(cols) + " |")
        print("|" + "|".join("---" if i < 2 else "---:" for i in range(len(cols))) + "|")
        rng = np.random.default_rng(20240604)
        for lay in layouts:
            p = lay["path"]
            blosc2.set_nthreads(1)
            got, want = b2store.open(p)[:], blosc2.open(p)[:]
            assert np.array_equal(got, want), f"{lay['layout']}: b2store and blosc2 differ"
            del got, want
            for read, div, funcs in cases(p, blosc2.open(p).shape, lay["chunks"], nt, rng):
                # run_case gives nbytes / median / 1e9: with nbytes = 1e9, 1 / median seconds.
                s = {n: 1.0 / v / div for n, v in run_case(funcs, 10**9, repeat).items()}
                row = {
                    "layout": lay["layout"],
                    "read": read,
                    "seconds": s,
                    "ratio_1t": s["blosc2_1t"] / s["b2store"],
                    "ratio_nt": s["blosc2_nt"] / s["b2store"],
                    "b2store_bytes": b2store_bytes(funcs["b2store"]) // div,
                    "blosc2_bytes": blosc2_bytes(funcs["blosc2_1t"], div),
                }
                b2b = "n/a" if row["blosc2_bytes"] is None else f"{row['blosc2_bytes']:,}"
                rows.append(row)
                print(
                    f"| {lay['layout']} | {read} | {s['b2store'] * 1e3:.3f} | "
                    f"{s['blosc2_1t'] * 1e3:.3f} | {row['ratio_1t']:.2f} | "
                    f"{s['blosc2_nt'] * 1e3:.3f} | {row['ratio_nt']:.2f} | "
                    f"{row['b2store_bytes']:,} | {b2b} |",
                    flush=True,
                )
    full = [r for r in rows if r["read"] == "full array"]
    print(
        "\nfull read, b2store / blosc2 speed (target >= 0.7): "
        + "; ".join(
            f"{r['layout']} {r['ratio_1t']:.2f} (1 thr), {r['ratio_nt']:.2f} ({nt} thr)"
            for r in full
        )
    )
    if args.json:
        for lay in layouts:
            del lay["path"]
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "versions": versions,
                    "repeat": repeat,
                    "shape": shape,
                    "blosc2_default_nthreads": nt,
                    "layouts": layouts,
                    "rows": rows,
                },
                fh,
                indent=2,
            )


if __name__ == "__main__":
    main()
