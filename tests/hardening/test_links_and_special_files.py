"""Links and special files inside what b2store writes or reads.

Writers never follow a symbolic link planted inside the frame or tree they write (the lock,
a chunk file, a member, a group directory, a temporary's name): the link is refused
(``LinkError``, a ``PermissionError``) or replaced, never written through, and nothing
outside changes. A link in the path the user gives is followed.

Readers never block on a FIFO, a socket or a device where a file should be: it is a
``FormatError`` naming the path. Every FIFO test runs the reader in a thread with a
timeout, so that a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import os
import re
import socket
import threading

import numpy as np
import pytest

import b2store
from b2store import FormatError, LinkError, SChunk, _files

TIMEOUT = 20.0

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX special files")


def guarded(fn, *unblock):
    """``fn()`` in a thread; a call still running after TIMEOUT fails the test (the FIFOs in
    ``unblock`` are then opened for writing, so the stuck thread can finish)."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(TIMEOUT)
    if t.is_alive():
        for path in unblock:
            try:
                os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK))
            except OSError:
                pass
        pytest.fail(f"blocked for {TIMEOUT} s on a special file")
    if "error" in out:
        raise out["error"]
    return out.get("value")


# --- what is planted ---------------------------------------------------------------------------


def plant(kind: str, at, outside):
    """Put a ``kind`` at ``at``: a link to a file outside (``victim`` there, returned with its
    content), a dangling link into ``outside``, a link to a directory outside, a FIFO, a
    socket, or a link to a character device."""
    at = os.fspath(at)
    if os.path.isdir(at) and not os.path.islink(at):
        import shutil

        shutil.rmtree(at)
    elif os.path.lexists(at):
        os.unlink(at)
    victim = os.path.join(outside, "victim")
    if kind == "link-file":
        with open(victim, "wb") as fh:
            fh.write(b"precious" * 16)
        os.symlink(victim, at)
    elif kind == "link-dangling":
        os.symlink(os.path.join(outside, "made-outside"), at)
    elif kind == "link-dir":
        os.makedirs(os.path.join(outside, "dir"), exist_ok=True)
        os.symlink(os.path.join(outside, "dir"), at)
    elif kind == "fifo":
        os.mkfifo(at)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(at)
        except OSError as exc:  # a path too long for a socket address
            pytest.skip(f"no socket at {at}: {exc}")
        s.close()
    elif kind == "device":
        os.symlink(os.devnull, at)
    else:  # pragma: no cover
        raise AssertionError(kind)


def snapshot(outside) -> dict:
    """Every file under ``outside`` and its bytes."""
    found = {}
    for dirpath, _dirs, files in os.walk(outside):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as fh:
                found[os.path.relpath(p, outside)] = fh.read()
    return found


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "outside"
    d.mkdir()
    return d


LINKS = ["link-file", "link-dangling", "link-dir"]
SPECIALS = ["fifo", "socket", "device"]
# how the refusal names each kind once followed ("device" is a link to /dev/null)
FOUND = {
    "fifo": "a FIFO",
    "socket": "a socket",
    "device": "a character device",
    "link-dir": "a directory",
}


# --- writers: the sparse frame's lock ----------------------------------------------------------


def _sparse_schunk(path):
    s = SChunk.create(path, contiguous=False, typesize=4, chunksize=64)
    s.append_data(np.arange(16, dtype="<i4"))
    s.close()


def _sparse_array(path):
    b2store.asarray(
        np.arange(100, dtype="<i4").reshape(10, 10), path, chunks=(5, 5), contiguous=False
    ).close()


def _write_schunk(path):
    with SChunk.open(path, mode="a") as s:
        s.append_data(np.arange(16, dtype="<i4"))


def _write_array(path):
    with b2store.open(path, mode="a") as a:
        a[:3, :3] = 7


def _write_zarr(path):
    zarr = pytest.importorskip("zarr")
    z = zarr.open_array(b2store.B2ndStore(path, mode="a"), mode="a")
    z[:3, :3] = 7


SPARSE_WRITERS = [
    pytest.param(_sparse_schunk, _write_schunk, id="schunk"),
    pytest.param(_sparse_array, _write_array, id="b2nd"),
    pytest.param(_sparse_array, _write_zarr, id="zarr-store"),
]


@pytest.mark.parametrize("kind", LINKS)
@pytest.mark.parametrize(("make", "write"), SPARSE_WRITERS)
def test_a_link_as_a_sparse_frames_lock_is_refused(tmp_path, outside, kind, make, write):
    path = tmp_path / "s.b2nd"
    make(path)
    plant(kind, path / ".b2store-lock", outside)
    before = snapshot(outside)
    with pytest.raises(LinkError, match=r"\.b2store-lock is a symbolic link"):
        write(path)
    assert snapshot(outside) == before  # not overwritten, not created
    assert not (outside / "made-outside").exists()
    assert isinstance(LinkError("x"), PermissionError)


@pytest.mark.parametrize("kind", ["fifo", "socket", "directory"])
@pytest.mark.parametrize(("make", "write"), SPARSE_WRITERS)
def test_a_lock_that_is_not_a_regular_file_is_refused(tmp_path, outside, kind, make, write):
    path = tmp_path / "s.b2nd"
    make(path)
    lock = path / ".b2store-lock"
    if kind == "directory":
        lock.unlink(missing_ok=True)
        lock.mkdir()
    else:
        plant(kind, lock, outside)
    with pytest.raises(FormatError, match=r"a regular file at .*\.b2store-lock"):
        guarded(lambda: write(path), lock)


# --- writers: chunk files, temporaries ---------------------------------------------------------


@pytest.mark.parametrize("kind", LINKS)
def test_a_chunk_file_that_is_a_link_is_replaced_never_written_through(tmp_path, outside, kind):
    path = tmp_path / "s.b2frame"
    _sparse_schunk(path)
    with SChunk.open(path, mode="a") as s:  # a second chunk, so one can be deleted
        s.append_data(np.arange(16, dtype="<i4"))
    plant(kind, path / "00000000.chunk", outside)
    before = snapshot(outside)
    with SChunk.open(path, mode="a") as s:
        s.append_data(np.full(16, 6, "<i4"))
        try:  # (a change that reads the old chunk cannot read a dangling link or a directory)
            s.update_chunk(0, b2store.encode_chunk(np.full(16, 5, "<i4"), typesize=4))
            s.delete_chunk(0)
        except FormatError:
            assert kind != "link-file"
        else:
            assert not (path / "00000000.chunk").is_symlink()  # the link went with the chunk
    assert snapshot(outside) == before
    assert not (outside / "made-outside").exists()


def test_a_temporary_name_taken_by_a_link_is_never_written_through(tmp_path, outside, monkeypatch):
    # Temporary names are random; a link planted where one will be made is refused by
    # O_EXCL (the write fails) rather than followed.
    plant("link-file", tmp_path / ".x.1.000000000000.tmp", outside)
    before = snapshot(outside)
    monkeypatch.setattr(
        _files, "temp_name", lambda d, n, s="tmp": tmp_path / f".{n}.1.{'0' * 12}.{s}"
    )
    with pytest.raises(FileExistsError, match=r"\.x\.1\.000000000000\.tmp"):
        _files.write_atomic(tmp_path / "x", b"new")
    assert snapshot(outside) == before
    assert not (tmp_path / "x").exists()


# --- writers: trees (B2ndStore) ---------------------------------------------------------------


def _tree(tmp_path):
    zarr = pytest.importorskip("zarr")
    root = tmp_path / "t.b2d"
    g = zarr.open_group(b2store.B2ndStore(root, mode="w"), mode="w")
    g.create_group("g")
    g.create_array("g/a", shape=(10,), dtype="<i4", chunks=(5,))[:] = np.arange(10)
    g.attrs["x"] = 1
    return root


@pytest.mark.parametrize("kind", LINKS)
@pytest.mark.parametrize(
    "member", ["g/a.b2nd", "g", "g/__vlmeta__.b2f", "embed.b2e", "__vlmeta__.b2f"]
)
def test_a_link_in_a_tree_is_never_written_through(tmp_path, outside, kind, member):
    zarr = pytest.importorskip("zarr")
    root = _tree(tmp_path)
    if member == "g" and kind == "link-dir":  # the group directory, moved out and linked
        import shutil

        shutil.copytree(root / "g", outside / "dir")
        shutil.rmtree(root / "g")
        os.symlink(outside / "dir", root / "g")
    else:
        plant(kind, root / member, outside)
    before = snapshot(outside)

    def write():
        g = zarr.open_group(b2store.B2ndStore(root, mode="a"), mode="a")
        g.attrs["y"] = 2
        g["g"].attrs["y"] = 2
        g.create_array("g/b", shape=(4,), dtype="<i4", chunks=(2,))[:] = 1
        g["g/a"][:2] = 5

    try:
        write()
    except (LinkError, FormatError, KeyError, FileNotFoundError, NotADirectoryError) as exc:
        if isinstance(exc, PermissionError):
            assert "symbolic link" in str(exc)
    assert snapshot(outside) == before
    assert not (outside / "made-outside").exists()


def test_deleting_a_group_never_follows_a_linked_directory(tmp_path, outside):
    zarr = pytest.importorskip("zarr")
    root = _tree(tmp_path)
    import shutil

    shutil.copytree(root / "g", outside / "dir")
    shutil.rmtree(root / "g")
    os.symlink(outside / "dir", root / "g")
    before = snapshot(outside)
    store = b2store.B2ndStore(root, mode="a")
    g = zarr.open_group(store, mode="a")
    try:  # a linked group is not part of the tree (not listed), or refused
        del g["g"]
    except (KeyError, LinkError):
        pass
    import asyncio

    asyncio.run(store.delete_dir("g"))
    assert snapshot(outside) == before


def test_a_link_in_the_users_own_path_is_followed(tmp_path, outside):
    os.symlink(outside, tmp_path / "via")
    b2store.asarray(np.arange(5), tmp_path / "via" / "a.b2nd").close()
    with b2store.open(outside / "a.b2nd") as a:
        assert list(a[:]) == [0, 1, 2, 3, 4]
    SChunk.create(tmp_path / "via" / "s", contiguous=False).close()
    with SChunk.open(tmp_path / "via" / "s", mode="a") as s:
        s.append_data(np.arange(4, dtype="u1"))
    assert (outside / "s" / ".b2store-lock").is_file()


# --- readers: special files at each position --------------------------------------------------


def _frame_at(path):
    b2store.asarray(np.arange(10, dtype="<i4"), path).close()


def _open_frame(path):
    with b2store.open(path) as a:
        return a[...]


def test_special_files_as_a_frame_are_refused(tmp_path, outside):
    for kind in SPECIALS:
        path = tmp_path / f"{kind}.b2nd"
        plant(kind, path, outside)
        with pytest.raises(FormatError, match=f"a regular file at .*{kind}.b2nd"):
            guarded(lambda path=path: _open_frame(path), path)


@pytest.mark.parametrize("kind", SPECIALS)
def test_a_special_sparse_chunk_file_is_refused(tmp_path, outside, kind):
    path = tmp_path / "s.b2nd"
    _sparse_array(path)
    chunk = path / "00000000.chunk"
    plant(kind, chunk, outside)
    with pytest.raises(FormatError, match=r"a regular file at .*00000000\.chunk"):
        guarded(lambda: _open_frame(path), chunk)


def _b2d(tmp_path):
    xr = pytest.importorskip("xarray")
    root = tmp_path / "t.b2d"
    tree = xr.DataTree.from_dict(
        {
            "/": xr.Dataset({"a": ("x", np.arange(4))}, attrs={"k": 1}),
            "/g": xr.Dataset({"b": ("y", np.arange(3.0))}, attrs={"j": 2}),
        }
    )
    b2store.to_b2nd(tree, root)
    return root


def _read_tree(root):
    t = b2store.open_tree(root)
    for attrs in t.groups().values():
        dict(attrs)
    for ref in t.arrays().values():
        with ref.open() as a:
            a[...]
    return t


def _read_zarr(root):
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(b2store.B2ndStore(root), mode="r")
    for _name, a in g.arrays():
        a[...]
    for _name, sub in g.groups():
        dict(sub.attrs)
        for _n, a in sub.arrays():
            a[...]
    return dict(g.attrs)


def _read_xarray(root):
    xr = pytest.importorskip("xarray")
    with xr.open_datatree(root, engine="b2nd") as t:
        t.load()


def _read_cli(root):
    import contextlib
    import io

    from b2store.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["info", str(root)])
    if code:
        raise FormatError("cli", "exit status 0", f"{code}: {err.getvalue()}")


READERS = [
    pytest.param(_read_tree, id="open_tree"),
    pytest.param(_read_zarr, id="zarr"),
    pytest.param(_read_xarray, id="xarray"),
    pytest.param(_read_cli, id="cli-info"),
]
MEMBERS = ["a.b2nd", "g/b.b2nd", "embed.b2e", "__vlmeta__.b2f", "g/__vlmeta__.b2f"]


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("member", MEMBERS)
@pytest.mark.parametrize("read", READERS)
def test_a_special_file_in_a_b2d_tree_is_refused(tmp_path, outside, kind, member, read):
    root = _b2d(tmp_path)
    at = root / member
    plant(kind, at, outside)
    with pytest.raises((FormatError, SystemExit), match=r"a regular file at|FIFO|socket|device"):
        guarded(lambda: read(root), at)


@pytest.mark.parametrize("kind", SPECIALS)
def test_a_special_file_as_a_b2z_is_refused(tmp_path, outside, kind):
    path = tmp_path / "t.b2z"
    plant(kind, path, outside)
    # refused as what it is, not read (stat's size 0) and refused as a zip with no signature
    with pytest.raises(FormatError, match=f"expected a regular file at .*, found {FOUND[kind]}$"):
        guarded(lambda: b2store.open_tree(path).arrays(), path)


@pytest.mark.parametrize("kind", SPECIALS)
def test_xarray_does_not_claim_or_block_on_a_special_file(tmp_path, outside, kind):
    pytest.importorskip("xarray")
    from b2store.integrations.xarray.backend import B2ndBackendEntrypoint

    xr = pytest.importorskip("xarray")
    path = tmp_path / "t.bin"  # no suffix to go by: the magic bytes are looked at
    plant(kind, path, outside)
    assert guarded(lambda: B2ndBackendEntrypoint().guess_can_open(str(path)), path) is False
    with pytest.raises(FormatError, match="a regular file at"):
        guarded(lambda: xr.open_dataset(path, engine="b2nd"), path)


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("command", ["info", "dump", "verify", "decode"])
def test_the_command_line_refuses_a_special_file(tmp_path, outside, kind, command, capsys):
    from b2store.cli import main

    path = tmp_path / "x.b2nd"
    plant(kind, path, outside)
    argv = [command, str(path)] + (["-o", str(tmp_path / "out")] if command == "decode" else [])
    code = guarded(lambda: main(argv), path)
    assert code != 0
    err = capsys.readouterr().err
    assert str(path) in err or "regular file" in err or "not a regular file" in err


# --- the helper itself ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SPECIALS + LINKS)
def test_open_regular_refuses_what_is_not_a_regular_file(tmp_path, outside, kind):
    path = tmp_path / "f"
    plant(kind, path, outside)
    if kind == "link-file":
        os.close(_files.open_regular(path))  # a reader may follow a link to a regular file
        with pytest.raises(LinkError, match="symbolic link"):
            _files.open_regular(path, nofollow=True)
        return
    if kind == "link-dangling":  # followed, as a reader may: to nothing
        expected, match = FileNotFoundError, re.escape(str(path))
    else:
        expected, match = FormatError, f"expected a regular file at .*, found {FOUND[kind]}$"
    with pytest.raises(expected, match=match):
        guarded(lambda: _files.open_regular(path), path)
