"""Writers of one frame served in turn (b2store/_turns.py), and never held up by a dead one.

The guarantees (docs/guarantees.md, §4): writers in tight loops on one frame, in processes or
threads, each wait only for the writers ahead of them, so none starves; a writer killed while
queued or holding the lock holds up no one; a writer behind a hung one raises
WriterLockedError at the timeout, naming the frame and the holder.

Fairness is counted, not timed (the machine is shared): how many of the other writers' holds
began while one writer was in line. Served in turn, that is at most the writers ahead of it
(with two writers: the one that asked at the same moment). Before the queue, a writer in a
tight loop took the lock again at once, 35 to 2,000 times while the other slept between its
tries, or made 1,013 writes while the other made 1.
"""

from __future__ import annotations

import bisect
import errno
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hardening.workers import run_threads

import b2store
from b2store import LinkError, WriterLockedError
from b2store.frame import lock as frame_lock

try:
    from b2store import _turns
except ImportError:  # (b2store before the queue: these tests then show what it did)
    _turns = None

# One writer in a tight loop: per write, when it was in line for the lock and when it got it;
# json on stdout. In line: from its ticket in the queue, or, not queued (the lock free and
# no one waiting), when it got the lock; before the queue, from when it asked. (A writer kept
# from running by the scheduler before it has a ticket is not in line: others may pass it.)
LOOP = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import b2store
    from b2store.frame import lock as frame_lock
    try:
        from b2store import _turns
    except ImportError:  # (b2store before the queue)
        _turns = None

    path, seconds, tag = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    asked, got, lined = [], [], []
    acquire = frame_lock.WriteLock._acquire

    def timed(self):
        asked.append(time.monotonic())
        lined.clear()
        acquire(self)
        got.append(time.monotonic())
        if _turns is not None:  # in line from its ticket; not queued, it never waited
            asked[-1] = lined[0] if lined else got[-1]

    frame_lock.WriteLock._acquire = timed
    if _turns is not None:
        join = _turns.Turn.join.__func__

        def in_line(cls, queue):
            turn = join(cls, queue)
            if turn is not None:
                lined.append(time.monotonic())
            return turn

        _turns.Turn.join = classmethod(in_line)
    arr = b2store.open(path, mode="a")
    asked.clear(), got.clear()  # (opening may take the lock once)
    print("ready", flush=True)
    sys.stdin.readline()
    n = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        arr[0:10] = np.full(10, tag * 100000 + n, arr.dtype)
        n += 1
    arr.close()
    print(json.dumps({"asked": asked, "got": got, "n": n}))
""")


def make_array(path, contiguous: bool = True) -> None:
    b2store.zeros(
        (1000,), "<i4", urlpath=path, chunks=(100,), contiguous=contiguous, mode="w"
    ).close()


def passed_while_waiting(records: list[dict], skip: int = 3) -> tuple[int, float]:
    """The most holds of the other writers that began while one writer waited, and the
    longest wait (s); each writer's first ``skip`` writes left out (they start together)."""
    worst, longest = 0, 0.0
    for i, rec in enumerate(records):
        others = sorted(t for j, o in enumerate(records) if j != i for t in o["got"])
        assert len(rec["asked"]) == len(rec["got"]) == rec["n"]
        for asked, got in list(zip(rec["asked"], rec["got"]))[skip:]:
            passed = bisect.bisect_left(others, got) - bisect.bisect_right(others, asked)
            worst, longest = max(worst, passed), max(longest, got - asked)
    return worst, longest


def run_loops(path, nwriters: int, seconds: float) -> list[dict]:
    # Unsynced writes: more of them in the time (a commit's fsync makes them some ms each on
    # a busy disk), and turns not slowed by the file system's journal.
    env = {**os.environ, "B2STORE_SYNC": "none"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LOOP, str(path), str(seconds), str(tag)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for tag in range(1, nwriters + 1)
    ]
    try:
        for p in procs:
            line = p.stdout.readline().strip()
            assert line == "ready", p.stderr.read()[-3000:]
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        records = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-3000:]
            records.append(json.loads(out))
        return records
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.parametrize(
    "contiguous", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["cframe", "sframe"]
)
def test_two_writer_processes_in_tight_loops_take_turns(tmp_path, contiguous):
    # Before the queue (the lock retried after sleeps of 1 to 50 ms): 300 to 2,000 of the
    # other's writes passed during one wait, which lasted up to 7 s (30 s in the issue).
    path = tmp_path / "a.b2nd"
    make_array(path, contiguous)
    records = run_loops(path, 2, 1.0)
    worst, longest = passed_while_waiting(records)
    counts = [r["n"] for r in records]
    assert min(counts) >= 20, counts  # both make progress
    assert worst <= 2, f"{worst} writes of the other passed one wait of up to {longest:.3f} s"
    with b2store.open(path) as arr:  # the last write of one of them, whole
        assert arr[0] // 100000 in (1, 2) and (arr[0:10] == arr[0]).all()
    assert not (tmp_path / ".a.b2nd.b2store-queue").exists()  # tidied as they closed


@pytest.mark.slow
@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_three_writer_processes_in_tight_loops_take_turns(tmp_path, contiguous):
    path = tmp_path / "a.b2nd"
    make_array(path, contiguous)
    records = run_loops(path, 3, 5.0)
    worst, longest = passed_while_waiting(records)
    counts = [r["n"] for r in records]
    assert min(counts) >= 0.2 * sum(counts), counts
    # Served in turn: the two others' holds, and one more writer asking at the same moment.
    assert worst <= 4, f"{worst} writes of the others passed one wait of up to {longest:.3f} s"


@pytest.mark.parametrize("handles", ["one handle", "a handle each"])
def test_writer_threads_take_turns(tmp_path, handles):
    # Before: threads of one handle took turns through a threading.RLock (fairly enough, as
    # this test finds), threads of their own handles as processes do (not at all).
    path = tmp_path / "a.b2nd"
    make_array(path)
    b2store.set_sync("none")  # (as in run_loops)
    try:
        arrays = [b2store.open(path, mode="a")]
        arrays.append(arrays[0] if handles == "one handle" else b2store.open(path, mode="a"))
    finally:
        b2store.set_sync(None)
    records: dict[int, dict] = {}
    acquire = frame_lock.WriteLock._acquire

    def timed(self):  # (as in LOOP)
        rec, asked = records[threading.get_ident()], time.monotonic()
        rec["lined"] = None
        acquire(self)
        rec["got"].append(time.monotonic())
        if _turns is not None:
            asked = rec["lined"] or rec["got"][-1]
        rec["asked"].append(asked)

    def in_line(cls, queue):
        turn = join(cls, queue)
        if turn is not None:
            records[threading.get_ident()]["lined"] = time.monotonic()
        return turn

    if _turns is not None:
        join = _turns.Turn.join.__func__
        _turns.Turn.join = classmethod(in_line)
    stop = time.monotonic() + 1.0

    def loop(tag):
        rec = records.setdefault(threading.get_ident(), {"asked": [], "got": [], "n": 0})
        arr = arrays[tag - 1]
        while time.monotonic() < stop:
            arr[0:10] = np.full(10, tag * 100000 + rec["n"], arr.dtype)
            rec["n"] += 1

    frame_lock.WriteLock._acquire = timed
    try:
        run_threads(lambda: loop(1), lambda: loop(2))
    finally:
        frame_lock.WriteLock._acquire = acquire
        if _turns is not None:
            _turns.Turn.join = classmethod(join)
        for arr in arrays:
            arr.close()
    worst, longest = passed_while_waiting(list(records.values()))
    counts = [r["n"] for r in records.values()]
    assert len(counts) == 2 and min(counts) >= 20, counts
    assert worst <= 2, f"{worst} writes of the other passed one wait of up to {longest:.3f} s"


# A writer that holds the lock of the frame at argv[1] until a line comes on stdin.
HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from b2store.frame.lock import WriteLock
    with WriteLock(Path(sys.argv[1])).hold():
        print("held", flush=True)
        sys.stdin.readline()
    print("let go", flush=True)
""")

# A writer of one change to the array at argv[1], once a line comes on stdin: it queues
# behind the holder.
ONE_WRITE = textwrap.dedent("""
    import sys, time
    import numpy as np
    import b2store
    arr = b2store.open(sys.argv[1], mode="a")
    arr.schunk._backend._lock.timeout = float(sys.argv[3])
    print("ready", flush=True)
    sys.stdin.readline()
    arr[0:10] = np.full(10, int(sys.argv[2]), arr.dtype)
    arr.close()
    print("wrote", flush=True)
""")


def start(script: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def queued(queue: Path, proc: subprocess.Popen, within: float = 20.0) -> str:
    """The ticket ``proc`` holds in ``queue``, once it is there."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        names = os.listdir(queue) if queue.is_dir() else []
        mine = [n for n in names if f"-{proc.pid}-" in n]
        if mine:
            return mine[0]
        time.sleep(0.01)
    raise AssertionError(f"process {proc.pid} never queued in {queue}")


@pytest.mark.parametrize("killed", ["waiter", pytest.param("holder", marks=pytest.mark.slow)])
def test_a_writer_killed_in_the_queue_holds_up_no_one(tmp_path, killed):
    path = tmp_path / "a.b2nd"
    make_array(path)
    queue = tmp_path / ".a.b2nd.b2store-queue"
    procs = [start(HOLDER, path), start(ONE_WRITE, path, 1, 30), start(ONE_WRITE, path, 2, 30)]
    _, first, second = procs
    try:
        assert [p.stdout.readline().strip() for p in procs] == ["held", "ready", "ready"]
        for p in (first, second):  # the second behind the first
            p.stdin.write("go\n")
            p.stdin.flush()
            queued(queue, p)
        victim = first if killed == "waiter" else procs[0]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        t0 = time.monotonic()
        if killed == "waiter":
            procs[0].stdin.write("\n")  # the holder lets go
            procs[0].stdin.flush()
            assert procs[0].stdout.readline().strip() == "let go"
        out, err = second.communicate(timeout=60)
        waited = time.monotonic() - t0
        assert second.returncode == 0 and out.strip() == "wrote", err[-3000:]
        assert waited < 15, waited  # (its timeout is 30 s: not held up until then)
        if killed == "holder":
            out, err = first.communicate(timeout=60)
            assert first.returncode == 0 and out.strip() == "wrote", err[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    with b2store.open(path) as arr:
        assert arr[0] in (1, 2) if killed == "holder" else arr[0] == 2
    # The dead writer's ticket was freed, and the queue went with the last handle.
    assert not queue.exists(), os.listdir(queue)


def test_a_writer_behind_a_hung_one_names_it(tmp_path):
    path = tmp_path / "a.b2nd"
    make_array(path)
    holder = start(HOLDER, path)
    try:
        assert holder.stdout.readline().strip() == "held"
        arr = b2store.open(path, mode="a")
        arr.schunk._backend._lock.timeout = 0.3
        with pytest.raises(WriterLockedError) as info:
            arr[0:10] = 7
        arr.close()
    finally:
        holder.kill()
        holder.wait()
    message = f"{path} is locked by another writer, process {holder.pid} (waited 0.3 s)"
    assert str(info.value) == message
    assert (info.value.path, info.value.holder, info.value.timeout) == (str(path), holder.pid, 0.3)
    again = pickle.loads(pickle.dumps(info.value))  # (as from a dask worker)
    assert type(again) is WriterLockedError and str(again) == str(info.value)
    with b2store.open(path, mode="a") as arr:  # the hung writer gone, the frame writable
        arr[0:10] = 7
        assert arr[0] == 7


def test_a_handle_behind_another_of_its_process_says_so(tmp_path):
    path = tmp_path / "a.b2nd"
    make_array(path)
    first = frame_lock.WriteLock(path)
    second = frame_lock.WriteLock(path, timeout=0.2)
    with first.hold():
        with pytest.raises(WriterLockedError) as info:
            with second.hold():
                pass
    assert str(info.value) == (
        f"{path} is locked by another writer, another handle or thread of this process "
        "(waited 0.2 s)"
    )
    first.close()
    second.close()
    assert not (tmp_path / ".a.b2nd.b2store-queue").exists()


def test_writes_one_at_a_time_make_no_queue(tmp_path):
    path = tmp_path / "a.b2nd"
    make_array(path)
    with b2store.open(path, mode="a") as arr:
        for k in range(5):
            arr[0:10] = k
    assert sorted(os.listdir(tmp_path)) == ["a.b2nd"]


def test_a_link_at_the_queue_is_refused(tmp_path):
    path = tmp_path / "a.b2nd"
    make_array(path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".a.b2nd.b2store-queue").symlink_to(elsewhere)
    first, second = frame_lock.WriteLock(path), frame_lock.WriteLock(path, timeout=0.2)
    with first.hold():
        with pytest.raises(LinkError, match=r"\.a\.b2nd\.b2store-queue is a symbolic link"):
            with second.hold():
                pass
    assert os.listdir(elsewhere) == []  # nothing made through it


def test_a_file_at_the_queue_is_refused(tmp_path):
    path = tmp_path / "a.b2nd"
    make_array(path)
    (tmp_path / ".a.b2nd.b2store-queue").write_bytes(b"not a queue")
    first, second = frame_lock.WriteLock(path), frame_lock.WriteLock(path, timeout=0.2)
    with first.hold():
        with pytest.raises(b2store.FormatError) as info:
            with second.hold():
                pass
    assert str(info.value) == (
        f"writer queue: expected a directory at {tmp_path / '.a.b2nd.b2store-queue'}, "
        "found a regular file"
    )


def test_a_writer_that_cannot_queue_takes_the_lock_by_retrying(tmp_path, monkeypatch):
    # A directory this writer may not add to (another user's): no queue, the lock alone.
    def refused(path, mode=0o777):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    path = tmp_path / "a.b2nd"
    make_array(path)
    monkeypatch.setattr(_turns.os, "mkdir", refused)
    first, second = frame_lock.WriteLock(path), frame_lock.WriteLock(path, timeout=20)
    order = []

    def later():
        with second.hold():
            order.append("second")
        second.close()  # (tidy, with nothing to tidy)

    with first.hold():
        waiter = threading.Thread(target=later)
        waiter.start()
        time.sleep(0.2)
        order.append("first")
    waiter.join()
    assert order == ["first", "second"]
    second.timeout = 0.1
    with first.hold():
        with pytest.raises(WriterLockedError, match=r"of this process \(waited 0.1 s\)"):
            with second.hold():
                pass
    first.close()
    assert sorted(os.listdir(tmp_path)) == ["a.b2nd"]
