"""``b2store demo``: a small synthetic climate dataset written to Blosc2, then opened with
xarray (the ``b2nd`` engine, lazily, with dask), with zarr (``B2ndStore``) and with
python-blosc2 when it is installed, with a climatology and an anomaly computed on the way.

The dataset is generated, not downloaded: two years of daily 2 m temperature, precipitation
and sea-level pressure on a 5 degree grid (about 23 MB), with a seasonal cycle, a latitude
gradient and weather noise, so that it compresses as real fields do and not as random bytes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

__all__ = ["make_dataset", "run", "run_demo"]


def make_dataset(ntime: int = 730, nlat: int = 36, nlon: int = 72, seed: int = 0):
    """A synthetic daily climate dataset (``time, lat, lon``) as an ``xarray.Dataset``.

    Parameters
    ----------
    ntime, nlat, nlon : int
        Days from 2000-01-01, latitudes and longitudes (a regular grid).
    seed : int
        For the weather noise; the same seed gives the same dataset.

    Returns
    -------
    xarray.Dataset
        ``t2m`` (K, float32), ``precip`` (mm/day, float32, dry days are 0) and ``mslp``
        (hPa, float32), with CF attributes and coordinates.
    """
    import pandas as pd
    import xarray as xr

    rng = np.random.default_rng(seed)
    time_ = pd.date_range("2000-01-01", periods=ntime, freq="D")
    lat = np.linspace(-90 + 90 / nlat, 90 - 90 / nlat, nlat)
    lon = np.arange(nlon) * (360.0 / nlon)
    day = (np.arange(ntime) / 365.25)[:, None, None]
    phi = np.deg2rad(lat)[None, :, None]
    lam = np.deg2rad(lon)[None, None, :]
    # Seasons are opposite in the two hemispheres and stronger towards the poles.
    season = -np.cos(2 * np.pi * day) * np.sin(phi) * 15.0
    base = 300.0 - 45.0 * np.sin(phi) ** 2 + 3.0 * np.cos(lam) * np.cos(phi)
    weather = _smooth_noise(rng, (ntime, nlat, nlon), 0.8) * 3.0
    t2m = (base + season + weather + 0.02 * day).astype(np.float32)
    wet = _smooth_noise(rng, (ntime, nlat, nlon), 0.6) + 0.8 * np.cos(phi) ** 4 - 0.5
    precip = np.where(wet > 0, rng.gamma(0.8, 6.0, wet.shape), 0.0).astype(np.float32)
    mslp = (1013.0 + 8.0 * np.cos(2 * phi) + 0.5 * weather * np.sin(phi)).astype(np.float32)
    dims = ("time", "lat", "lon")
    return xr.Dataset(
        {
            "t2m": (dims, np.round(t2m, 2), {"units": "K", "long_name": "2 m temperature"}),
            "precip": (dims, np.round(precip, 1), {"units": "mm/day", "long_name": "rain"}),
            "mslp": (dims, np.round(mslp, 1), {"units": "hPa", "long_name": "sea-level pressure"}),
        },
        coords={
            "time": time_,
            "lat": ("lat", lat, {"units": "degrees_north"}),
            "lon": ("lon", lon, {"units": "degrees_east"}),
        },
        attrs={"title": "b2store demo: a synthetic climate", "source": "generated"},
    )


def _smooth_noise(rng, shape, rho: float) -> np.ndarray:
    """Gaussian noise correlated in time (AR(1) with coefficient ``rho``), unit variance."""
    noise = rng.standard_normal(shape)
    out = np.empty(shape)
    out[0] = noise[0]
    scale = np.sqrt(1 - rho**2)
    for t in range(1, shape[0]):
        out[t] = rho * out[t - 1] + scale * noise[t]
    return out


# --- reporting ------------------------------------------------------------------------------


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _disk_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


@contextlib.contextmanager
def _timed(times: dict, name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    times[name] = time.perf_counter() - start


def _check(ok: bool, checks: list) -> str:
    checks.append(ok)
    return "yes" if ok else "NO"


def _climatology_numpy(values: np.ndarray, months: np.ndarray):
    clim = np.stack([values[months == m].mean(axis=0, dtype=np.float64) for m in range(1, 13)])
    return clim, values - clim[months - 1]


# --- the demo -----------------------------------------------------------------------------


def run_demo(directory: str | os.PathLike | None = None, *, keep: bool = False) -> int:
    """Run the demo in ``directory`` (a new temporary one, removed afterwards, by default) and
    print what it does; 0 when every check passed, else 1."""
    try:
        import dask  # noqa: F401
        import xarray as xr
    except ImportError as exc:
        raise ImportError(f"b2store demo needs xarray and dask ({exc.name} is missing)") from exc
    if directory is None:
        with tempfile.TemporaryDirectory(prefix="b2store-demo-") as tmp:
            return _run(Path(tmp), xr, keep=False)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return _run(directory, xr, keep=True)


def _run(root: Path, xr, keep: bool) -> int:
    from .. import __version__
    from ..integrations.xarray.to_b2nd import to_b2nd

    times: dict[str, float] = {}
    checks: list[bool] = []
    print(f"b2store {__version__} demo, in {root}")

    ds = make_dataset()
    nbytes = sum(v.nbytes for v in ds.data_vars.values())
    shape = ds.t2m.shape
    print(
        f"\n1. A synthetic climate: {', '.join(ds.data_vars)} on (time, lat, lon) = {shape}, "
        f"daily for 2 years on a 5 degree grid, {_mb(nbytes)} of float32"
    )

    path = root / "climate.b2d"
    month = (30, *shape[1:])  # about a month of days per chunk
    encoding = {
        "t2m": {"codec": "zstd", "clevel": 5, "filters": ["shuffle"], "chunks": month},
        "precip": {"codec": "zstd", "clevel": 5, "filters": ["bitshuffle"], "chunks": month},
        "mslp": {"codec": "lz4", "clevel": 5, "filters": ["shuffle", "bytedelta"], "chunks": month},
    }
    with _timed(times, "write"):
        to_b2nd(ds, path, encoding=encoding, mode="w")  # (the demo's own files, rewritten)
    size = _disk_size(path)
    print(
        f"   b2store.to_b2nd(ds, {path.name!r}) wrote a python-blosc2 .b2d tree: "
        f"{_mb(nbytes)} -> {_mb(size)} ({nbytes / size:.2f}x) in {times['write']:.2f} s"
    )
    for name, enc in encoding.items():
        arr_size = _disk_size(path / f"{name}.b2nd")
        print(
            f"     {name:7s} {enc['codec']:4s} {'+'.join(enc['filters']):17s} "
            f"{_mb(ds[name].nbytes)} -> {_mb(arr_size)} ({ds[name].nbytes / arr_size:.2f}x)"
        )

    # --- xarray, lazily, with dask ---
    with _timed(times, "open"):
        lazy = xr.open_dataset(path, engine="b2nd", chunks={})
    with lazy:
        t2m = lazy.t2m
        print(
            f"\n2. xarray: xr.open_dataset({path.name!r}, engine='b2nd', chunks={{}}) in "
            f"{times['open'] * 1e3:.0f} ms: lazy, dask chunks {t2m.data.chunksize} = the "
            "b2nd chunks"
        )
        with _timed(times, "climatology"):
            clim = t2m.groupby("time.month").mean("time").compute()
            anomaly = (t2m.groupby("time.month") - clim).compute()
        north = clim.sel(lat=slice(30, 90))
        monthly = north.weighted(np.cos(np.deg2rad(north.lat))).mean(("lat", "lon")).values
        print(
            f"   monthly climatology and daily anomaly of t2m with dask in "
            f"{times['climatology']:.2f} s"
        )
        print(
            "   mean t2m north of 30N by month (K): "
            + " ".join(f"{v:.1f}" for v in monthly[[0, 3, 6, 9]])
            + " (Jan Apr Jul Oct)"
        )
        where = np.unravel_index(int(np.abs(anomaly.values).argmax()), anomaly.shape)
        peak = anomaly.values[where]
        print(
            f"   largest anomaly {peak:+.1f} K on {str(anomaly.time.values[where[0]])[:10]} "
            f"at {float(anomaly.lat[where[1]]):.1f}N {float(anomaly.lon[where[2]]):.1f}E"
        )
        clim_np, anom_np = _climatology_numpy(ds.t2m.values, ds.time.dt.month.values)
        same = np.allclose(clim.values, clim_np, atol=1e-3) and np.allclose(
            anomaly.values, anom_np, atol=1e-3
        )
        print(f"   the same as numpy on the in-memory data: {_check(same, checks)}")

    out = root / "t2m_anomaly.b2nd"
    with _timed(times, "write_anomaly"):
        to_b2nd(anomaly.astype(np.float32).to_dataset(name="t2m_anomaly"), out, mode="w")
    print(
        f"   anomaly written to {out.name} (one frame): {_mb(_disk_size(out))} "
        f"in {times['write_anomaly']:.2f} s"
    )

    _zarr_part(path, ds, times, checks)
    _blosc2_part(path, out, ds, anomaly.values, times, checks)

    from .verify import verify

    with _timed(times, "verify"):
        report = verify(path)
    print(
        f"\n5. b2store verify {path.name}: {report['chunks']} chunks decoded, "
        f"all good: {_check(report['ok'], checks)}"
    )
    print(
        "\nTimes: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in times.items())
        + (f"\nFiles kept in {root}" if keep else "")
    )
    ok = all(checks)
    print("All checks passed." if ok else "SOME CHECKS FAILED.")
    return 0 if ok else 1


def _zarr_part(path: Path, ds, times: dict, checks: list) -> None:
    try:
        import zarr
    except ImportError:
        print("\n3. zarr: not installed, skipped (pip install zarr)")
        return
    from ..integrations.zarr.store import B2ndStore

    with _timed(times, "zarr"), warnings.catch_warnings():
        # A NaN _FillValue has no JSON form; the store leaves it out of the Zarr attributes.
        warnings.filterwarnings("ignore", ".*not JSON-safe", UserWarning)
        group = zarr.open_group(store=B2ndStore(path), mode="r")
        arr = group["t2m"]
        day = arr[400]
    print(
        f"\n3. zarr {zarr.__version__}: zarr.open_group(store=B2ndStore({path.name!r})) lists "
        f"{', '.join(sorted(group.array_keys()))}"
    )
    print(
        f"   t2m: a Zarr v{arr.metadata.zarr_format} array {arr.shape} {arr.dtype}, "
        f"codec {arr.metadata.codecs[0].to_dict()['name']}; no copy, no conversion"
    )
    same = np.array_equal(day, ds.t2m.values[400])
    print(
        f"   t2m[400] (one day) read in {times['zarr'] * 1e3:.0f} ms, equal to the data: "
        f"{_check(same, checks)}"
    )


def _blosc2_part(path: Path, out: Path, ds, anomaly, times: dict, checks: list) -> None:
    try:
        import blosc2
    except ImportError:
        print("\n4. python-blosc2: not installed, skipped (pip install blosc2 to compare)")
        return
    with _timed(times, "blosc2"):
        t2m = blosc2.open(str(path / "t2m.b2nd"))[:]
        anom = blosc2.open(str(out))[:]
    ok_t = np.array_equal(t2m, ds.t2m.values)
    ok_a = np.array_equal(anom, anomaly.astype(np.float32))
    print(
        f"\n4. python-blosc2 {blosc2.__version__} reads what b2store wrote "
        f"({times['blosc2']:.2f} s): t2m.b2nd equal: {_check(ok_t, checks)}, "
        f"{out.name} equal: {_check(ok_a, checks)}"
    )


def run(args) -> int:
    return run_demo(args.dir, keep=args.dir is not None)
