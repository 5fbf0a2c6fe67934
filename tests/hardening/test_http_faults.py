"""The class of a misbehaving HTTP server, generated: random sequences of faults (server
errors, missing objects, bodies cut short, dropped connections, slow answers, answers
without Content-Length) met at random points of opening and reading, through every entry
point that reads a URL.

Whatever the sequence: the data read is exactly the data, or the error is a ``RemoteError``
or a ``FileNotFoundError`` (both ``OSError``, naming the URL); never the HTTP client's own
exceptions, a ``FormatError`` or wrong data. And a sequence with at most as many failures
as there are retries, none a 404, always reads the data.
"""

from __future__ import annotations

import numpy as np
import pytest
from http_server import FAULTS, Faults, serve_directory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import b2store
from b2store.frame import remote

pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")

DATA = np.arange(60 * 40, dtype="<f8").reshape(60, 40)
DELAYS = (0.001, 0.002, 0.004)
_ROOT: list = []


@pytest.fixture(scope="module", autouse=True)
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    b2store.asarray(DATA, root / "a.b2nd", chunks=(20, 40), blocks=(10, 20)).close()
    b2store.to_b2nd(xr.Dataset({"v": (("y", "x"), DATA)}), root / "ds.b2z")
    _ROOT[:] = [root]
    yield root
    _ROOT.clear()


def _xarray(url):
    with xr.open_dataset(f"{url}/ds.b2z", engine="b2nd") as ds:
        return ds["v"].values


READERS = {
    "open": lambda url: b2store.open(f"{url}/a.b2nd")[...],
    "zarr": lambda url: zarr.open_array(b2store.B2ndStore(f"{url}/a.b2nd"), mode="r")[...],
    "b2z": lambda url: zarr.open_group(b2store.B2ndStore(f"{url}/ds.b2z"), mode="r")["v"][...],
    "xarray": _xarray,
}
FAILING = {"500", "503", "404", "truncate", "reset"}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    reader=st.sampled_from(sorted(READERS)),
    skip=st.integers(0, 12),
    faults=st.lists(st.sampled_from(FAULTS), min_size=1, max_size=6),
)
def test_random_fault_sequences(monkeypatch, reader, skip, faults):
    monkeypatch.setattr(remote, "RETRY_DELAYS", DELAYS)
    plan = Faults(plan=["ok"] * skip + list(faults))
    with serve_directory(_ROOT[0], plan) as (url, _):
        try:
            got = READERS[reader](url)
        except (b2store.RemoteError, FileNotFoundError) as exc:
            assert url in str(exc), exc
            failures = [f for f in plan.met if f in FAILING]
            assert "404" in failures or len(failures) > len(DELAYS), (plan.met, exc)
            return
    np.testing.assert_array_equal(got, DATA)
