"""Crash safety of appends (to_b2nd mode="a", append_dim=...): a child appends step after
step and is killed with SIGKILL at random moments; every state read is the state after the
last step printed or after the one in flight, never a mix of variables (some appended, some
not), and nothing a killed writer left stays once the next writer ran. A .b2d commits its
frames through a journal (b2store.journal): the window between the journal's landing and its
last header write is also tested deterministically, by failing the writes there."""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from pathlib import Path

import crash_append_steps as steps
import numpy as np
import pytest
from test_crash import start_child, temporaries

import b2store
from b2store import journal

xr = pytest.importorskip("xarray")
blosc2 = pytest.importorskip("blosc2")

CHILD = Path(__file__).with_name("crash_append_steps.py")
KINDS = {"b2d": "t.b2d", "b2z": "t.b2z", "frame": "t.b2nd"}


def kill_cycle(path: Path, kind: str, start: int, rng: random.Random) -> int:
    """One child killed at a random moment; returns the step the Dataset is at."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(CHILD.parent), *sys.path]))
    child = start_child([sys.executable, str(CHILD), str(path), kind, str(start)], env)
    first = b""
    if rng.random() < 0.1:
        time.sleep(rng.random() * 0.5)
    else:
        first = child.stdout.readline()
        if not first:
            raise AssertionError(child.stderr.read().decode()[-3000:])
        time.sleep(rng.random() * 0.3)
    child.send_signal(signal.SIGKILL)
    out, err = child.communicate()
    assert child.returncode == -signal.SIGKILL, err.decode()[-3000:]
    printed = [int(x) for x in (first + out).split()]
    committed = max(printed) if printed else start
    got = steps.state(str(path), kind)  # raises on a mix
    assert got in (committed, committed + 1), (got, committed)
    return got


def leftovers(path: Path) -> list[str]:
    found = temporaries(path)
    if path.is_dir():
        found += [journal.JOURNAL_NAME] if journal.pending(path) else []
    return found


def blosc2_reads(path: Path, k: int, kind: str) -> None:
    """Every frame python-blosc2 opens holds the values of step ``k``."""
    n = 2 * (k + 1)
    if kind == "frame":
        a = blosc2.open(str(path))
    else:
        a = blosc2.TreeStore(str(path), mode="r")["/a"]
    np.testing.assert_array_equal(a[...], np.repeat(np.repeat(np.arange(k + 1), 2)[:, None], 3, 1))
    assert a.shape == (n, 3)


def run_kills(tmp_path: Path, kind: str, kills: int, seed: int) -> int:
    rng = random.Random(seed)
    path = tmp_path / KINDS[kind]
    steps.create(str(path), kind)
    start = total = 0
    for _ in range(kills):
        k = kill_cycle(path, kind, start, rng)
        total += k - start
        # the next writer finishes or drops what the killed one left, and leaves nothing
        steps.step(str(path), kind, k + 1)
        start = k + 1
        assert steps.state(str(path), kind) == start
        assert leftovers(path) == [], leftovers(path)
        assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    blosc2_reads(path, start, kind)
    return total


# The quick suite kills appends to a frame; a tree's (as long again) are killed in the slow
# suite, here and many more times below.
@pytest.mark.parametrize("kind", [pytest.param("b2d", marks=pytest.mark.slow), "frame"])
def test_a_few_kills(tmp_path, kind):
    assert run_kills(tmp_path, kind, kills=3, seed=5) > 0


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_many_kills(tmp_path, kind, run_seed):
    kills = int(os.environ.get("B2STORE_KILLS", "40"))
    assert run_kills(tmp_path, kind, kills=kills, seed=run_seed) > 0


# --- the journal's window, made to happen -------------------------------------------------


class Boom(Exception):
    pass


def _fail_after(monkeypatch, n: int) -> None:
    """The commit's header writes fail after ``n`` of them (as a kill there would stop
    them; the journal stays)."""
    real = journal._write_head
    done = []

    def write_head(path, head, frame_len):
        if len(done) == n:
            raise Boom(path)
        done.append(path)
        real(path, head, frame_len)

    monkeypatch.setattr(journal, "_write_head", write_head)


def _stopped_commit(tmp_path: Path, monkeypatch, n: int) -> Path:
    """A .b2d whose first append stopped after ``n`` header writes (its journal left)."""
    path = tmp_path / "t.b2d"
    steps.create(str(path), "b2d")
    with monkeypatch.context() as m:
        _fail_after(m, n)
        with pytest.raises(Boom):
            steps.step(str(path), "b2d", 1)
    return path


@pytest.mark.parametrize("n", [0, 1, 2])
def test_a_commit_stopped_after_its_journal_is_finished_by_the_next_reader(
    tmp_path, monkeypatch, n
):
    path = _stopped_commit(tmp_path, monkeypatch, n)
    assert journal.pending(path)
    # python-blosc2 ignores the journal: it sees frames whose header was written (after)
    # beside frames whose header was not (before); here "a" is one or the other
    a = blosc2.TreeStore(str(path), mode="r")["/a"]
    assert a.shape in ((2, 3), (4, 3))
    # b2store's reader finishes the commit: the Dataset is after the step
    assert steps.state(str(path), "b2d") == 1
    assert not journal.pending(path)
    assert leftovers(path) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["t.b2d"]
    blosc2_reads(path, 1, "b2d")
    steps.step(str(path), "b2d", 2)
    assert steps.state(str(path), "b2d") == 2


def test_a_commit_stopped_before_its_journal_leaves_the_dataset_before(tmp_path, monkeypatch):
    path = tmp_path / "t.b2d"
    steps.create(str(path), "b2d")
    sizes = {p.name: p.stat().st_size for p in path.iterdir()}
    sizes[journal.LOCK_NAME] = 9  # the tree's commit lock, made by the first commit

    def no_journal(*args):
        raise Boom("before the journal")

    with monkeypatch.context() as m:
        m.setattr(journal._files, "write_atomic", no_journal)
        with pytest.raises(Boom):
            steps.step(str(path), "b2d", 1)
    assert not journal.pending(path)
    assert steps.state(str(path), "b2d") == 0
    # what was written past each frame's end is cut again, the new files are gone
    assert {p.name: p.stat().st_size for p in path.iterdir()} == sizes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.b2d"]
    blosc2_reads(path, 0, "b2d")


def test_b2store_opening_a_member_finishes_the_commit(tmp_path, monkeypatch):
    path = _stopped_commit(tmp_path, monkeypatch, 1)
    with b2store.open(str(path / "b.b2nd")) as b:  # a frame whose header was not written
        assert b.shape == (4,)
    assert not journal.pending(path) and steps.state(str(path), "b2d") == 1


def test_a_stale_journal_is_undone(tmp_path, monkeypatch):
    # Another writer (python-blosc2, which ignores the journal) changed a frame the journal
    # names while it was pending: the journal no longer applies, and all it did is undone:
    # the headers it wrote, the new files it put in place, the files it replaced.
    path = _stopped_commit(tmp_path, monkeypatch, 1)  # the renames made, then one header
    b = blosc2.open(str(path / "b.b2nd"), mode="a")  # still before
    b[0] = 7
    del b
    assert journal.recover(path)
    with xr.open_dataset(path, engine="b2nd") as ds:
        assert ds.sizes["time"] == 2 and int(ds.b[0]) == 7
        assert "v1" not in ds and ds.attrs["k"] == 0
    assert leftovers(path) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["t.b2d"]


def test_a_reader_that_cannot_finish_the_commit_says_so(tmp_path, monkeypatch):
    path = _stopped_commit(tmp_path, monkeypatch, 1)

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(args[0]))

    with monkeypatch.context() as m:  # (root ignores a directory's modes: the lock refused)
        m.setattr(journal._files, "open_lock", read_only)
        with pytest.raises(PermissionError, match="interrupted commit"):
            xr.open_dataset(path, engine="b2nd")
        with pytest.raises(PermissionError, match="open it once with write access"):
            b2store.open(str(path / "a.b2nd"))
    assert steps.state(str(path), "b2d") == 1  # with write access: finished
