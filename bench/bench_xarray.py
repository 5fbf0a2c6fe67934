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

How to run
----------
    python bench/bench_xarray.py               # 256 MiB, 5 rounds (a minute or so)
    python bench/bench_xarray.py --quick       # smoke run: 16 MiB, 3 rounds
    python bench/bench_xarray.py --json out.json
"""

from __future__ import annotations

import json
import os
import tempfile

import blosc2
import numpy as np
import xarray as xr
from _common import parse_args, run_case
from _common import versions as common_versions


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


def versions() -> dict:
    return {**common_versions(), "xarray": xr.__version__}


if __name__ == "__main__":
    main()
