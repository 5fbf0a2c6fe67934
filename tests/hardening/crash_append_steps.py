"""The model and the child of the append kill tests (test_crash_append.py).

Step ``k`` appends two days of value ``k`` to a Dataset: a field ``a`` (time, x), a series
``b`` (time) and the time coordinate; in a tree it also sets the attribute ``k`` and adds a
variable ``v<k>`` (x), so that one step changes frames, replaces the group's attributes and
adds a file. The child runs ``python crash_append_steps.py PATH KIND START`` and prints each
step once ``to_b2nd`` returned.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

X = 3
CHUNKS = {"a": (3, 2), "b": (3,), "time": (3,)}


def days(k: int, single: bool):
    import xarray as xr

    time = pd.date_range("2001-01-01", periods=2, freq="D") + pd.Timedelta(days=2 * k)
    ds = xr.Dataset(
        {
            "a": (("time", "x"), np.full((2, X), k, "f8")),
            "b": ("time", np.full(2, k, "i4")),
        },
        {"time": time},
        attrs={"k": k},
    )
    if single:
        return ds.drop_vars("b")
    return ds.assign({f"v{k}": ("x", np.full(X, k, "i2"))}) if k else ds


def create(path: str, kind: str) -> None:
    from b2store import to_b2nd

    enc = {n: {"chunks": c} for n, c in CHUNKS.items() if not (kind == "frame" and n == "b")}
    to_b2nd(days(0, kind == "frame"), path, encoding=enc)


def step(path: str, kind: str, k: int) -> None:
    from b2store import to_b2nd

    to_b2nd(days(k, kind == "frame"), path, mode="a", append_dim="time")


def state(path: str, kind: str) -> int:
    """The step the stored Dataset is at; an AssertionError if it is at none (a mix)."""
    import xarray as xr

    with xr.open_dataset(path, engine="b2nd") as ds:
        ds = ds.load()
    n = ds.sizes["time"]
    assert n % 2 == 0, n
    k = n // 2 - 1
    steps = np.repeat(np.arange(k + 1), 2)
    np.testing.assert_array_equal(ds.a.values, np.repeat(steps[:, None], X, 1))
    want_time = pd.date_range("2001-01-01", periods=n, freq="D").values
    np.testing.assert_array_equal(ds.time.values, want_time)
    if kind != "frame":
        np.testing.assert_array_equal(ds.b.values, steps)
        assert ds.attrs["k"] == k, (ds.attrs["k"], k)
        extra = sorted(v for v in ds.data_vars if v.startswith("v"))
        assert extra == sorted(f"v{j}" for j in range(1, k + 1)), (extra, k)
        for j in range(1, k + 1):
            assert (ds[f"v{j}"].values == j).all()
    return k


def child(path: str, kind: str, start: int) -> None:
    k = start
    while True:
        k += 1
        step(path, kind, k)
        print(k, flush=True)


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2], int(sys.argv[3]))
