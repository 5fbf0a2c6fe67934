"""The whole performance table in one command: chunks and arrays vs python-blosc2, numcodecs.

What it measures
----------------
Chunk decode and encode: the two 8 MB datasets of ``_common.make_datasets`` (float64, int32)
at clevel 5 with every codec (blosclz, lz4, lz4hc, zlib, zstd) and shuffle or bitshuffle, with
1 and 2 threads in every library:

* decode: ``b2store.decode_chunk(c, nthreads=t)`` and ``blosc2.decompress2(c, nthreads=t)`` on
  the Blosc2 chunk python-blosc2 wrote; ``b2store.decode_chunk`` and ``numcodecs.Blosc.decode``
  on the Blosc1 chunk numcodecs wrote (``numcodecs.blosc.set_nthreads(t)``);
* encode: ``b2store.encode_chunk(..., nthreads=t)``, ``blosc2.compress2(..., nthreads=t)`` and
  ``numcodecs.Blosc.encode``, with the compressed sizes.

Arrays: a float64 array (8192 x 4096 = 256 MiB; 2048 x 2048 = 32 MiB with ``--quick``),
python-blosc2's default chunks and blocks, zstd clevel 5 shuffle, written by python-blosc2
to a ``.b2nd`` file (page cache), read with 1 and 2 threads in both libraries (open included):
the whole array ``open(p)[:]``, one element ``open(p)[i, j]`` (5 random positions), and a
slab ``open(p)[i]`` (one row, 32 kB), the last two also of an array opened once
beforehand (the issue's "one element of an open array"); plus the whole array written by
``b2store.asarray`` and ``blosc2.asarray`` (``urlpath``, same chunks and blocks), over the
last round's file and to a new file (removed, and the page cache synced, outside the timing),
and the peak resident memory a whole read adds beyond its output (in a fresh process; Linux).

Every figure is a MEDIAN over rounds in which the contenders alternate (one call each per
round, in a new order each round); ratios are speed b2store / other (> 1: b2store is
faster). No figure is asserted anywhere: this prints what the machine does.

How to run
----------
    python bench/run_all.py                   # everything (a few minutes on 2 cores)
    python bench/run_all.py --quick           # smoke run: 3 rounds, float64 only, 32 MiB
    python bench/run_all.py --only chunks     # or arrays
    python bench/run_all.py --json out.json   # also write the results as JSON
    B2STORE_NATIVE=0 python bench/run_all.py  # the Python block loop, for comparison
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import blosc2
import numcodecs
import numcodecs.blosc
import numpy as np
from _common import gmean, make_datasets, run_case
from _common import versions as common_versions

import b2store

try:
    from b2store.chunk import native
except ImportError:  # a b2store from before the C block loop (for a "before" table)
    native = None

CODECS = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]
FILTERS = {
    "shuffle": (blosc2.Filter.SHUFFLE, numcodecs.Blosc.SHUFFLE),
    "bitshuffle": (blosc2.Filter.BITSHUFFLE, numcodecs.Blosc.BITSHUFFLE),
}
THREADS = (1, 2)
NPOS = 5


def table(cols: list[str], ntext: int) -> None:
    print("\n| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" if i < ntext else "---:" for i in range(len(cols))) + "|")


def row(cells) -> None:
    print("| " + " | ".join(cells) + " |", flush=True)


# --- chunks -----------------------------------------------------------------------------------


def chunk_decode(datasets, repeat: int) -> list[dict]:
    cols = ["dtype", "codec", "filter", "thr", "b2store GB/s", "blosc2 GB/s", "vs blosc2"]
    cols += ["b2store (Blosc1) GB/s", "numcodecs GB/s", "vs numcodecs"]
    table(cols, 4)
    rows = []
    for dtype, data in datasets.items():
        raw = data.tobytes()
        for codec in CODECS:
            for filt, (f2, f1) in FILTERS.items():
                c2 = blosc2.compress2(
                    data, typesize=data.itemsize, codec=blosc2.Codec[codec.upper()], clevel=5,
                    filters=[f2], nthreads=1,
                )  # fmt: skip
                nc = numcodecs.Blosc(cname=codec, clevel=5, shuffle=f1)
                c1 = nc.encode(data)
                for t in THREADS:
                    funcs = {
                        "b2store": lambda c2=c2, t=t: b2store.decode_chunk(c2, nthreads=t),
                        "blosc2": lambda c2=c2, t=t: blosc2.decompress2(c2, nthreads=t),
                        "b2store_b1": lambda c1=c1, t=t: b2store.decode_chunk(c1, nthreads=t),
                        "numcodecs": lambda c1=c1, nc=nc: nc.decode(c1),
                    }
                    numcodecs.blosc.set_nthreads(t)
                    for name, f in funcs.items():
                        got = f()
                        assert bytes(memoryview(got)) == raw, f"{name} {codec}/{filt} differs"
                    gbs = run_case(funcs, data.nbytes, repeat)
                    r = {
                        "dtype": dtype, "codec": codec, "filter": filt, "nthreads": t,
                        "gbps": gbs, "cratio": len(raw) / len(c2),
                        "vs_blosc2": gbs["b2store"] / gbs["blosc2"],
                        "vs_numcodecs": gbs["b2store_b1"] / gbs["numcodecs"],
                    }  # fmt: skip
                    rows.append(r)
                    row(
                        [dtype, codec, filt, str(t)]
                        + [f"{gbs[k]:.2f}" for k in ("b2store", "blosc2")]
                        + [f"{r['vs_blosc2']:.2f}"]
                        + [f"{gbs[k]:.2f}" for k in ("b2store_b1", "numcodecs")]
                        + [f"{r['vs_numcodecs']:.2f}"]
                    )
    numcodecs.blosc.set_nthreads(1)
    for t in THREADS:
        sel = [r for r in rows if r["nthreads"] == t]
        print(
            f"\ndecode, {t} thread(s): geometric mean {gmean([r['vs_blosc2'] for r in sel]):.2f}x "
            f"python-blosc2, {gmean([r['vs_numcodecs'] for r in sel]):.2f}x numcodecs"
        )
    one = {(r["dtype"], r["codec"], r["filter"]): r for r in rows if r["nthreads"] == 1}
    gains = []  # (row, b2store's two threads / its one, python-blosc2's)
    for r in rows:
        if r["nthreads"] == 2:
            first = one[(r["dtype"], r["codec"], r["filter"])]["gbps"]
            gains.append((r, *(r["gbps"][k] / first[k] for k in ("b2store", "blosc2"))))
    if gains:
        print(f"decode, 2 threads / 1 thread: geometric mean b2store "
              f"{gmean([g[1] for g in gains]):.2f}x, python-blosc2 "
              f"{gmean([g[2] for g in gains]):.2f}x")  # fmt: skip
        # A row two threads cannot speed up much (memory-bound, or a chunk of few blocks) is
        # shown with python-blosc2's gain on the same chunk: the bound is then the machine's.
        for r, ours, theirs in gains:
            if ours < 1.7:
                print(f"  {r['dtype']} {r['codec']} {r['filter']}: b2store {ours:.2f}x, "
                      f"python-blosc2 {theirs:.2f}x")  # fmt: skip
    return rows


def chunk_encode(datasets, repeat: int) -> list[dict]:
    cols = ["dtype", "codec", "filter", "thr", "b2store GB/s", "blosc2 GB/s", "vs blosc2"]
    cols += ["numcodecs GB/s", "vs numcodecs", "b2store bytes", "size vs blosc2"]
    table(cols, 4)
    rows = []
    for dtype, data in datasets.items():
        for codec in CODECS:
            for filt, (f2, f1) in FILTERS.items():
                nc = numcodecs.Blosc(cname=codec, clevel=5, shuffle=f1)
                for t in THREADS:
                    funcs = {
                        "b2store": lambda d=data, c=codec, f=filt, t=t: b2store.encode_chunk(
                            d, codec=c, clevel=5, filters=[f], nthreads=t
                        ),
                        "blosc2": lambda d=data, c=codec, f2=f2, t=t: blosc2.compress2(
                            d,
                            typesize=d.itemsize,
                            codec=blosc2.Codec[c.upper()],
                            clevel=5,
                            filters=[f2],
                            nthreads=t,
                        ),  # fmt: skip
                        "numcodecs": lambda d=data, nc=nc: nc.encode(d),
                    }
                    numcodecs.blosc.set_nthreads(t)
                    sizes = {name: len(f()) for name, f in funcs.items()}
                    chunk = funcs["b2store"]()
                    back = blosc2.decompress2(chunk)
                    assert back == data.tobytes(), f"b2store {codec}/{filt} does not decode"
                    gbs = run_case(funcs, data.nbytes, repeat)
                    r = {
                        "dtype": dtype, "codec": codec, "filter": filt, "nthreads": t,
                        "gbps": gbs, "sizes": sizes,
                        "vs_blosc2": gbs["b2store"] / gbs["blosc2"],
                        "vs_numcodecs": gbs["b2store"] / gbs["numcodecs"],
                        "size_vs_blosc2": sizes["b2store"] / sizes["blosc2"],
                    }  # fmt: skip
                    rows.append(r)
                    row(
                        [dtype, codec, filt, str(t)]
                        + [f"{gbs[k]:.2f}" for k in ("b2store", "blosc2")]
                        + [f"{r['vs_blosc2']:.2f}", f"{gbs['numcodecs']:.2f}"]
                        + [f"{r['vs_numcodecs']:.2f}", str(sizes["b2store"])]
                        + [f"{r['size_vs_blosc2']:.4f}"]
                    )
    numcodecs.blosc.set_nthreads(1)
    for t in THREADS:
        sel = [r for r in rows if r["nthreads"] == t]
        print(
            f"\nencode, {t} thread(s): geometric mean {gmean([r['vs_blosc2'] for r in sel]):.2f}x "
            f"python-blosc2, {gmean([r['vs_numcodecs'] for r in sel]):.2f}x numcodecs"
        )
    return rows


# --- arrays -----------------------------------------------------------------------------------


def make_field(shape) -> np.ndarray:
    rng = np.random.default_rng(20240603)
    y = (np.arange(shape[0]) / shape[0])[:, None]
    x = (np.arange(shape[1]) / shape[1])[None, :]
    field = np.sin(6.0 * x) * np.cos(4.0 * y) + 0.5 * x * y
    return field + rng.normal(0.0, 1e-3, shape)


def set_b2store_threads(t: int | None) -> None:
    if native is not None:
        native.set_nthreads(t)


_HELD: dict = {}  # arrays opened once, for the reads "of an open array"


def _b2store_open(t):
    def op(p, held=False):
        set_b2store_threads(t)
        if held:  # (not setdefault: its default would open the file every time)
            if ("b2store", p, t) not in _HELD:
                _HELD["b2store", p, t] = b2store.open(p)
            return _HELD["b2store", p, t]
        return b2store.open(p)

    return op


def _blosc2_open(t):
    def op(p, held=False):
        blosc2.set_nthreads(t)  # blosc2.open takes its dparams from the global
        if held:  # (not setdefault: its default would open the file every time)
            if ("blosc2", p, t) not in _HELD:
                _HELD["blosc2", p, t] = blosc2.open(p)
            return _HELD["blosc2", p, t]
        return blosc2.open(p)

    return op


_PEAK = """
import sys
import b2store

def status(key):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(key))

try:
    from b2store.chunk import native
    native.set_nthreads(int(sys.argv[2]))
except ImportError:
    pass
a = b2store.open(sys.argv[1])
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak (VmHWM) starts again from the resident size now
rss = status("VmRSS:")
x = a[:]
print(status("VmHWM:") - rss - x.nbytes)
"""


def peak_extra(path: str, nthreads: int) -> int | None:
    """Peak resident memory a whole read of ``path`` adds beyond its output, in a fresh
    process (Linux: the peak is reset through /proc/self/clear_refs before the read)."""
    if not os.path.exists("/proc/self/clear_refs"):
        return None
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, path, str(nthreads)], capture_output=True, text=True
    )
    return int(done.stdout.strip()) if done.returncode == 0 else None


def arrays(shape, repeat: int) -> list[dict]:
    rows = []
    rng = np.random.default_rng(20240604)
    pos = [tuple(int(rng.integers(n)) for n in shape) for _ in range(NPOS)]
    slab = shape[0] // 3
    with tempfile.TemporaryDirectory(prefix="b2store_bench_") as tmp:
        data = make_field(shape)
        p = os.path.join(tmp, "a.b2nd")
        a = blosc2.asarray(data, urlpath=p, mode="w", contiguous=True)
        chunks, blocks = a.chunks, a.blocks
        del a
        print(
            f"\narray {shape} float64, {data.nbytes / 2**20:.0f} MiB, chunks {chunks}, "
            f"blocks {blocks}, zstd clevel 5 shuffle"
        )
        assert np.array_equal(b2store.open(p)[:], data)
        reads = {  # name: (calls per round, read given an opener)
            "whole array": (1, lambda op: op(p)[:]),
            f"one element ({NPOS} random, per element)": (NPOS, lambda op: [op(p)[i] for i in pos]),
            f"slab [{slab}] ({shape[1] * 8 // 1024} kB)": (1, lambda op: op(p)[slab]),
            # The "one element of an open array": the array opened once, outside.
            f"one element of an open array ({NPOS} random)": (
                NPOS,
                lambda op: [op(p, held=True)[i] for i in pos],
            ),
            f"slab [{slab}] of an open array": (1, lambda op: op(p, held=True)[slab]),
        }
        cols = ["read", "thr", "b2store ms", "blosc2 ms", "speed vs blosc2"]
        table(cols, 2)
        for name, (div, f) in reads.items():
            for t in THREADS:
                funcs = {
                    "b2store": lambda f=f, t=t: f(_b2store_open(t)),
                    "blosc2": lambda f=f, t=t: f(_blosc2_open(t)),
                }
                s = {n: 1.0 / v / div for n, v in run_case(funcs, 10**9, repeat).items()}
                r = {
                    "read": name,
                    "nthreads": t,
                    "seconds": s,
                    "vs_blosc2": s["blosc2"] / s["b2store"],
                }
                rows.append(r)
                row([name, str(t), f"{s['b2store'] * 1e3:.3f}", f"{s['blosc2'] * 1e3:.3f}",
                     f"{r['vs_blosc2']:.2f}"])  # fmt: skip
        # Writes: the same array, chunks and blocks, zstd clevel 5 shuffle (both defaults).
        w1, w2 = os.path.join(tmp, "w1.b2nd"), os.path.join(tmp, "w2.b2nd")
        for t in THREADS:
            funcs = {
                "b2store": lambda t=t: b2store.asarray(
                    data, urlpath=w1, mode="w", chunks=chunks, blocks=blocks, nthreads=t
                ),
                "blosc2": lambda t=t: blosc2.asarray(
                    data,
                    urlpath=w2,
                    mode="w",
                    chunks=chunks,
                    blocks=blocks,
                    contiguous=True,
                    cparams={"nthreads": t},
                ),  # fmt: skip
            }
            s = {n: 1.0 / v for n, v in run_case(funcs, 10**9, max(3, repeat // 2)).items()}
            r = {"read": "write whole array", "nthreads": t, "seconds": s,
                 "vs_blosc2": s["blosc2"] / s["b2store"],
                 "size_vs_blosc2": os.path.getsize(w1) / os.path.getsize(w2)}  # fmt: skip
            rows.append(r)
            row(["write whole array (asarray)", str(t), f"{s['b2store'] * 1e3:.3f}",
                 f"{s['blosc2'] * 1e3:.3f}", f"{r['vs_blosc2']:.2f}"])  # fmt: skip
        # The same writes, each to a new path, the file removed and the page cache synced
        # outside the timing: the rows above also time replacing the last round's file (and
        # on a VM, fresh page-cache pages while the old file's are still held: b2store keeps
        # the old file readable until the new one is whole; python-blosc2 removes it first).
        sizes = {}
        for t in THREADS:
            times: dict[str, list[float]] = {"b2store": [], "blosc2": []}
            for r in range(max(3, repeat // 2)):
                order = ["b2store", "blosc2"][:: 1 if r % 2 == 0 else -1]
                for name in order:
                    new = os.path.join(tmp, f"new_{name}_{t}_{r}.b2nd")
                    t0 = time.perf_counter()
                    if name == "b2store":
                        b2store.asarray(
                            data, urlpath=new, mode="w", chunks=chunks, blocks=blocks, nthreads=t
                        )
                    else:
                        blosc2.asarray(data, urlpath=new, mode="w", chunks=chunks,
                                       blocks=blocks, contiguous=True,
                                       cparams={"nthreads": t})  # fmt: skip
                    times[name].append(time.perf_counter() - t0)
                    sizes[name] = os.path.getsize(new)
                    os.remove(new)
                    os.sync()
            s = {n: statistics.median(v) for n, v in times.items()}
            r = {"read": "write whole array, new file", "nthreads": t, "seconds": s,
                 "vs_blosc2": s["blosc2"] / s["b2store"]}  # fmt: skip
            rows.append(r)
            row(["write whole array, new file", str(t), f"{s['b2store'] * 1e3:.3f}",
                 f"{s['blosc2'] * 1e3:.3f}", f"{r['vs_blosc2']:.2f}"])  # fmt: skip
        print(f"\nfile size b2store / blosc2: {sizes['b2store'] / sizes['blosc2']:.4f}")
        chunk_bytes = int(np.prod(chunks)) * 8
        for t in THREADS:
            extra = peak_extra(p, t)
            rows.append({"read": "peak memory beyond the output", "nthreads": t, "bytes": extra})
            if extra is not None:
                print(
                    f"whole read, {t} thread(s): peak resident memory beyond the output "
                    f"{extra / 2**20:.1f} MiB ({extra / chunk_bytes:.2f} chunks of "
                    f"{chunk_bytes / 2**20:.0f} MiB)"
                )
        set_b2store_threads(None)
    return rows


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(
                line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def simd() -> str:
    """The vectors b2store's filter kernels use on this machine."""
    try:
        from b2store import _shuffle

        level = _shuffle.simd_level()
    except (ImportError, AttributeError):  # a b2store from before the AVX2 kernels
        return "SSE2"
    return {0: "scalar", 1: "SSE2", 2: "AVX2"}.get(level, str(level))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=9, help="timed rounds per case (default 9)")
    ap.add_argument("--quick", action="store_true", help="3 rounds, float64 only, 32 MiB array")
    ap.add_argument("--only", choices=["chunks", "arrays"], help="run one half")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()
    repeat = 3 if args.quick else args.repeat
    versions = common_versions()
    print(" ".join(f"{k} {v}" for k, v in versions.items()) + f"; {repeat} rounds, medians")
    print(f"machine: {machine()}")
    loop = "C, GIL released" if native is not None and native.enabled() else "Python"
    print(f"b2store {b2store.__file__}; block loop: {loop}; filter kernels: {simd()}")
    t0 = time.perf_counter()
    out: dict = {"versions": versions, "repeat": repeat, "machine": machine(), "simd": simd()}
    datasets = make_datasets()
    if args.quick:
        datasets = dict(list(datasets.items())[:1])
    if args.only in (None, "chunks"):
        print("\n## Chunk decode (8 MB chunks, clevel 5)")
        out["decode"] = chunk_decode(datasets, repeat)
        print("\n## Chunk encode (8 MB, clevel 5)")
        out["encode"] = chunk_encode(datasets, repeat)
    if args.only in (None, "arrays"):
        print("\n## Arrays")
        out["arrays"] = arrays((2048, 2048) if args.quick else (8192, 4096), repeat)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
