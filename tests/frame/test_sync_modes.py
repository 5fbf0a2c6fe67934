"""When writes reach the disk (``b2store.set_sync`` / ``B2STORE_SYNC``): every change synced
(the default), everything at close, or never; the data is the same in every mode, and a
killed writer loses nothing in any (``tests/hardening/test_crash.py`` kills in each)."""

import os

import numpy as np
import pytest

import b2store
from b2store import SChunk
from b2store._sync import sync_mode

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 reads what each mode wrote")


@pytest.fixture
def syncs(monkeypatch):
    """The file descriptors ``os.fsync`` was called on, in order (the real call still made)."""
    calls = []
    real = os.fsync

    def counting(fd):
        calls.append(fd)
        return real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    yield calls
    b2store.set_sync(None)


def _changes(path, contiguous):
    """A new array, then three changes to it through a handle opened for writing."""
    arr = b2store.asarray(
        np.arange(400.0), path, chunks=(100,), blocks=(50,), contiguous=contiguous
    )
    arr.close()
    arr = b2store.open(path, mode="a")
    arr[:10] = -1.0
    arr.resize((500,))
    arr.vlmeta["units"] = "K"
    return arr


def _expected():
    x = np.concatenate([np.arange(400.0), np.zeros(100)])
    x[:10] = -1.0
    return x


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_commit_syncs_every_change_before_it_returns(tmp_path, syncs, contiguous):
    b2store.set_sync("commit")
    arr = _changes(str(tmp_path / "a.b2nd"), contiguous)
    during = len(syncs)
    arr.close()
    # contiguous: 2 per change (new bytes, then the header); sparse: each file written
    assert during >= 6 and len(syncs) == during


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_close_syncs_once_what_was_written_at_close(tmp_path, syncs, contiguous):
    b2store.set_sync("close")
    path = str(tmp_path / "a.b2nd")
    arr = _changes(path, contiguous)
    created = len(syncs)  # asarray's own close (and its empty new frame)
    arr[20:30] = 7.0
    assert len(syncs) == created  # nothing while the handle writes
    arr.close()
    synced = len(syncs) - created
    # the file; or the files this handle wrote that are still there: the index and the
    # latest chunk 0 (the one it replaced is gone)
    assert synced == (1 if contiguous else 2), synced
    expected = _expected()
    expected[20:30] = 7.0
    np.testing.assert_array_equal(b2store.open(path)[:], expected)
    np.testing.assert_array_equal(blosc2.open(path)[:], expected)


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_none_never_syncs(tmp_path, syncs, contiguous):
    b2store.set_sync("none")
    path = str(tmp_path / "a.b2nd")
    _changes(path, contiguous).close()
    b2store.to_b2nd(
        __import__("xarray").Dataset({"t": ("x", np.arange(5.0))}), str(tmp_path / "t.b2d")
    )
    assert syncs == []
    np.testing.assert_array_equal(blosc2.open(path)[:], _expected())


def test_the_setting_is_checked(monkeypatch):
    with pytest.raises(ValueError, match="sync must be one of commit, close, none"):
        b2store.set_sync("always")
    monkeypatch.setenv("B2STORE_SYNC", "sometimes")
    with pytest.raises(ValueError, match="B2STORE_SYNC must be one of"):
        sync_mode()
    monkeypatch.setenv("B2STORE_SYNC", "none")
    assert sync_mode() == "none"
    b2store.set_sync("close")  # the call wins over the environment
    assert sync_mode() == "close"
    b2store.set_sync(None)
    monkeypatch.delenv("B2STORE_SYNC")
    assert sync_mode() == "commit"


def test_a_frame_keeps_the_setting_it_was_opened_with(tmp_path, syncs):
    path = str(tmp_path / "f.b2frame")
    with SChunk.create(path, chunksize=800, typesize=8) as s:
        b2store.set_sync("none")
        s.append_data(np.arange(100.0))  # opened under "commit": synced
        assert len(syncs) >= 2
