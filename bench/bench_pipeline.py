"""Zarr codec pipelines on the same Zarr v3 arrays: zarr's default ``BatchedCodecPipeline``
against zarrs (``zarrs.ZarrsCodecPipeline``, Rust), zarr's opt-in ``FusedCodecPipeline``
(zarr 3.4 and newer; ``fused``) and b2store's (``B2storeCodecPipeline``).

A 16 MB float32 array (2048 x 2048, a smooth field with noise) in 128 kB (128 x 256) and 1 MB
(512 x 512) chunks, zarr's ``BloscCodec`` LZ4 and Zstd with shuffle, in a LocalStore; a
whole read and a box across many chunks (``[100:1900, 300:1700]``), one thread and two.
Each thread count runs in a process of its own, as each pipeline's threads are sized once
per process: zarr's pipeline decodes in zarr's thread pool, made with the
``threading.max_workers`` of zarr's first call (set before it here; left unset, zarr's
one-thread reads took 35 ms of CPU in 29 ms), ``FusedCodecPipeline`` in a pool sized by
``codec_pipeline.max_workers`` (set too), b2store's reads ``threading.max_workers`` at each
read, and zarrs decodes in rayon's global pool, which ``threading.max_workers`` does not
bound (at 1 it still ran on both cores: 4.9 ms of CPU in 2.9 ms) and which
``RAYON_NUM_THREADS`` sizes, set here to the same count (as ``B2STORE_NTHREADS``, for
``b2store.open``'s own reads in the ``b2nd`` rows). Medians over interleaved rounds in
each process (and each pipeline's CPU time), ratios against zarrs, ``fused`` and zarr.
``floor`` is a pipeline that reads nothing (its ``read`` returns at once): what zarr itself
spends on a read around any pipeline, which bounds every pipeline's ratio against zarr's.

Writes (``write`` rows): the whole array written over the same chunks by each pipeline, its
own store each; ``floor`` there writes the chunks' bytes, encoded beforehand, as zarr's
``LocalStore`` writes files (a temporary renamed into place), in the thread count's threads:
the file system's share of any pipeline's write. ``b2nd`` rows: the same field as a
``.b2nd`` frame (LZ4 with shuffle, 128 x 256 chunks, python-blosc2's blocks), read whole by
``b2store.open(p)[:]`` and by ``zarr.open_array(B2ndStore(p))[:]`` through zarr's pipeline
and b2store's. ``xarray`` rows: ``xr.open_zarr(p).load()`` of three float32 variables in 512 kB
chunks (LZ4 with shuffle), with dask's default chunks (a task per chunk) and without dask.

    python bench/bench_pipeline.py [--quick] [--repeat N] [--json PATH] [--threads N]

(``--threads N`` runs one thread count in this process, as the processes started for each
count do.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import zarr
from _common import parse_args, round_orders
from zarr.codecs import BloscCodec
from zarr.registry import register_pipeline

import b2store
from b2store.integrations.zarr.codecs import Blosc2Codec
from b2store.integrations.zarr.pipeline import B2storeCodecPipeline
from b2store.integrations.zarr.store import B2ndStore


class Floor(B2storeCodecPipeline):
    """Reads nothing: zarr's own cost of a read, around whichever pipeline."""

    async def read(self, batch_info, out, drop_axes=()):
        return tuple({"status": "present"} for _ in batch_info)


register_pipeline(Floor)

PIPELINES = {
    "zarr": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "zarrs": "zarrs.ZarrsCodecPipeline",
    "b2store": "b2store.integrations.zarr.pipeline.B2storeCodecPipeline",
    "fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
    "floor": f"{__name__}.Floor",
}
CHUNKS = {"128kB": (128, 256), "1MB": (512, 512)}
CODECS = {"lz4": "lz4", "zstd": "zstd"}
KEYS = {"whole": np.s_[:], "box": np.s_[100:1900, 300:1700]}


def field() -> np.ndarray:
    rng = np.random.default_rng(37)
    y, x = np.mgrid[0:2048, 0:2048] / 2048.0
    values = np.sin(6.0 * x) * np.cos(4.0 * y) + 0.5 * x * y
    return (values + rng.normal(0.0, 1e-3, values.shape)).astype(np.float32)


CPU: dict[str, float] = {}  # the last timed case's median CPU seconds per function


def timed(funcs: dict, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median and best wall seconds per function, in a new order each round (the best
    is the figure least disturbed by other work on a shared machine); the median CPU
    seconds of the process (every thread's) in ``CPU``."""
    times: dict[str, list[float]] = {n: [] for n in funcs}
    cpu: dict[str, list[float]] = {n: [] for n in funcs}
    names = list(funcs)
    for order in round_orders(names, repeat):
        for name in order:
            c0, t0 = time.process_time(), time.perf_counter()
            funcs[name]()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    CPU.clear()
    CPU.update({n: statistics.median(t) for n, t in cpu.items()})
    return (
        {n: statistics.median(t) for n, t in times.items()},
        {n: min(t) for n, t in times.items()},
    )


def ratios(med: dict, best: dict) -> dict:
    row = {
        **{f"{n}_ms": round(t * 1e3, 2) for n, t in med.items()},
        **{f"{n}_best_ms": round(t * 1e3, 2) for n, t in best.items()},
        **{f"{n}_cpu_ms": round(t * 1e3, 2) for n, t in CPU.items()},
        "vs_zarr": round(med["zarr"] / med["b2store"], 2),
        "best_vs_zarr": round(best["zarr"] / best["b2store"], 2),
    }
    for other in ("zarrs", "fused"):
        if other in med:
            row[f"vs_{other}"] = round(med[other] / med["b2store"], 2)
            row[f"best_vs_{other}"] = round(best[other] / best["b2store"], 2)
    return row


def show(label: str, med: dict, row: dict) -> None:
    print(
        label,
        "  ".join(f"{n} {t * 1e3:7.2f} ms" for n, t in med.items()),
        f"  b2store: {row['vs_zarr']:.2f}x zarr",
        f"{row.get('vs_zarrs', float('nan')):.2f}x zarrs",
        f"{row.get('vs_fused', float('nan')):.2f}x fused",
        f"  best: {row['best_vs_zarr']:.2f}x zarr",
        f"{row.get('best_vs_zarrs', float('nan')):.2f}x zarrs",
        f"{row.get('best_vs_fused', float('nan')):.2f}x fused",
        flush=True,
    )


def file_floor(root: str, chunks: dict[str, bytes], threads: int):
    """The chunks' files written as zarr's LocalStore writes them, in ``threads`` threads."""

    def put(item: tuple[str, bytes]) -> None:
        path = os.path.join(root, item[0])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.partial"
        with open(tmp, "wb") as f:
            f.write(item[1])
        os.replace(tmp, path)

    pool = ThreadPoolExecutor(threads)

    def write() -> None:
        list(pool.map(put, chunks.items()))

    return write


THREADS = (1, 2)


def bench_reads(tmp: str, data: np.ndarray, available: dict, repeat: int, threads: int):
    """Whole reads and boxes of the BloscCodec arrays by each pipeline."""
    results = []
    for cname in CODECS:
        for cname_label, chunks in CHUNKS.items():
            path = f"{tmp}/{cname}-{cname_label}"
            arr = zarr.create_array(
                path, shape=data.shape, chunks=chunks, dtype="f4",
                compressors=BloscCodec(cname=cname, shuffle="shuffle", clevel=5),
            )  # fmt: skip
            arr[:] = data
            opened = {}
            for name, where in available.items():
                with zarr.config.set({"codec_pipeline.path": where}):
                    opened[name] = zarr.open_array(path, mode="r")
            for key_name, key in KEYS.items():
                expected = data[key]

                def read(a=None, key=key):
                    with zarr.config.set({"threading.max_workers": threads}):
                        return a[key]

                for name, a in opened.items():
                    assert name == "floor" or np.array_equal(read(a), expected), name
                funcs = {n: (lambda a=a: read(a)) for n, a in opened.items()}
                med, best = timed(funcs, repeat)
                row = {"codec": cname, "chunks": cname_label, "threads": threads, "read": key_name}
                row.update(ratios(med, best))
                results.append(row)
                show(f"{cname:6} {cname_label:6} {threads}t {key_name:6}", med, row)
    return results


def bench_writes(tmp: str, data: np.ndarray, available: dict, repeat: int, threads: int):
    """The whole array written by each pipeline (zarr's BloscCodec LZ4 and b2store's blosc2
    LZ4, both with shuffle, 128 kB chunks)."""
    results = []
    codecs = {
        "blosc": BloscCodec(cname="lz4", shuffle="shuffle", clevel=5),
        "blosc2": Blosc2Codec(cname="lz4", clevel=5),
    }
    for cname, codec in codecs.items():
        arrays = {}
        for name, where in available.items():
            if name == "floor":
                continue
            with zarr.config.set({"codec_pipeline.path": where}):
                arrays[name] = zarr.create_array(
                    f"{tmp}/w-{cname}-{name}", shape=data.shape, chunks=CHUNKS["128kB"],
                    dtype="f4", compressors=codec,
                )  # fmt: skip
        arrays["zarr"][:] = data
        root = f"{tmp}/w-{cname}-zarr"
        stored = {}
        for d, _dirs, files in os.walk(os.path.join(root, "c")):
            for f in files:
                with open(os.path.join(d, f), "rb") as fh:
                    stored[os.path.relpath(os.path.join(d, f), root)] = fh.read()

        def write(a):
            with zarr.config.set({"threading.max_workers": threads}):
                a[:] = data

        funcs = {n: (lambda a=a: write(a)) for n, a in arrays.items()}
        funcs["floor"] = file_floor(f"{tmp}/w-{cname}-floor", stored, threads)
        med, best = timed(funcs, repeat)
        for name in arrays:
            assert np.array_equal(zarr.open_array(f"{tmp}/w-{cname}-{name}")[:], data)
        row = {"codec": f"{cname}-lz4", "chunks": "128kB", "threads": threads, "read": "write"}
        row.update(ratios(med, best))
        results.append(row)
        show(f"{cname:6} 128kB  {threads}t write ", med, row)
    return results


def bench_b2nd(tmp: str, data: np.ndarray, repeat: int, threads: int) -> list[dict]:
    """A .b2nd frame read whole by b2store.open and through B2ndStore, zarr's pipeline and
    b2store's."""
    path = f"{tmp}/field.b2nd"
    b2store.asarray(data, path, chunks=CHUNKS["128kB"], codec="lz4", clevel=5)
    own = b2store.open(path)
    arrays = {}
    for name in ("zarr", "b2store"):
        with zarr.config.set({"codec_pipeline.path": PIPELINES[name]}):
            arrays[name] = zarr.open_array(B2ndStore(path))

    def read(a):
        with zarr.config.set({"threading.max_workers": threads}):
            return a[:]

    funcs = {n: (lambda a=a: read(a)) for n, a in arrays.items()}
    funcs["open"] = lambda: own[:]
    for f in funcs.values():
        assert np.array_equal(f(), data)
    med, best = timed(funcs, repeat)
    row = {"codec": "b2nd-lz4", "chunks": "128kB", "threads": threads, "read": "whole"}
    row.update(ratios(med, best))
    row["vs_open"] = round(med["open"] / med["b2store"], 2)
    row["best_vs_open"] = round(best["open"] / best["b2store"], 2)
    show(f"b2nd   128kB  {threads}t whole ", med, row)
    vs_open, best_open = row["vs_open"], row["best_vs_open"]
    print(f"   b2store's pipeline: {vs_open:.2f}x b2store.open ({best_open:.2f}x best)")
    return [row]


def bench_xarray(tmp: str, available: dict, repeat: int, threads: int) -> list[dict]:
    """``xr.open_zarr(p).load()`` of a Dataset of three float32 variables (64 x 256 x 512 in
    512 kB chunks, BloscCodec LZ4 with shuffle), with each pipeline: open_zarr's default
    chunks (a dask task per chunk; dask's ``num_workers`` the thread count) and without dask
    (``chunks=None``)."""
    import dask
    import xarray as xr
    from bench_write import make_dataset

    ds = make_dataset((64, 256, 512))
    path = f"{tmp}/xarray.zarr"
    codec = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
    encoding = {v: {"chunks": (1, 256, 512), "compressors": [codec]} for v in ds.data_vars}
    ds.to_zarr(path, encoding=encoding, mode="w", consolidated=False)
    results = []
    # open_zarr's default chunks (dask installed): one dask chunk per stored chunk.
    for label, options in (("dask", {}), ("no dask", {"chunks": None})):

        def load(where, options=options):
            def run():
                with zarr.config.set({"codec_pipeline.path": where}):
                    with dask.config.set(num_workers=threads):
                        with xr.open_zarr(path, consolidated=False, **options) as opened:
                            return opened.load()

            return run

        funcs = {n: load(where) for n, where in available.items()}
        for name in ("zarr", "b2store"):
            xr.testing.assert_identical(funcs[name](), ds)
        med, best = timed(funcs, repeat)
        row = {"codec": "lz4", "chunks": "512kB", "threads": threads, "read": f"open_zarr {label}"}
        row.update(ratios(med, best))
        results.append(row)
        show(f"xarray 512kB  {threads}t {label:7}", med, row)
    return results


def run_threads(threads: int, repeat: int) -> list[dict]:
    """Every case at one thread count, in this process."""
    # Before zarr's first call: its thread pool (which zarr's pipeline decodes in) takes the
    # count it has when it is made, and keeps it. (FusedCodecPipeline's pool has a setting
    # of its own.)
    zarr.config.set({"threading.max_workers": threads, "codec_pipeline.max_workers": threads})
    available = dict(PIPELINES)
    try:
        import zarrs  # noqa: F401
    except ImportError:
        del available["zarrs"]
    try:
        from zarr.core.codec_pipeline import FusedCodecPipeline  # noqa: F401
    except ImportError:  # (zarr before 3.4)
        del available["fused"]
    data = field()
    with tempfile.TemporaryDirectory() as tmp:
        results = bench_reads(tmp, data, available, repeat, threads)
        results += bench_writes(tmp, data, available, repeat, threads)
        results += bench_b2nd(tmp, data, repeat, threads)
        results += bench_xarray(tmp, available, repeat, threads)
    return results


def in_process(threads: int, repeat: int) -> list[dict]:
    """:func:`run_threads` in a new process whose rayon pool (zarrs') has ``threads``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        cmd = [sys.executable, __file__, "--threads", str(threads), "--repeat", str(repeat)]
        # zarrs' rayon pool and b2store's own reads (``b2store.open``, the b2nd rows) held to
        # the thread count too: neither reads zarr's threading.max_workers.
        env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "B2STORE_NTHREADS": str(threads)}
        subprocess.run([*cmd, "--json", out], env=env, check=True)
        with open(out) as f:
            return json.load(f)["results"]


def main() -> None:
    args, repeat = parse_args(
        __doc__, 21, "3 rounds",
        lambda ap: ap.add_argument("--threads", type=int, choices=THREADS, help=argparse.SUPPRESS),
    )  # fmt: skip
    if args.threads is not None:
        results = run_threads(args.threads, repeat)
    else:
        results = [row for threads in THREADS for row in in_process(threads, repeat)]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"zarr": zarr.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
