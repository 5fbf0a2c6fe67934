"""Readers beside writers: threads of one process, other processes, and two writing processes.

The guarantees (docs/guarantees.md): a chunk read returns that chunk as some committed state
had it, never a torn or half-published one, and never a spurious error; a writer in another
process never makes a reader's frame fail to open or read; two processes writing one frame
take turns (a lock per change) and lose none of each other's changes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hardening.workers import finish, run_threads, spawn

import b2store
from b2store import SChunk

N = 1000  # items per chunk
CHUNKS = 4


def make(path, contiguous: bool) -> SChunk:
    s = SChunk.create(path, contiguous=contiguous, typesize=4, chunksize=4 * N)
    for k in range(CHUNKS):
        s.append_data(np.full(N, k, "<i4"))
    return s


def uniform(chunk: np.ndarray) -> bool:
    x = chunk.view("<i4")
    return len(x) == N and bool((x == x[0]).all())


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_threads_reading_one_handle_while_another_thread_writes(tmp_path, contiguous):
    s = make(tmp_path / "x.b2frame", contiguous)
    errors: list = []
    reads = [0]
    stop = time.monotonic() + 2.0

    def reader():
        while time.monotonic() < stop:
            for i in range(CHUNKS):
                try:
                    if not uniform(s.decompress_chunk(i)):
                        errors.append(f"torn chunk {i}")
                    s.get_chunk_blocks(i, [0])
                    s.chunk_span(i)
                    reads[0] += 1
                except Exception as exc:
                    errors.append(repr(exc))

    def writer():
        v = 100
        while time.monotonic() < stop:
            s.update_chunk(v % CHUNKS, b2store.encode_chunk(np.full(N, v, "<i4"), typesize=4))
            if v % 5 == 0:
                s.vlmeta["v"] = v
            v += 1

    run_threads(*[reader] * 4, writer)  # a writer's failure fails the test
    s.close()
    assert not errors, errors[:5]
    assert reads[0] > 100


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_array_readers_see_whole_chunks_of_committed_writes(tmp_path, contiguous):
    path = tmp_path / "a.b2nd"
    a = b2store.zeros((40, 40), "<i4", urlpath=path, chunks=(10, 40), contiguous=contiguous)
    errors: list = []
    stop = time.monotonic() + 2.0

    def reader():
        while time.monotonic() < stop:
            try:
                x = a[...]
                for r in range(0, 40, 10):  # each chunk holds one write's value
                    block = x[r : r + 10]
                    if not (block == block[0, 0]).all():
                        errors.append(f"torn chunk at row {r}")
            except Exception as exc:
                errors.append(repr(exc))

    def writer():
        v = 1
        while time.monotonic() < stop:
            a[(v % 4) * 10 : (v % 4) * 10 + 10] = v
            v += 1

    run_threads(*[reader] * 3, writer)
    a.close()
    assert not errors, errors[:5]


READER = textwrap.dedent("""
    import sys, time, numpy as np, b2store
    path, seconds = sys.argv[1], float(sys.argv[2])
    s = b2store.open(path)
    errors = reads = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        for i in range(s.nchunks):
            try:
                x = s.decompress_chunk(i).view("<i4")
                errors += not (x == x[0]).all()
                reads += 1
            except Exception as exc:
                errors += 1
                print("ERROR", repr(exc), file=sys.stderr)
    print(reads, errors)
""")

WRITER = textwrap.dedent("""
    import sys, numpy as np, b2store
    path, tag, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    s = b2store.open(path, mode="a")
    for k in range(count):
        s.append_data(np.full(1000, tag * 100000 + k, "<i4"))
        s.update_chunk(0, b2store.encode_chunk(np.full(1000, tag, "<i4"), typesize=4))
        s.vlmeta[f"w{tag}"] = k
    print("done")
""")


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_readers_in_other_processes_during_writes(tmp_path, contiguous):
    path = tmp_path / "x.b2frame"
    make(path, contiguous).close()
    readers = [spawn(READER, path, 3.0) for _ in range(2)]
    writer = spawn(WRITER, path, 1, 150)
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    for r in readers:
        out, err = r.communicate(timeout=120)
        assert r.returncode == 0, err[-3000:]
        reads, errors = map(int, out.split())
        assert errors == 0, err[-2000:]
        assert reads > 0


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_two_processes_writing_one_frame_lose_nothing(tmp_path, contiguous):
    path = tmp_path / "x.b2frame"
    make(path, contiguous).close()
    count = 40
    writers = [spawn(WRITER, path, tag, count) for tag in (1, 2)]
    for w in writers:
        out, err = w.communicate(timeout=180)
        assert w.returncode == 0, err
    with b2store.open(path) as s:
        assert s.nchunks == CHUNKS + 2 * count
        values = {int(s.decompress_chunk(i).view("<i4")[0]) for i in range(1, s.nchunks)}
        for tag in (1, 2):
            assert {tag * 100000 + k for k in range(count)} <= values
        assert s.vlmeta["w1"] == count - 1 and s.vlmeta["w2"] == count - 1
        assert int(s.decompress_chunk(0).view("<i4")[0]) in (1, 2)
    if contiguous:
        blosc2 = pytest.importorskip("blosc2")
        assert blosc2.open(str(path)).nchunks == CHUNKS + 2 * count


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_a_stale_writer_sees_a_same_size_change_by_another(tmp_path, contiguous):
    # The bug: a sparse frame's writer compared only the fixed header, which a chunk replaced
    # by one of the same size leaves unchanged, and published over it from its stale index.
    path = tmp_path / "x.b2frame"
    make(path, contiguous).close()
    first, second = b2store.open(path, mode="a"), b2store.open(path, mode="a")
    first.update_chunk(1, b2store.encode_chunk(np.full(N, 7, "<i4"), typesize=4))
    second.vlmeta["seen"] = True  # must reload first's change, not overwrite it
    second.update_chunk(2, b2store.encode_chunk(np.full(N, 8, "<i4"), typesize=4))
    first.close(), second.close()
    with b2store.open(path) as s:
        firsts = [int(s.decompress_chunk(i).view("<i4")[0]) for i in range(CHUNKS)]
        assert firsts == [0, 7, 8, 3]
        assert s.vlmeta["seen"] is True


def test_a_read_only_handle_follows_a_writer_in_another_handle(tmp_path):
    # A reader whose chunk file was discarded by a writer reloads the newer state.
    path = tmp_path / "x.b2frame"
    make(path, False).close()
    reader = b2store.open(path)
    with b2store.open(path, mode="a") as writer:
        for v in (10, 11):
            writer.update_chunk(1, b2store.encode_chunk(np.full(N, v, "<i4"), typesize=4))
    # Not an error for the discarded file: the newer committed chunk.
    assert int(reader.decompress_chunk(1).view("<i4")[0]) == 11
    reader.close()


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_two_handles_changing_different_metalayers_keep_both(tmp_path, contiguous):
    # An in-place metalayer change leaves a contiguous frame's fixed header as it was: the
    # other writer must still see it (the whole header is compared).
    path = tmp_path / "m.b2frame"
    s = SChunk.create(path, contiguous=contiguous, typesize=4, meta={"a": b"1111", "b": b"2222"})
    s.append_data(np.arange(10, dtype="<i4"))
    s.close()
    x, y = b2store.open(path, mode="a"), b2store.open(path, mode="a")
    x.meta.set_raw("a", b"AAAA")
    y.meta.set_raw("b", b"BBBB")
    x.close(), y.close()
    with b2store.open(path) as s:
        assert {n: s.meta.raw(n) for n in s.meta} == {"a": b"AAAA", "b": b"BBBB"}


# --- one read, one commit, across processes ------------------------------------------------

ARRAY_READER = textwrap.dedent("""
    import sys, time, numpy as np, b2store
    path, seconds = sys.argv[1], float(sys.argv[2])
    base = np.arange(1600, dtype="<i8").reshape(40, 40)
    a = b2store.open(path)
    keys = [(...,), (slice(5, 25), 3), (slice(8, 32), slice(None, None, 7)), np.s_[::9, 1]]
    errors = reads = 0
    versions = set()
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        key = keys[reads % len(keys)]
        if reads % 5 == 4:  # a handle keeps the state it opened (or last reloaded): reopen
            a.close()
            a = b2store.open(path)
        try:
            seen = set(np.unique(a[key] - base[key]).tolist())
        except Exception as exc:
            errors += 1
            print("ERROR", repr(exc), file=sys.stderr)
            continue
        if len(seen) != 1:
            errors += 1
            print("MIXED", key, sorted(seen), file=sys.stderr)
        versions |= seen
        reads += 1
    print(reads, errors, len(versions))
""")

ARRAY_WRITER = textwrap.dedent("""
    import sys, time, numpy as np, b2store
    path, seconds = sys.argv[1], float(sys.argv[2])
    base = np.arange(1600, dtype="<i8").reshape(40, 40)
    a = b2store.open(path, mode="a")
    v, stop = 1, time.monotonic() + seconds
    while time.monotonic() < stop:
        a[...] = base + v  # every chunk, published in one commit
        v += 1
    print(v - 1)
""")


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_array_reads_in_other_processes_come_from_one_commit(tmp_path, contiguous):
    """A read spanning several chunks, in a process beside a writer process that rewrites
    every chunk in one commit, sees all of them from one commit (snapshot reads). The readers
    reopen the array every few reads: an open contiguous frame's handle keeps reading the
    state it opened, which the writer's appends leave in place."""
    path = tmp_path / "a.b2nd"
    base = np.arange(1600, dtype="<i8").reshape(40, 40)
    b2store.asarray(base, path, chunks=(10, 40), blocks=(5, 40), contiguous=contiguous).close()
    readers = [spawn(ARRAY_READER, path, 3.0) for _ in range(2)]
    writer = spawn(ARRAY_WRITER, path, 3.0)
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err[-3000:]
    assert int(out) >= 3  # commits (how many depends on the machine's load)
    seen = 0
    for r in readers:
        out, err = r.communicate(timeout=120)
        assert r.returncode == 0, err[-3000:]
        reads, errors, versions = map(int, out.split())
        assert errors == 0, err[-2000:]
        assert reads >= 20
        seen = max(seen, versions)
    assert seen > 1  # the readers saw the writer's commits, not only the first state


def test_sparse_chunk_file_ids_are_never_reused(tmp_path):
    """A chunk file's id is never given again, even after the chunk holding the highest id
    was deleted and by another handle or process: an index a reader still holds can never
    name another chunk's file."""
    path = tmp_path / "ids.b2frame"
    s = SChunk.create(path, contiguous=False, typesize=4, chunksize=4 * N)

    def data(v):
        return np.arange(N, dtype="<i4") + v  # not one value: stored, not special

    for v in range(3):
        s.append_data(data(v))
    used = set(s.offsets.tolist())
    s.delete_chunk(2)  # the highest id's file is discarded
    s.close()
    for step in range(4):
        if step % 2:  # another process
            script = (
                "import sys, numpy as np, b2store\n"
                "s = b2store.open(sys.argv[1], mode='a')\n"
                f"s.append_data(np.arange({N}, dtype='<i4') + 100)\n"
                "s.delete_chunk(s.nchunks - 1)\n"
                f"s.append_data(np.arange({N}, dtype='<i4') + 200)\n"
                "s.close()\n"
            )
            subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=60)
        else:  # another handle
            with b2store.open(path, mode="a") as h:
                h.append_data(data(10 + step))
                h.delete_chunk(h.nchunks - 1)
                h.append_data(data(20 + step))
        with b2store.open(path) as h:
            ids = h.offsets.tolist()
        new = set(ids) - used
        # the chunk appended then deleted took max(used) + 1 (or more); the one kept, more
        assert len(new) == 1 and min(new) >= max(used) + 2, (sorted(used), ids)
        used |= set(ids)


# --- opening beside a committing writer ----------------------------------------------------

OPENER = textwrap.dedent("""
    import sys, time, numpy as np, b2store
    path, seconds = sys.argv[1], float(sys.argv[2])
    opens = errors = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        try:
            with b2store.open(path) as a:
                rows = a[0:10]  # one chunk: one commit's value
                if not (rows == rows[0, 0]).all() or a.shape not in ((40, 40), (41, 40)):
                    raise AssertionError(f"torn: {np.unique(rows)} {a.shape}")
                a.vlmeta.get("v")
            opens += 1
        except Exception as exc:
            errors += 1
            print("ERROR", repr(exc), file=sys.stderr)
    print(opens, errors)
""")

COMMITTER = textwrap.dedent("""
    import sys, time, numpy as np, b2store
    path, seconds = sys.argv[1], float(sys.argv[2])
    a = b2store.open(path, mode="a")
    v, stop = 1, time.monotonic() + seconds
    while time.monotonic() < stop:
        a[(v % 4) * 10 : (v % 4) * 10 + 10] = v  # a chunk: a new index and trailer
        if v % 3 == 0:
            a.vlmeta["v"] = v  # only a new trailer
        if v % 7 == 0:
            a.resize((41, 40) if a.shape == (40, 40) else (40, 40))  # the metalayer, in place
        v += 1
    print(v - 1)
""")


def open_beside_a_writer(path, contiguous: bool, seconds: float, nreaders: int = 2):
    """Reader processes opening ``path`` again and again while a writer process commits to
    it; returns (opens, commits) after asserting that no open failed."""
    a = b2store.zeros((40, 40), "<i4", urlpath=path, chunks=(10, 40), contiguous=contiguous)
    a.close()
    readers = [spawn(OPENER, path, seconds) for _ in range(nreaders)]
    writer = spawn(COMMITTER, path, seconds)
    commits = int(finish(writer, timeout=seconds + 120))
    opens = 0
    for r in readers:
        out = finish(r, timeout=seconds + 120)
        n, errors = map(int, out.split())
        assert errors == 0, (r.args, out)
        opens += n
    return opens, commits


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_opening_beside_a_committing_writer_never_fails(tmp_path, contiguous):
    """Opening a frame while another process commits to it: a header read before a commit
    and a size (or trailer) taken after it, or a header torn by the writer, are read again,
    never reported as a FormatError ("frame_len", 6 in 20,667 opens before)."""
    opens, commits = open_beside_a_writer(tmp_path / "a.b2nd", contiguous, 3.0)
    assert opens >= 50 and commits >= 10, (opens, commits)


@pytest.mark.slow
def test_opening_beside_a_committing_writer_never_fails_long(tmp_path):
    opens, commits = open_beside_a_writer(tmp_path / "a.b2nd", True, 20.0, nreaders=3)
    assert opens >= 1000 and commits >= 100, (opens, commits)


def test_a_failing_worker_fails_its_test():
    # The thread tests above used to let a writer thread's exception become a warning.
    def writer():
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        run_threads(lambda: None, writer)
    child = spawn("import sys; sys.exit('writer died')")
    with pytest.raises(AssertionError, match="writer died"):
        finish(child)
