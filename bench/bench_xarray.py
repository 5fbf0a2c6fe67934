"""Reading through xarray: ``xr.open_dataset(p, engine="b2nd")`` against ``blosc2.open(p)``.

What it measures
----------------
A float32 (time, lat, lon) field (smooth, a little noise, fixed seed; 256 x 512 x 512 =
256 MiB, or 64 x 256 x 256 = 16 MiB with ``--quick``) is written by python-blosc2 as one
contiguous ``.b2nd`` with its default cparams (zstd, clevel 5, shuffle) and chunks (16, 512,
512) / blocks (2, 64, 512) (a time slab per chunk, as archives are often laid out), with
``_ARRAY_DIMENSIONS`` in its vlmeta. Opening is included in every call:

* load: ``xr.open_dataset(p, engine="b2nd").load()`` against ``blosc2.open(p)[:]``;
* load (dask): ``xr.open_dataset(p, engine="b2nd", chunks={}).load()`` (dask's threaded
  scheduler, one task per b2nd chunk) against python-blosc2 with its default threads;
* isel: ``xr.open_dataset(p, engine="b2nd")["data"].isel(time=k).values`` against
  ``blosc2.open(p)[k]``: one time step, a few blocks of one chunk;
* load of xarray-blosc2's files: the same field saved by ``xarray_blosc2.save_dataset`` (same
  chunks and blocks), ``xr.open_dataset(root, engine="b2nd").load()`` against its own engine
  (``engine="blosc2"``), each with its default threads (left out when xarray-blosc2 is not
  installed).

python-blosc2 runs with one thread (``blosc2.set_nthreads(1)``; the headline ratio, same
thread count as b2store's reads) and with its default thread count, interleaved with b2store
in the same rounds. Figures are median GB/s of the array bytes each call returns; ratios are
b2store / blosc2 (> 1: b2store is faster). The file sits in the page cache.

Against xarray's zarr engine
----------------------------
The same data, chunks and codec on both sides: bench_write's Dataset (three float32
variables on time/lat/lon, 3 x 136 x 360 x 360 = 211 MB, or 3 x 34 x 180 x 180 with
``--quick``) written by ``to_b2nd`` with its defaults (a ``.b2d`` tree; its codec, level and
shuffle; python-blosc2's chunks and blocks) and by ``to_zarr`` with the chunks ``to_b2nd``
chose and zarr's ``BloscCodec`` with the same codec, level and shuffle (Zarr v3). Each call
opens the Dataset with ``xr.open_dataset(path, engine=...)``, the engine the only difference:

* open: ``open_dataset(...)`` and ``close()``;
* isel: ``ds["tas"].isel(time=k).values`` (one time step);
* load: ``ds.load()`` (the three variables);
* dask mean: ``open_dataset(..., chunks={})`` (one dask chunk per stored chunk), then
  ``ds.mean().compute()`` (dask's threaded scheduler);
* dask load: the same, then ``ds.load()`` (for the zarr engine, ``xr.open_zarr(path).load()``:
  its default chunks are these here, one dask chunk per stored chunk);
* write: ``to_b2nd`` against ``to_zarr`` with the encoding above, each into a fresh path,
  neither syncing to the disk (``to_b2nd``'s sync ``"none"``, zarr's only way).

The zarr engine runs with zarr's default codec pipeline (``BatchedCodecPipeline``; its Blosc
decodes in zarr's thread pool) and again with b2store's pipeline
(``codec_pipeline.path`` set to :data:`~b2store.integrations.zarr.pipeline.PIPELINE_PATH`
around its calls). All contenders alternate in every round (order rotated), after one warm
call each; the figures are medians of many rounds in milliseconds, with the zarr engine's
fastest and slowest round (its spread depends on the state of the process and the machine),
and the ratio is the zarr engine's median over the b2nd engine's (> 1: b2nd faster). CPU
time (all threads) is reported beside wall time: on a shared machine it is the steadier one.

How to run
----------
    python bench/bench_xarray.py               # 256 MiB, 5 rounds (a minute or so)
    python bench/bench_xarray.py --quick       # smoke run: 16 MiB, 3 rounds
    python bench/bench_xarray.py --json out.json
    BENCH_ZARR_ROUNDS=41 python bench/bench_xarray.py   # rounds of the zarr rows (21; 5 quick)
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time

import blosc2
import numpy as np
import xarray as xr
from _common import parse_args, run_case
from _common import versions as common_versions
from bench_write import make_dataset

import b2store
from b2store import _sync


def make_field(shape) -> np.ndarray:
    rng = np.random.default_rng(20240604)
    t = (np.arange(shape[0]) / shape[0])[:, None, None]
    y = (np.arange(shape[1]) / shape[1])[None, :, None]
    x = (np.arange(shape[2]) / shape[2])[None, None, :]
    field = 280 + 20 * np.sin(6.0 * x + t) * np.cos(4.0 * y) + 5 * x * y
    return (field + rng.normal(0.0, 0.01, shape)).astype(np.float32)


def main() -> None:
    args, repeat = parse_args(__doc__, 5, "16 MiB field, 3 rounds")
    shape = (64, 256, 256) if args.quick else (256, 512, 512)
    chunks = (16, shape[1], shape[2])
    blocks = (2, 64, shape[2])
    default_threads = blosc2.nthreads
    results: dict = {"versions": versions(), "shape": shape, "chunks": chunks, "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "field.b2nd")
        data = make_field(shape)
        arr = blosc2.asarray(data, urlpath=path, mode="w", chunks=chunks, blocks=blocks)
        arr.vlmeta["_ARRAY_DIMENSIONS"] = ["time", "lat", "lon"]
        del arr
        check = xr.open_dataset(path, engine="b2nd")
        np.testing.assert_array_equal(check["data"].values, data)  # also warms the page cache
        check.close()
        k = shape[0] // 2 + 3

        def b2_load():
            with xr.open_dataset(path, engine="b2nd") as ds:
                return ds.load()

        def b2_dask():
            with xr.open_dataset(path, engine="b2nd", chunks={}) as ds:
                return ds.load()

        def b2_isel():
            with xr.open_dataset(path, engine="b2nd") as ds:
                return ds["data"].isel(time=k).values

        def threads(n, f):
            def run():
                blosc2.set_nthreads(n)
                try:
                    return f()
                finally:
                    blosc2.set_nthreads(default_threads)

            return run

        cases = {
            "load": (b2_load, lambda: blosc2.open(path)[:], data.nbytes),
            "load (dask)": (b2_dask, lambda: blosc2.open(path)[:], data.nbytes),
            "isel one step": (b2_isel, lambda: blosc2.open(path)[k], data[k].nbytes),
        }
        print(f"field {shape} float32, {data.nbytes / 2**20:.0f} MiB, chunks {chunks}")
        other = _xarray_blosc2_case(tmp, data, chunks, blocks)
        head = f"blosc2 {default_threads}t"
        print(f"{'case':<15}{'b2store':>10}{'blosc2 1t':>11}{head:>11}"
              f"{'ratio 1t':>10}{'ratio nt':>10}   (GB/s, medians of {repeat})")  # fmt: skip
        for name, (ours, theirs, nbytes) in cases.items():
            speeds = run_case(
                {
                    "b2store": ours,
                    "blosc2_1t": threads(1, theirs),
                    "blosc2_nt": threads(default_threads, theirs),
                },
                nbytes,
                repeat,
            )
            r1 = speeds["b2store"] / speeds["blosc2_1t"]
            rn = speeds["b2store"] / speeds["blosc2_nt"]
            print(
                f"{name:<15}{speeds['b2store']:>10.2f}{speeds['blosc2_1t']:>11.2f}"
                f"{speeds['blosc2_nt']:>11.2f}{r1:>10.2f}{rn:>10.2f}"
            )
            results["cases"][name] = {**speeds, "ratio_1t": r1, "ratio_nt": rn}
        if other is not None:
            # The same directory opened by both engines, each with its default threads.
            ours, theirs = other
            speeds = run_case({"b2store": ours, "xarray-blosc2": theirs}, data.nbytes, repeat)
            ratio = speeds["b2store"] / speeds["xarray-blosc2"]
            mine, its = speeds["b2store"], speeds["xarray-blosc2"]
            print(f"load, xarray-blosc2's files: b2nd engine {mine:.2f} GB/s, "
                  f"blosc2 engine {its:.2f} GB/s, ratio {ratio:.2f}")  # fmt: skip
            results["cases"]["load vs xarray-blosc2"] = {**speeds, "ratio": ratio}
    results["zarr engine"] = zarr_engine_rows(args.quick)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)


def _xarray_blosc2_case(tmp: str, data: np.ndarray, chunks, blocks):
    """``(b2store, xarray-blosc2)`` loads of the field saved by xarray-blosc2 (its own
    layout: a directory of frames), or None when xarray-blosc2 is not installed."""
    try:
        import xarray_blosc2
    except ImportError:
        print("(xarray-blosc2 is not installed: its row is left out)")
        return None
    root = os.path.join(tmp, "xb2")
    ds = xr.Dataset({"data": (("time", "lat", "lon"), data)})
    xarray_blosc2.save_dataset(ds, root, chunks=chunks, blocks=blocks)
    with xr.open_dataset(root, engine="b2nd") as check:
        np.testing.assert_array_equal(check["data"].values, data)

    def ours():
        with xr.open_dataset(root, engine="b2nd") as ds:
            return ds.load()

    def theirs():
        with xr.open_dataset(root, engine="blosc2") as ds:
            return ds.load()

    return ours, theirs


def zarr_engine_rows(quick: bool) -> dict:
    """The b2nd engine against xarray's zarr engine (see the module's docstring)."""
    import zarr
    from zarr.codecs import BloscCodec

    from b2store.integrations.zarr.pipeline import PIPELINE_PATH

    shape = (34, 180, 180) if quick else (136, 360, 360)
    rounds = int(os.environ.get("BENCH_ZARR_ROUNDS", 5 if quick else 21))
    ds = make_dataset(shape)
    names = list(ds.data_vars)
    tmp = tempfile.mkdtemp(dir=os.environ.get("BENCH_TMP"))
    try:
        b2p, zp = os.path.join(tmp, "d.b2d"), os.path.join(tmp, "d.zarr")
        b2store.to_b2nd(ds, b2p)
        with xr.open_dataset(b2p, engine="b2nd") as ours:
            encoding = _zarr_encoding(ours, BloscCodec)
        ds.to_zarr(zp, encoding=encoding, mode="w")
        with xr.open_dataset(b2p, engine="b2nd") as a, xr.open_dataset(zp, engine="zarr") as b:
            xr.testing.assert_identical(a.load(), b.load())
        k = shape[0] // 2 + 3
        chunks = encoding[names[0]]["chunks"]

        def opener(path, engine, pipeline=None, **kw):
            def call(f):
                def run():
                    with zarr.config.set({"codec_pipeline.path": pipeline} if pipeline else {}):
                        with xr.open_dataset(path, engine=engine, **kw) as opened:
                            return f(opened)

                return run

            return call

        def writer(suffix, call):
            def run():
                p = os.path.join(tmp, "w" + suffix)
                call(p)
                shutil.rmtree(p)

            return run

        def b2_write(p):
            _sync.set_sync("none")
            try:
                b2store.to_b2nd(ds, p)
            finally:
                _sync.set_sync(None)

        rows = {
            "open": lambda d: None,
            "isel": lambda d: d[names[0]].isel(time=k).values,
            "load": lambda d: d.load(),
        }
        contenders = {
            "b2nd": opener(b2p, "b2nd"),
            "zarr": opener(zp, "zarr"),
            "zarr+b2store": opener(zp, "zarr", PIPELINE_PATH),
        }
        cases = {
            row: {name: make(f) for name, make in contenders.items()} for row, f in rows.items()
        }
        lazy = {"b2nd": opener(b2p, "b2nd", chunks={}), "zarr": opener(zp, "zarr", chunks={}),
                "zarr+b2store": opener(zp, "zarr", PIPELINE_PATH, chunks={})}  # fmt: skip
        cases["dask mean"] = {n: make(lambda d: d.mean().compute()) for n, make in lazy.items()}
        cases["dask load"] = {n: make(lambda d: d.load()) for n, make in lazy.items()}
        cases["write"] = {
            "b2nd": writer(".b2d", b2_write),
            "zarr": writer(".zarr", lambda p: ds.to_zarr(p, encoding=encoding, mode="w")),
        }
        nbytes = sum(v.nbytes for v in ds.data_vars.values())
        codec = encoding[names[0]]["compressors"][0].to_dict()["configuration"]
        print(f"\nagainst xarray's zarr engine (zarr {zarr.__version__}): {len(names)} x "
              f"{shape} float32 = {nbytes / 1e6:.1f} MB, chunks {chunks}, {codec['cname']} "
              f"level {codec['clevel']} + {codec['shuffle']}; "
              f"b2nd {_disk(b2p) / 1e6:.1f} MB, zarr {_disk(zp) / 1e6:.1f} MB; load average "
              f"{os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"{'case':<10}{'b2nd ms':>9}{'cpu':>7}{'zarr ms':>9}{'min-max':>13}{'cpu':>7}"
              f"{'ratio':>7}{'zarr+b2store':>14}{'ratio':>7}   (medians of {rounds})")  # fmt: skip
        out = {"shape": shape, "chunks": chunks, "rounds": rounds, "cases": {}}
        for row, funcs in cases.items():
            n = max(3, rounds // 4) if row == "write" else rounds
            wall, cpu = _rounds(funcs, n)
            med = {c: statistics.median(w) * 1e3 for c, w in wall.items()}
            cmed = {c: statistics.median(t) * 1e3 for c, t in cpu.items()}
            z = wall["zarr"]
            line = (f"{row:<10}{med['b2nd']:>9.1f}{cmed['b2nd']:>7.1f}{med['zarr']:>9.1f}"
                    f"{min(z) * 1e3:>6.0f}-{max(z) * 1e3:<6.0f}{cmed['zarr']:>7.1f}"
                    f"{med['zarr'] / med['b2nd']:>7.2f}")  # fmt: skip
            if "zarr+b2store" in med:
                line += f"{med['zarr+b2store']:>14.1f}{med['zarr+b2store'] / med['b2nd']:>7.2f}"
            print(line)
            out["cases"][row] = {
                "ms": med,
                "cpu_ms": cmed,
                "zarr_min_max_ms": [min(z) * 1e3, max(z) * 1e3],
                "ratio": med["zarr"] / med["b2nd"],
            }
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _zarr_encoding(ours: xr.Dataset, blosc) -> dict:
    """to_zarr's encoding of the Dataset ``ours`` (opened from to_b2nd's tree): each data
    variable in the chunks to_b2nd chose, with zarr's Blosc codec set as to_b2nd's frames
    are (codec, level and shuffle, as the engine reports them)."""
    out = {}
    for name, var in ours.data_vars.items():
        config = var.encoding["compressors"][0]["configuration"]
        codec = blosc(cname=config["cname"], clevel=config["clevel"], shuffle=config["shuffle"])
        out[name] = {"chunks": var.encoding["chunks"], "compressors": [codec]}
    return out


def _rounds(funcs: dict, rounds: int) -> tuple[dict, dict]:
    """Wall and CPU seconds per contender: one warm call each, then ``rounds`` rounds, the
    order rotated each round."""
    names = list(funcs)
    wall: dict = {n: [] for n in names}
    cpu: dict = {n: [] for n in names}
    for f in funcs.values():
        f()
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            t0, c0 = time.perf_counter(), time.process_time()
            funcs[name]()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return wall, cpu


def _disk(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def versions() -> dict:
    return {**common_versions(), "xarray": xr.__version__}


if __name__ == "__main__":
    main()
