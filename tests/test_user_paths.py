"""Errors name the path the user gave: a missing path opened read-only through zarr is a
FileNotFoundError naming it (not zarr's GroupNotFoundError), and a write that fails names its
target, never the hidden temporary it was being built under (``..x.b2nd.PID.HEX.new``)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import b2store
from b2store._userpath import stands_for
from b2store.frame.schunk import SChunk

zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")

from b2store.integrations.zarr.store import B2ndStore  # noqa: E402


@pytest.mark.parametrize("name", ["missing.b2nd", "missing.b2d", "missing.b2z", "missing"])
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_missing_path_read_through_zarr_is_file_not_found_naming_it(tmp_path, name):
    path = tmp_path / name
    msg = rf"no Blosc2 frame or tree to read: '{path}'"
    for opener in (zarr.open, zarr.open_array, lambda s: zarr.open_group(s, mode="r")):
        with pytest.raises(FileNotFoundError, match=msg) as exc:
            opener(B2ndStore(path))
        assert exc.value.filename == str(path)
    with pytest.raises(FileNotFoundError, match=msg):
        zarr.open(B2ndStore(path, mode="a"), mode="r")  # zarr's read-only copy of the store
    with pytest.raises(FileNotFoundError, match=msg):
        xr.open_zarr(B2ndStore(path, group=True), consolidated=False)
    assert not path.exists()


def test_a_missing_remote_path_is_file_not_found_too():
    pytest.importorskip("fsspec")
    with pytest.raises(FileNotFoundError, match="memory://nothing-here.b2nd"):
        zarr.open(B2ndStore("memory://nothing-here.b2nd"))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_writable_store_of_a_missing_path_still_creates_it(tmp_path):
    path = tmp_path / "new.b2nd"
    z = zarr.create_array(B2ndStore(path, mode="w"), shape=(3,), dtype="i4")
    z[:] = [1, 2, 3]
    assert b2store.open(path)[:].tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    "temp, user",
    [
        ("/d/..x.b2nd.12.0123456789ab.new.12.ba9876543210.new", "/d/x.b2nd"),
        ("/d/.x.b2nd.7482.7a0c7c2d1629.new", "/d/x.b2nd"),
        ("/d/.t.b2z.dwz73mgi.tmp", "/d/t.b2z"),
        ("/d/.t.b2d.rxmu1ili.tmp/v.b2nd", "/d/t.b2d"),
        ("/d/t.b2d/.v.b2nd.1.0123456789ab.new/chunk.0", "/d/t.b2d/v.b2nd"),
        ("/d/x.b2nd", None),
        ("/d/.hidden", None),
        ("/d/.b2store-lock", None),
    ],
)
def test_stands_for_maps_temporaries_to_their_targets(temp, user):
    assert stands_for(temp) == user


def _writers(target):
    x = np.arange(10.0)
    ds = xr.Dataset({"v": ("t", x)})
    sparse, b2z, b2d = (target.with_suffix(s) for s in (".sp", ".b2z", ".b2d"))
    return {
        "asarray": (target, lambda: b2store.asarray(x, urlpath=target, mode="w")),
        "asarray-sparse": (
            sparse,
            lambda: b2store.asarray(x, urlpath=sparse, mode="w", contiguous=False),
        ),
        "zeros": (target, lambda: b2store.zeros((4,), urlpath=target)),
        "full": (target, lambda: b2store.full((4,), 7, urlpath=target)),
        "frombuffer": (target, lambda: b2store.frombuffer(bytes(8), (2,), "i4", urlpath=target)),
        "schunk": (target, lambda: SChunk.create(target, typesize=8)),
        "to_b2nd": (target, lambda: b2store.to_b2nd(ds, target)),
        "to_b2nd-b2z": (b2z, lambda: b2store.to_b2nd(ds, b2z)),
        "to_b2nd-b2d": (b2d, lambda: b2store.to_b2nd(ds, b2d)),
        "store": (
            target,
            lambda: zarr.create_array(B2ndStore(target, mode="w"), shape=(4,), dtype="f8"),
        ),
    }


WRITERS = sorted(_writers(Path("x.b2nd")))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_failed_write_names_the_users_path_not_a_temporary(writer):
    # /proc takes no new files, even for root (a read-only directory does not stop root).
    target, write = _writers(Path("/proc/b2store-test.b2nd"))[writer]
    with pytest.raises(OSError, match=re.escape(str(target))) as exc:
        write()
    assert exc.value.filename == str(target), exc.value
    assert ".new" not in str(exc.value) and ".tmp" not in str(exc.value)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_write_into_a_read_only_directory_names_the_users_path(tmp_path, writer):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        target, write = _writers(folder / "x.b2nd")[writer]
        with pytest.raises(PermissionError, match=re.escape(str(target))) as exc:
            write()
        assert exc.value.filename == str(target), exc.value
    finally:
        folder.chmod(0o755)


_FULL_DISK_CHILD = r"""
import json, os, resource, signal, sys
import numpy as np, xarray as xr, b2store
name, target = sys.argv[1], sys.argv[2]
x = np.random.default_rng(0).random(50_000)
if name == "sparse-setitem":
    arr = b2store.asarray(np.zeros(50_000), target, chunks=(10_000,), contiguous=False)
elif name.startswith("asarray"):
    b2store.asarray(np.arange(10.0), target).close()  # an existing file, then overwritten
# A file-size limit stands in for a full disk: writes past it fail with EFBIG.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
try:
    if name == "asarray":
        b2store.asarray(x, target, clevel=0, mode="w")
    elif name == "asarray-sparse":
        b2store.asarray(x, target, clevel=0, contiguous=False, mode="w")
    elif name == "sparse-setitem":
        arr[:] = x
    else:
        b2store.to_b2nd(xr.Dataset({"v": ("t", x)}), target, encoding={"v": {"clevel": 0}})
except OSError as exc:
    print(json.dumps([exc.errno, exc.filename, str(exc)]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs RLIMIT_FSIZE")
@pytest.mark.parametrize(
    "name, suffix",
    [
        ("asarray", ".b2nd"),
        ("asarray-sparse", ".b2nd"),
        ("sparse-setitem", ".b2nd"),
        ("to_b2nd", ".b2nd"),
        ("to_b2nd", ".b2d"),
        ("to_b2nd", ".b2z"),
    ],
)
def test_a_full_disk_names_the_users_path_with_its_errno(tmp_path, name, suffix):
    """A short write is written on, so that the failure carries the system's errno (it was
    an OSError with none, "short write to .x.b2nd.PID.HEX.new"), and the error names the
    user's path: for a sparse frame, the frame, not a chunk file's temporary inside it."""
    import errno
    import json
    import subprocess

    target = tmp_path / f"x{suffix}"
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK_CHILD, name, str(target)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    code, filename, text = json.loads(done.stdout.strip().splitlines()[-1])
    assert code in (errno.EFBIG, errno.ENOSPC), text
    assert filename == str(target), text
    assert ".new" not in text and ".tmp" not in text and ".chunk" not in text, text
