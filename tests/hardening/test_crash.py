"""Crash safety: writers killed with SIGKILL at random moments, and torn writes.

A child process changes a frame step after step (SChunk: append, insert, update, delete,
several chunks dropped at once, vlmeta; B2ndArray: writes across chunks, resize, vlmeta),
printing each step once committed. The parent kills it at a random moment, then checks
that the frame opens, reads whole, and holds exactly the state after the last printed step
or after the one in flight (a step is all or nothing), then starts a child again from there.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import crash_steps as steps
import numpy as np
import pytest

import b2store
from b2store import SChunk

CHILD = Path(__file__).with_name("crash_steps.py")


def create(path: Path, kind: str, contiguous: bool) -> None:
    if kind.startswith("asarray"):
        b2store.asarray(np.zeros((30, 20), "<i4"), path, chunks=(10, 10), contiguous=contiguous)
        return
    if kind == "to_b2nd":
        b2store.to_b2nd(steps.dataset(0), path)
        return
    if kind == "schunk":
        s = SChunk.create(path, contiguous=contiguous, typesize=4, chunksize=steps.N * 4)
        for v in steps.schunk_initial()[0]:
            s.append_data(np.full(steps.N, v, "<i4"))
        s.close()
    else:  # array, zarr
        b2store.zeros(
            steps.SHAPE0,
            "<i4",
            urlpath=path,
            chunks=steps.CHUNKS,
            blocks=steps.BLOCKS,
            contiguous=contiguous,
        ).close()


def state_of(path: Path, kind: str):
    if kind == "to_b2nd":
        import xarray as xr

        with xr.open_dataset(path, engine="b2nd") as ds:
            t, u, k = ds["t"].values, ds["u"].values, ds.attrs["k"]
        assert (t == t[0, 0]).all() and t[0, 0] == k and (u == np.arange(6) * k).all()
        return int(k)
    if kind.startswith("asarray"):  # a whole array, made anew at every step
        with b2store.open(path) as a:
            x = a[...]
        assert x.shape == (30, 20) and (x == x[0, 0]).all()
        return int(x[0, 0])
    with b2store.open(path) as obj:
        if kind == "schunk":
            return steps.schunk_read(obj)
        return obj[...], dict(obj.vlmeta)


def same(kind: str, got, want) -> bool:
    if kind in ("schunk", "to_b2nd") or kind.startswith("asarray"):
        return got == want
    return got[0].shape == want[0].shape and (got[0] == want[0]).all() and got[1] == want[1]


def start_child(argv: list[str], env=None) -> subprocess.Popen:
    """A child whose output the parent reads line by line, then whole after killing it.

    Unbuffered (``bufsize=0``), so that ``stdout.readline()`` takes one line alone: a buffered
    reader reads ahead more of the child's lines, which ``communicate()`` (reading the pipe
    itself) never returns. Under load the parent then missed committed steps and took a
    sound frame for a lost one (the rare failure of the 500-kill runs).
    """
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, bufsize=0
    )


def kill_cycle(path: Path, kind: str, start: int, rng: random.Random) -> tuple[int, int]:
    """One child killed at a random moment; returns (steps committed in all, new start)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(CHILD.parent), *sys.path]))
    child = start_child([sys.executable, str(CHILD), str(path), kind, str(start)], env)
    # Mostly kill while steps run; sometimes while the child is still opening the frame.
    if rng.random() < 0.1:
        time.sleep(rng.random() * 0.5)
    else:
        first = child.stdout.readline()  # the first committed step
        if not first:
            raise AssertionError(child.stderr.read().decode()[-3000:])
        time.sleep(rng.random() * 0.3)
    child.send_signal(signal.SIGKILL)
    out, err = child.communicate()
    if "first" in locals():
        out = first + out
    printed = [int(x) for x in out.split()]
    assert child.returncode == -signal.SIGKILL, err.decode()[-3000:]
    committed = max(printed) if printed else start
    got = state_of(path, kind)
    for j in (committed, committed + 1):  # the last step printed, or the one in flight
        if same(kind, got, steps.replay(kind, j)):
            return committed - start, j
    raise AssertionError(
        f"after a kill at step {committed + 1}, the frame holds neither step {committed} "
        f"nor step {committed + 1}"
    )


def temporaries(path: Path) -> list[str]:
    """The writers' temporaries beside ``path`` and inside it (a sparse frame, a tree)."""
    from b2store._files import _TEMP

    found = [p.name for p in path.parent.iterdir() if _TEMP.match(p.name)]
    if path.is_dir():
        found += [str(p.relative_to(path)) for p in path.rglob(".*") if _TEMP.match(p.name)]
    if (path / "chunks.b2frame").is_file():  # and chunk files no index names
        with SChunk.open(path) as s:
            named = {f"{int(e):08X}.chunk" for e in s.offsets if e >= 0}
        found += [p.name for p in path.glob("*.chunk") if p.name not in named]
    return sorted(found)


def write_once(path: Path, kind: str, k: int) -> None:
    """A writer of this process after the kill, leaving the state the model has after step
    ``k`` (a write of what is there already): it removes what killed writers left."""
    if kind == "to_b2nd":
        b2store.to_b2nd(steps.dataset(k), path, mode="w")
    elif kind.startswith("asarray"):
        data = np.full((30, 20), k, "<i4")
        b2store.asarray(data, path, chunks=(10, 10), contiguous=kind == "asarray", mode="w").close()
    elif kind == "zarr":
        import zarr

        z = zarr.open_array(b2store.B2ndStore(path, mode="a"), mode="a")
        z[0, 0] = steps.replay(kind, k)[0][0, 0]
    elif kind == "schunk":
        with b2store.open(path, mode="a") as s:
            s.update_chunk(0, s.get_chunk(0))
    else:
        with b2store.open(path, mode="a") as a:
            a[0, 0] = a[0, 0]


def run_kills(
    tmp_path: Path, kind: str, contiguous: bool, kills: int, seed: int, left: list | None = None
) -> int:
    rng = random.Random(seed)
    name = {"schunk": "s.b2frame", "to_b2nd": "t.b2d"}.get(kind, "a.b2nd")
    path = tmp_path / name
    create(path, kind, contiguous)
    start, total = 0, 0
    for _ in range(kills):
        done, start = kill_cycle(path, kind, start, rng)
        total += done
        # Whatever the killed child left, the next writer removes (and only that: a live
        # writer's temporaries are kept, test_a_live_writers_temporaries_are_kept).
        before = temporaries(path)
        if left is not None:
            left.extend(before)
        write_once(path, kind, start)
        assert temporaries(path) == [], f"left by a killed writer and not removed: {before}"
        assert same(kind, state_of(path, kind), steps.replay(kind, start))
    if contiguous and kind in (
        "schunk",
        "array",
        "zarr",
    ):  # what survived is a frame python-blosc2 reads too
        blosc2 = pytest.importorskip("blosc2")
        theirs = blosc2.open(str(path))
        if kind == "schunk":
            assert theirs.nchunks == len(steps.replay(kind, start)[0])
        else:
            np.testing.assert_array_equal(theirs[...], steps.replay(kind, start)[0])
    return total


KINDS = [
    pytest.param("schunk", True, id="schunk-cframe"),
    pytest.param("schunk", False, id="schunk-sframe"),
    pytest.param("array", True, id="array-cframe"),
    pytest.param("array", False, id="array-sframe"),
    pytest.param("zarr", True, id="zarr-store-cframe"),
    pytest.param("zarr", False, id="zarr-store-sframe"),
    pytest.param("to_b2nd", True, id="to_b2nd-b2d"),
    pytest.param("asarray", True, id="asarray-cframe"),
    pytest.param("asarray-sparse", False, id="asarray-sframe"),
]


# The quick suite kills each writer but to_b2nd's tree (two minutes of it on a loaded machine);
# the slow test below kills every writer, that one included, many more times.
_QUICK_KINDS = [
    pytest.param(*k.values, id=k.id, marks=pytest.mark.slow) if k.id == "to_b2nd-b2d" else k
    for k in KINDS
]


@pytest.mark.parametrize(("kind", "contiguous"), _QUICK_KINDS)
def test_a_few_kills(tmp_path, kind, contiguous):
    assert run_kills(tmp_path, kind, contiguous, kills=4, seed=3) > 0


@pytest.mark.parametrize("mode", ["close", "none"])
@pytest.mark.parametrize(("kind", "contiguous"), [KINDS[2], KINDS[3], KINDS[7]])
def test_a_few_kills_whatever_the_sync_setting(tmp_path, monkeypatch, mode, kind, contiguous):
    # Syncing is about power cuts: a killed writer's bytes are all in the kernel, so the
    # frame is the last committed state or the next one whether or not anything was synced.
    monkeypatch.setenv("B2STORE_SYNC", mode)
    assert run_kills(tmp_path, kind, contiguous, kills=4, seed=5) > 0


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "contiguous"), KINDS)
def test_hundreds_of_kills(tmp_path, kind, contiguous, run_seed):
    kills = int(os.environ.get("B2STORE_KILLS", "100"))
    assert run_kills(tmp_path, kind, contiguous, kills=kills, seed=run_seed) > kills


def test_the_parent_sees_every_step_the_child_printed():
    # The child prints 50 steps at once; the parent reads the first, then the rest.
    code = "import time\nfor k in range(50): print(k, flush=True)\ntime.sleep(0.3)"
    child = start_child([sys.executable, "-c", code])
    time.sleep(0.2)
    first = child.stdout.readline()
    out, _ = child.communicate(timeout=60)
    assert [int(x) for x in (first + out).split()] == list(range(50))


# --- torn writes --------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 7, 16, 100, 1000, -1])
def test_a_short_write_at_the_end_leaves_the_committed_frame(tmp_path, cut):
    # A writer killed while writing past the end (new chunks, index, trailer) leaves some of
    # those bytes behind; the header still names the committed frame, which reads as before.
    path = tmp_path / "x.b2frame"
    create(path, "schunk", True)
    before = path.read_bytes()
    committed = state_of(path, "schunk")
    with SChunk.open(path, mode="a") as s:
        s.append_data(np.full(steps.N, 99, "<i4"))
    after = path.read_bytes()
    tail = after[len(before) :]
    torn = before + tail[: cut if cut >= 0 else len(tail) - 1]
    path.write_bytes(torn)
    assert state_of(path, "schunk") == committed
    with SChunk.open(path, mode="a") as s:  # and a writer carries on from it
        s.append_data(np.full(steps.N, 5, "<i4"))
    assert state_of(path, "schunk")[0] == committed[0] + [5]


def test_a_torn_chunk_file_in_a_sparse_frame_is_never_named(tmp_path):
    # Chunk files are written under a temporary name and renamed: a torn one is a dot-file
    # that no index names; the frame reads as committed and the next writer ignores it.
    path = tmp_path / "s.b2frame"
    create(path, "schunk", False)
    committed = state_of(path, "schunk")
    (path / ".00000010.chunk.abc.tmp").write_bytes(b"\x05\x01")
    (path / "00000077.chunk").write_bytes(b"torn")  # an unpublished id
    assert state_of(path, "schunk") == committed
    with SChunk.open(path, mode="a") as s:
        s.append_data(np.full(steps.N, 8, "<i4"))
    assert state_of(path, "schunk")[0] == committed[0] + [8]


# --- temporaries: failed writes, killed writers, live writers ---------------------------------


def _open_fds() -> set[tuple[str, str]]:
    """This process's descriptors, each with what it points at."""
    if not os.path.isdir("/proc/self/fd"):
        return set()
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add((fd, os.readlink(f"/proc/self/fd/{fd}")))
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            pass
    return out


def _new_fds_under(before: set, root) -> set:
    """Descriptors opened since ``before`` on files under ``root`` (deleted ones included):
    what would pin a failed write's space. Others may open or close meanwhile (another
    test's file closed by the garbage collector, a pool's pipe), so they are not counted."""
    root = str(root)
    return {(fd, target) for fd, target in _open_fds() - before if target.startswith(root)}


def _disk_full(monkeypatch, after: int = 0):
    """Writes fail with ENOSPC after ``after`` successful ones (a full disk)."""
    import errno

    real, count = os.pwrite, [0]

    def pwrite(fd, data, offset):
        count[0] += 1
        if count[0] > after:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "write", lambda fd, data: pwrite(fd, data, 0))


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
@pytest.mark.parametrize("writer", ["asarray", "zeros", "to_b2nd"])
@pytest.mark.parametrize("after", [0, 1, 3])
def test_a_failed_write_leaves_no_temporary_and_no_descriptor(
    tmp_path, monkeypatch, writer, contiguous, after
):
    import errno

    path = tmp_path / ("t.b2d" if writer == "to_b2nd" else "a.b2nd")
    if writer == "to_b2nd":
        b2store.to_b2nd(steps.dataset(1), path)
        before = state_of(path, "to_b2nd")
    else:
        b2store.asarray(np.arange(600).reshape(30, 20), path, contiguous=contiguous).close()
        before = b2store.open(path)[...]
    fds = _open_fds()
    with monkeypatch.context() as m:
        _disk_full(m, after)
        with pytest.raises(OSError, match="No space left on device") as info:
            # (each replacing what is there: mode "w")
            if writer == "asarray":
                b2store.asarray(
                    np.ones((30, 20)), path, chunks=(10, 10), contiguous=contiguous, mode="w"
                )
            elif writer == "zeros":
                b2store.full(
                    (30, 20), 3.0, urlpath=path, chunks=(10, 10), contiguous=contiguous, mode="w"
                )
            else:
                b2store.to_b2nd(steps.dataset(2), path, mode="w")
    assert info.value.errno == errno.ENOSPC
    assert temporaries(path) == []
    assert _new_fds_under(fds, tmp_path) == set()  # none pins a deleted file's space
    if writer == "to_b2nd":  # the old content is left as it was
        assert state_of(path, "to_b2nd") == before
    else:
        np.testing.assert_array_equal(b2store.open(path)[...], before)


HOLD = """
import sys, time
from b2store import _files
fd, path = _files.create_temp(sys.argv[1], "a.b2nd")
dfd, dpath = _files.make_temp_dir(sys.argv[1], "a.b2nd", "new")
staged = _files.temp_name(sys.argv[1], "a.b2nd", "new")
staged.write_bytes(b"a staged frame, not locked")
print(path.name, dpath.name, staged.name, flush=True)
time.sleep(60)
"""


def test_a_live_writers_temporaries_are_kept_and_a_killed_ones_removed(tmp_path):
    from b2store import _files

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    child = start_child([sys.executable, "-c", HOLD, str(tmp_path)], env)
    try:
        names = child.stdout.readline().decode().split()
        assert len(names) == 3, child.stderr.read().decode()[-2000:]
        # A writer of the same target, in this process and in another one, while it lives.
        assert _files.sweep(tmp_path, "a.b2nd") == []
        b2store.asarray(np.arange(4), tmp_path / "a.b2nd").close()
        assert sorted(p.name for p in tmp_path.iterdir() if p.name != "a.b2nd") == sorted(names)
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()
    b2store.asarray(np.arange(4), tmp_path / "a.b2nd", mode="w").close()  # the next writer
    assert [p.name for p in tmp_path.iterdir()] == ["a.b2nd"]


def test_a_temporary_whose_lock_is_held_is_kept_whatever_its_pid(tmp_path):
    # A writer in another PID namespace (a container sharing the directory) has a pid this
    # process cannot see: its lock keeps its temporary.
    from b2store import _files

    fd, path = _files.create_temp(tmp_path, "a.b2nd")
    dead = path.with_name(path.name.replace(f".{os.getpid()}.", ".999999999."))
    os.rename(path, dead)
    try:
        assert _files.sweep(tmp_path) == []
        assert dead.exists()
    finally:
        os.close(fd)
    assert _files.sweep(tmp_path) == [dead.name]


@pytest.mark.parametrize("after", [0, 2, 5])
def test_a_failed_convert_leaves_no_partial_output(tmp_path, monkeypatch, after):
    # A b2nd output is made whole (zeros) and then filled: one left by a failed copy would
    # read as data. It is removed, with its temporaries and descriptors.
    import errno

    from b2store.cli.convert import convert

    src, dst = tmp_path / "x.npy", tmp_path / "x.b2nd"
    np.save(src, np.arange(20_000, dtype="f8").reshape(200, 100))
    b2store.asarray(np.ones(3), dst).close()  # replaced with overwrite=True
    fds = _open_fds()
    with monkeypatch.context() as m:
        m.setattr("b2store.cli.convert.NPY_PIECE_BYTES", 8_000, raising=False)
        _disk_full(m, after)
        with pytest.raises(OSError, match="No space left on device") as info:
            convert(src, dst, chunks=(20, 100), overwrite=True, progress=False)
    assert info.value.errno == errno.ENOSPC
    assert not os.path.lexists(dst)
    assert temporaries(dst) == []
    # (the traceback pytest keeps holds the source's memory map: only the output counts)
    assert [t for _, t in _new_fds_under(fds, tmp_path) if "x.b2nd" in t] == []


def test_a_failed_change_of_a_sparse_frame_is_swept_by_the_next_one(tmp_path, monkeypatch):
    # Chunk files stored by a change that failed before publishing (here the disk filled
    # up at the third file) are named by no index; the next change removes them.
    import errno

    from b2store.frame import sparse

    path = tmp_path / "s.b2frame"
    create(path, "schunk", False)
    committed = state_of(path, "schunk")
    real, count = sparse._atomic_write, [0]

    def atomic_write(p, data, sync=True):
        count[0] += 1
        if count[0] > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(p, data, sync)

    chunks = [b2store.encode_chunk(np.full(steps.N, v, "<i4"), typesize=4) for v in (7, 8, 9)]
    with SChunk.open(path, mode="a") as s:
        with monkeypatch.context() as m:
            m.setattr(sparse, "_atomic_write", atomic_write)
            with pytest.raises(OSError, match="No space"):
                s.extend_chunks(chunks)
        assert len(temporaries(path)) == 2  # stored, never published
        s.update_chunk(0, s.get_chunk(0))  # the next change
    assert temporaries(path) == []
    assert state_of(path, "schunk") == committed
