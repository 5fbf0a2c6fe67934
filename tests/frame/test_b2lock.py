"""python-blosc2's ``.b2lock`` sidecar (b2store/frame/b2lock.py): a python-blosc2 process with
locking on and a b2store process appending to and updating one array, while a third
(b2store) reads, lose no write and see no torn state; the generation counter moves as
c-blosc2 moves it; the sidecar is made only when asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import b2store
from b2store import LinkError

blosc2 = pytest.importorskip("blosc2")

# Each writer appends one item (its tag + i) and counts it in item 0, in one locked change;
# so every committed state has a[0] == len(a) - 1 and no zero past item 0.
WORKER = textwrap.dedent(
    """
    import json, sys, time
    role, path = sys.argv[1], sys.argv[2]
    n = int(float(sys.argv[3]))
    out = {}
    if role == "blosc2":
        import blosc2
        a = blosc2.open(path, mode="a", locking=True)
        for i in range(n):
            with a.schunk.holding_lock():
                a.refresh()  # (python-blosc2 re-syncs its shape on data access only)
                k = a.shape[0]
                a.resize((k + 1,))
                a[k] = 1_000_000 + i
                a[0] = int(a[0]) + 1
    elif role == "b2store":
        import b2store
        b = b2store.open(path, mode="a")
        for i in range(n):
            with b.schunk.changing():
                k = len(b[:])
                b.resize((k + 1,))
                b[k] = 2_000_000 + i
                b[0] = int(b[0]) + 1
    else:
        import b2store
        r = b2store.open(path)
        reads = torn = 0
        end = time.monotonic() + float(sys.argv[3])
        while time.monotonic() < end:
            v = r[:]
            reads += 1
            if v[0] != len(v) - 1 or (v[1:] == 0).any() or len(set(v[1:].tolist())) != len(v) - 1:
                torn += 1
        out.update(reads=reads, torn=torn)
    print(json.dumps(out))
    """
)


def _run_both(path, n: int, read_seconds: float, contiguous: bool, env_locking=False) -> dict:
    start = np.zeros(1, np.int64)
    if path.parent.suffix == ".b2d":  # a node of a tree, made by python-blosc2's DictStore
        with blosc2.DictStore(str(path.parent), mode="w", locking=True) as store:
            store[f"/{path.stem}"] = blosc2.asarray(start, chunks=(8,), blocks=(4,))
    else:
        blosc2.asarray(
            start,
            urlpath=str(path),
            mode="w",
            chunks=(8,),
            blocks=(4,),
            contiguous=contiguous,
            locking=True,
        )
    env = {k: v for k, v in os.environ.items() if k != "BLOSC_LOCKING"}
    if env_locking:
        env["BLOSC_LOCKING"] = "1"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, role, str(path), str(k)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for role, k in [("blosc2", n), ("b2store", n), ("reader", read_seconds)]
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out))
    return results[2]


def _check_final(path, n: int) -> None:
    ours = b2store.open(str(path))[:]
    theirs = blosc2.open(str(path))[:]
    np.testing.assert_array_equal(ours, theirs)
    expected = {*range(1_000_000, 1_000_000 + n), *range(2_000_000, 2_000_000 + n)}
    assert (len(ours), int(ours[0])) == (2 * n + 1, 2 * n)
    assert set(ours[1:].tolist()) == expected


@pytest.mark.slow  # (~8-10 s each on a loaded machine: three interpreters start)
@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "sparse"])
def test_a_python_blosc2_writer_with_locking_and_a_b2store_writer_lose_nothing(
    tmp_path, contiguous
):
    path = tmp_path / "x.b2nd"
    reader = _run_both(path, 12, 0.5, contiguous)
    _check_final(path, 12)
    assert reader["reads"] > 0 and reader["torn"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "sparse"])
def test_two_libraries_writing_at_length_lose_nothing(tmp_path, contiguous):
    path = tmp_path / "x.b2nd"
    reader = _run_both(path, 300, 8, contiguous)
    _check_final(path, 300)
    assert reader["reads"] > 0 and reader["torn"] == 0


@pytest.mark.slow
def test_two_libraries_writing_a_node_of_a_tree_lose_nothing(tmp_path):
    # python-blosc2 locks a .b2d's leaves (their own sidecars) under BLOSC_LOCKING only.
    path = tmp_path / "t.b2d" / "x.b2nd"
    reader = _run_both(path, 100, 4, True, env_locking=True)
    _check_final(path, 100)
    assert (tmp_path / "t.b2d" / "x.b2nd.b2lock").is_file()
    assert reader["reads"] > 0 and reader["torn"] == 0


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "sparse"])
def test_b2store_waits_while_python_blosc2_holds_its_lock(tmp_path, contiguous):
    path = str(tmp_path / "a.b2nd")
    theirs = blosc2.asarray(
        np.arange(20), urlpath=path, mode="w", chunks=(10,), contiguous=contiguous, locking=True
    )
    ours = b2store.open(path, mode="a")
    reader = b2store.open(path)
    done = {}

    def write():
        ours[0] = -1
        done["write"] = True

    def read():
        done["read"] = reader[:3].tolist()

    with theirs.schunk.holding_lock():  # python-blosc2 mid-change: both must wait
        threads = [threading.Thread(target=write), threading.Thread(target=read)]
        for thread in threads:
            thread.start()
        threads[0].join(0.5)
        assert done == {}  # (before: both went through at once)
        theirs[1] = 100
    for thread in threads:
        thread.join(30)
    assert done["write"] and done["read"] in ([0, 100, 2], [-1, 100, 2])
    assert ours[:3].tolist() == theirs[:3].tolist() == [-1, 100, 2]


def _generation(path) -> int:
    return int.from_bytes(path.read_bytes()[8:16], "little")


def test_a_b2store_change_bumps_the_generation_as_python_blosc2_sees_it(tmp_path):
    path = tmp_path / "a.b2nd"
    theirs = blosc2.asarray(np.arange(20), urlpath=str(path), mode="w", chunks=(10,), locking=True)
    sidecar = tmp_path / "a.b2nd.b2lock"
    before = _generation(sidecar)
    ours = b2store.open(str(path), mode="a")
    ours[0:3] = -1  # one change: one exclusive hold, one bump (c-blosc2's frame_lock)
    assert _generation(sidecar) == before + 1
    assert theirs[:5].tolist() == [-1, -1, -1, 3, 4]  # python-blosc2's stale view re-synced
    theirs[4] = 44
    assert ours[:5].tolist() == [-1, -1, -1, 3, 44]  # and b2store's


def test_the_sidecar_is_made_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.delenv("BLOSC_LOCKING", raising=False)
    b2store.asarray(np.arange(20), urlpath=tmp_path / "a.b2nd")
    arr = b2store.open(str(tmp_path / "a.b2nd"), mode="a")
    arr[0] = 5
    assert not (tmp_path / "a.b2nd.b2lock").exists()
    monkeypatch.setenv("BLOSC_LOCKING", "0")  # c-blosc2: "0" leaves it off
    b2store.open(str(tmp_path / "a.b2nd"), mode="a")[0] = 6
    assert not (tmp_path / "a.b2nd.b2lock").exists()
    monkeypatch.setenv("BLOSC_LOCKING", "1")  # (read when a handle opens, as c-blosc2 does)
    b2store.open(str(tmp_path / "a.b2nd"), mode="a")[0] = 7
    assert _generation(tmp_path / "a.b2nd.b2lock") == 1


def test_a_writer_never_writes_through_a_linked_sidecar(tmp_path):
    path = tmp_path / "a.b2nd"
    blosc2.asarray(np.arange(20), urlpath=str(path), mode="w", chunks=(10,), locking=True)
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep me as I am!")
    (tmp_path / "a.b2nd.b2lock").unlink()
    (tmp_path / "a.b2nd.b2lock").symlink_to(outside)
    arr = b2store.open(str(path), mode="a")
    with pytest.raises(LinkError, match="a.b2nd.b2lock"):
        arr[0] = 5
    assert outside.read_bytes() == b"keep me as I am!"


def test_locking_true_makes_the_sidecar_and_false_still_honours_one(tmp_path, monkeypatch):
    monkeypatch.delenv("BLOSC_LOCKING", raising=False)
    b2store.asarray(np.arange(20), urlpath=tmp_path / "a.b2nd")
    sidecar = tmp_path / "a.b2nd.b2lock"
    b2store.open(str(tmp_path / "a.b2nd"), mode="a", locking=True)[0] = 1
    assert _generation(sidecar) == 1
    # False asks for no sidecar, but one there means a python-blosc2 handle relies on it.
    b2store.open(str(tmp_path / "a.b2nd"), mode="a", locking=False)[0] = 2
    assert _generation(sidecar) == 2
    assert blosc2.open(str(tmp_path / "a.b2nd"), locking=True)[:3].tolist() == [2, 1, 2]


def test_a_tree_commit_takes_the_lock_python_blosc2_locks_a_b2d_with(tmp_path):
    import fcntl

    from b2store import WriterLockedError, journal

    root = tmp_path / "t.b2d"
    with blosc2.DictStore(str(root), mode="w", locking=True) as store:
        store["/x"] = blosc2.asarray(np.arange(100), chunks=(10,))
    sidecar = root / "embed.b2e.b2lock"
    before = _generation(sidecar)
    with journal.TreeCommit(root, timeout=0.3):
        pass
    assert _generation(sidecar) == before + 1  # held exclusive, bumped as c-blosc2 does
    # A python-blosc2 store change under way holds it: the commit waits, then says so.
    fd = os.open(sidecar, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        with pytest.raises(WriterLockedError, match="embed.b2e.b2lock"):
            with journal.TreeCommit(root, timeout=0.3):
                pass
    finally:
        os.close(fd)


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "sparse"])
def test_a_new_array_asked_to_lock_has_the_sidecar_python_blosc2_locks(tmp_path, contiguous):
    from b2store.frame.b2lock import sidecar_path

    path = tmp_path / "n.b2nd"
    b2store.asarray(np.arange(10), urlpath=path, contiguous=contiguous, locking=True)
    sidecar = sidecar_path(path, sparse=not contiguous)
    assert _generation(sidecar) == 1
    theirs = blosc2.open(str(path), mode="a", locking=True)
    theirs[0] = 5
    assert _generation(sidecar) == 2
    assert b2store.open(str(path))[:2].tolist() == [5, 1]


def test_an_array_replaced_waits_while_python_blosc2_holds_its_lock(tmp_path):
    path = str(tmp_path / "a.b2nd")
    theirs = blosc2.asarray(np.arange(20), urlpath=path, mode="w", chunks=(10,), locking=True)
    done = {}

    def replace():
        chunks, blocks = theirs.chunks, theirs.blocks  # (a handle re-syncs to these only)
        b2store.zeros(20, dtype="i8", urlpath=path, chunks=chunks, blocks=blocks, mode="w")
        done["replaced"] = True

    with theirs.schunk.holding_lock():
        thread = threading.Thread(target=replace)
        thread.start()
        thread.join(0.5)
        assert done == {}  # (before: replaced under python-blosc2's change)
    thread.join(30)
    assert done == {"replaced": True}
    assert theirs[:3].tolist() == [0, 0, 0]


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "sparse"])
def test_a_reader_follows_python_blosc2_resizing_with_the_new_shape(tmp_path, contiguous):
    path = str(tmp_path / "a.b2nd")
    values = np.arange(12).reshape(3, 4)
    theirs = blosc2.asarray(
        values,
        urlpath=path,
        mode="w",
        chunks=(2, 2),
        blocks=(1, 1),
        contiguous=contiguous,
        locking=True,
    )
    ours = b2store.open(path)
    np.testing.assert_array_equal(ours[:], values)
    theirs.resize((3, 6))  # another chunk grid: chunk i is another part of the array now
    theirs[:, 4:] = 99
    np.testing.assert_array_equal(ours[:], theirs[:])
    assert ours.shape == (3, 6)
    assert ours[1, 5] == 99 and ours[2, :4].tolist() == [8, 9, 10, 11]


@pytest.mark.parametrize("contiguous", [True, False])
def test_a_read_looks_for_the_sidecar_once(tmp_path, monkeypatch, contiguous):
    # Without a sidecar, one read looks for it once (an access call): the chunk reads nested
    # in an array's read do not look again. Once python-blosc2 has made one, the next read
    # holds it (and a read on another thread looks for itself).
    from b2store.frame.b2lock import Sidecar

    path = str(tmp_path / "a.b2nd")
    b2store.asarray(np.arange(100.0).reshape(10, 10), path, chunks=(5, 5), contiguous=contiguous)
    looks, held = [], []
    wanted, hold_shared = Sidecar.wanted, Sidecar.hold_shared
    monkeypatch.setattr(Sidecar, "wanted", lambda self: looks.append(1) or wanted(self))
    monkeypatch.setattr(Sidecar, "hold_shared", lambda self: held.append(1) or hold_shared(self))
    a = b2store.open(path)
    for key in ((3, 4), (slice(None), 7), (slice(2, 8), slice(2, 8)), Ellipsis):
        looks.clear()
        a[key]
        assert len(looks) == 1, key
    assert held == []
    theirs = blosc2.open(path, mode="a", locking=True)
    theirs[0, 0] = -5.0  # (python-blosc2 makes the sidecar and bumps its generation)
    assert a[0, 0] == -5.0 and held
    other = []
    thread = threading.Thread(target=lambda: other.append(a[0, :2].tolist()))
    thread.start()
    thread.join(30)
    assert other == [[-5.0, 1.0]]
