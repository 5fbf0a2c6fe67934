"""A new Dataset written by ``to_b2nd`` under the default sync setting, ``"commit"``: built
beside its target where no reader looks, so each file is synced once, when it is whole,
before the rename that publishes the tree (not around each change of each frame)."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import b2store
from b2store._sync import staged, sync_mode

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="names an fd's file through /proc/self/fd"
)


@pytest.fixture
def syncs(monkeypatch):
    """``(file name, its size then)`` for each ``os.fsync`` call (the real call still made)."""
    calls = []
    real = os.fsync

    def recording(fd):
        calls.append((os.path.basename(os.readlink(f"/proc/self/fd/{fd}")), os.fstat(fd).st_size))
        return real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    yield calls
    b2store.set_sync(None)


def _dataset() -> xr.Dataset:
    rng = np.random.default_rng(37)
    data = {n: (("t", "x"), rng.random((40, 50), dtype="f4")) for n in ("a", "b", "c")}
    return xr.Dataset(data, coords={"x": np.arange(50)}, attrs={"title": "t"})


@pytest.mark.parametrize("suffix", [".b2d", ".b2nd"])
def test_commit_syncs_each_file_once_when_whole(tmp_path, syncs, suffix):
    ds = _dataset() if suffix == ".b2d" else _dataset()[["a"]]
    path = b2store.to_b2nd(ds, tmp_path / f"x{suffix}")
    files = (
        {p.name: p.stat().st_size for p in Path(path).rglob("*") if p.is_file()}
        if os.path.isdir(path)
        else {os.path.basename(path): os.path.getsize(path)}
    )
    synced = [(name, size) for name, size in syncs if name in files]
    # Each file once, at its final size (whole); before, 4 each (around every change).
    assert sorted(synced) == sorted(files.items())
    # The rest: the empty frame each writer starts from, synced before it is renamed in.
    assert {name for name, _ in syncs} - set(files) == {"frame"}
    assert len(syncs) == 2 * len(files)
    xr.testing.assert_identical(xr.open_dataset(path, engine="b2nd").load(), ds)


def test_none_still_never_syncs(tmp_path, syncs):
    b2store.set_sync("none")
    b2store.to_b2nd(_dataset(), tmp_path / "x.b2d")
    assert syncs == []


def test_staged_is_undone_and_leaves_other_settings(monkeypatch):
    monkeypatch.delenv("B2STORE_SYNC", raising=False)
    with staged():
        assert sync_mode() == "close"
        b2store.set_sync("none")
        assert sync_mode() == "none"
        b2store.set_sync(None)
    assert sync_mode() == "commit"
    with pytest.raises(RuntimeError, match="inside"):
        with staged():
            raise RuntimeError("inside")
    assert sync_mode() == "commit"


@pytest.mark.parametrize("mode", ["commit", "close"])
def test_a_b2z_is_synced_whole_before_it_is_published(tmp_path, syncs, mode):
    """The zip is a new file made from the synced tree: it is synced itself, at its final
    size, before the rename that names it (it was not: a power cut could leave the name
    pointing at a file the disk never had)."""
    b2store.set_sync(mode)
    path = b2store.to_b2nd(_dataset(), tmp_path / "x.b2z")
    assert (os.path.basename(path), os.path.getsize(path)) in syncs
    xr.testing.assert_identical(xr.open_dataset(path, engine="b2nd").load(), _dataset())
