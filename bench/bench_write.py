"""Writing a Dataset: `b2store.to_b2nd` against `ds.to_zarr` and xarray-blosc2's `save_dataset`.

What it measures
----------------
A Dataset of three float32 variables on (time, lat, lon) (smooth fields with a little noise,
fixed seed; 3 x 136 x 360 x 360 x 4 B = 211 MB, about 200 MiB, or a sixteenth of it with
``--quick``), held in memory as numpy arrays, written by each tool with its own defaults:

* ``to_b2nd(ds, "x.b2d")``: b2store's layout for a Dataset of several variables (a ``.b2d``
  tree), its default codec (Zstd level 1 + shuffle), chunks, threads and sync policy
  (``"commit"``: the data is on the disk when the call returns);
* ``ds.to_zarr("x.zarr")``: xarray's zarr writer with zarr's defaults (Zstd level 0, no fsync);
* ``xarray_blosc2.save_dataset(ds, "x")`` (left out when xarray-blosc2 is not installed),
  python-blosc2's defaults (no fsync).

Each round writes each tool once into a fresh path (a new order each round); the figure is
the median seconds, the ratio the other tool's seconds over b2store's (> 1: b2store is
faster), and the bytes each wrote (all files under its path). Also timed: ``to_b2nd`` with
``B2STORE_SYNC=none``, the same policy as the other two, to show what the fsyncs cost.

How to run
----------
    python bench/bench_write.py               # 211 MB, 3 rounds (a minute or so)
    python bench/bench_write.py --quick       # smoke run: 13 MB, 3 rounds
    python bench/bench_write.py --json out.json
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import xarray as xr
from _common import parse_args, round_orders
from _common import versions as common_versions

import b2store
from b2store import _sync


def make_dataset(shape) -> xr.Dataset:
    rng = np.random.default_rng(20240607)
    t = (np.arange(shape[0]) / shape[0])[:, None, None]
    y = (np.arange(shape[1]) / shape[1])[None, :, None]
    x = (np.arange(shape[2]) / shape[2])[None, None, :]
    base = np.sin(6.0 * x + t) * np.cos(4.0 * y)
    fields = {
        "tas": 280 + 20 * base + 5 * x * y,
        "pr": 1e-3 * (1.5 + base * (1 + x)),
        "uas": 10 * np.cos(3.0 * x - 2 * t) * np.sin(5.0 * y),
    }
    dims = ("time", "lat", "lon")
    data = {
        name: (dims, (f + rng.normal(0.0, 0.01 * (np.abs(f).mean() + 1e-6), shape)).astype("f4"))
        for name, f in fields.items()
    }
    coords = {
        "time": np.arange(shape[0]),
        "lat": np.linspace(-90, 90, shape[1]),
        "lon": np.linspace(0, 360, shape[2], endpoint=False),
    }
    return xr.Dataset(data, coords=coords, attrs={"title": "bench_write"})


def disk_bytes(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main() -> None:
    args, repeat = parse_args(__doc__, 3, "13 MB Dataset, 3 rounds")
    shape = (34, 180, 180) if args.quick else (136, 360, 360)
    ds = make_dataset(shape)
    nbytes = sum(v.nbytes for v in ds.data_vars.values())
    try:
        import xarray_blosc2
    except ImportError:
        xarray_blosc2 = None

    tmp = tempfile.mkdtemp(dir=os.environ.get("BENCH_TMP"))

    def b2(sync: str | None):
        def call(p):
            _sync.set_sync(sync)
            try:
                b2store.to_b2nd(ds, p)
            finally:
                _sync.set_sync(None)

        return call

    contenders = {
        "to_b2nd": (".b2d", b2(None)),
        "to_b2nd (sync none)": (".b2d", b2("none")),
        "to_zarr": (".zarr", lambda p: ds.to_zarr(p, mode="w")),
    }
    if xarray_blosc2 is not None:
        contenders["save_dataset"] = ("", lambda p: xarray_blosc2.save_dataset(ds, p))
    names = list(contenders)
    times: dict[str, list[float]] = {n: [] for n in names}
    sizes: dict[str, int] = {}
    try:
        for r, order in enumerate(round_orders(names, repeat)):
            for name in order:
                suffix, call = contenders[name]
                p = os.path.join(tmp, f"w{r}_{names.index(name)}{suffix}")
                t0 = time.perf_counter()
                call(p)
                times[name].append(time.perf_counter() - t0)
                sizes[name] = disk_bytes(p)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {n: statistics.median(ts) for n, ts in times.items()}
    print(f"Dataset {shape} x 3 float32 = {nbytes / 1e6:.1f} MB, median of {repeat}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'tool':22s} {'seconds':>8s} {'MB written':>11s} {'to_b2nd speed ratio':>20s}")
    for n in names:
        print(f"{n:22s} {med[n]:8.3f} {sizes[n] / 1e6:11.1f} {med[n] / med['to_b2nd']:20.2f}")
    if args.json:
        out = {
            "versions": common_versions(),
            "shape": shape,
            "seconds": med,
            "bytes": sizes,
            "loadavg": os.getloadavg()[0],
        }
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
