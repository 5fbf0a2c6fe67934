"""Objects users hold: they close, copy, pickle and cross threads and processes safely, because
they carry the recipe to reopen their frame, never a shared file descriptor (issue 7,
defects 2 and 5)."""

from __future__ import annotations

import copy
import gc
import os
import pickle
import threading

import numpy as np
import pytest

import b2store
from b2store import FrameClosedError, SChunk

da = pytest.importorskip("dask.array")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


@pytest.fixture(params=["cframe", "sframe", "memory"])
def written(request, tmp_path):
    """(how to open it, the data) for an array in each kind of frame."""
    data = np.arange(60 * 70, dtype="<f8").reshape(60, 70) / 7
    kind = request.param
    if kind == "memory":
        arr = b2store.asarray(data, chunks=(20, 35), blocks=(10, 7))
        cframe = arr.schunk.to_cframe()
        return (lambda: b2store.open(cframe)), data
    path = tmp_path / ("a.b2nd" if kind == "cframe" else "a_dir.b2nd")
    b2store.asarray(
        data, path, chunks=(20, 35), blocks=(10, 7), contiguous=kind == "cframe"
    ).close()
    return (lambda: b2store.open(path)), data


def test_deepcopy_and_pickle_reopen(written):
    opener, data = written
    arr = opener()
    shallow = copy.copy(arr)  # shares the frame, as shallow copies do; its death closes nothing
    np.testing.assert_array_equal(shallow[:], data)
    del shallow
    for clone in (copy.deepcopy(arr), pickle.loads(pickle.dumps(arr))):
        np.testing.assert_array_equal(clone[:], data)
        assert clone.schunk._backend is not arr.schunk._backend
        del clone
    gc.collect()
    # The copies' deaths closed nothing of the original's.
    np.testing.assert_array_equal(arr[5:50:3, ::-2], data[5:50:3, ::-2])


def test_a_dead_copy_never_makes_the_original_read_another_file(tmp_path):
    # The defect: the copy closed the original's descriptor; once the number was reused by
    # another file, the original read that file's bytes.
    first = np.arange(1000, dtype="<i8")
    second = np.arange(1000, dtype="<i8") * -1
    b2store.asarray(first, tmp_path / "first.b2nd").close()
    b2store.asarray(second, tmp_path / "second.b2nd").close()
    a = b2store.open(tmp_path / "first.b2nd")
    a[:1]  # the descriptor is open now
    clone = copy.deepcopy(a)
    clone[:1]
    del clone
    gc.collect()
    other = b2store.open(tmp_path / "second.b2nd")
    np.testing.assert_array_equal(other[:], second)
    np.testing.assert_array_equal(a[:], first)


def test_close_and_with(tmp_path):
    path = tmp_path / "c.b2nd"
    b2store.asarray(np.arange(10), path).close()
    with b2store.open(path) as arr:
        assert arr[3] == 3
    assert arr.closed
    with pytest.raises(FrameClosedError, match="closed"):
        arr[3]
    with pytest.raises(FrameClosedError, match="the frame is closed"):
        pickle.dumps(arr)
    with SChunk.open(path) as schunk:
        schunk.get_chunk(0)
    with pytest.raises(FrameClosedError, match="the frame is closed"):
        schunk.get_chunk(0)


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_a_new_array_does_not_block_the_next_writer(tmp_path, contiguous):
    # The defect: asarray's result held the writer lock until garbage collection, so the
    # user's own next open(mode="a") failed.
    path = tmp_path / "n.b2nd"
    created = b2store.asarray(np.zeros((10, 10)), path, contiguous=contiguous)
    with b2store.open(path, mode="a") as arr:
        arr[2, :] = 5
    created[3, :] = 7  # the first handle sees the second's change and keeps it
    expected = np.zeros((10, 10))
    expected[2], expected[3] = 5, 7
    np.testing.assert_array_equal(b2store.open(path)[:], expected)
    created.close()


def test_readers_in_many_threads(written):
    opener, data = written
    arr = opener()
    errors = []

    def read(k):
        try:
            for j in range(20):
                lo = (k * 7 + j) % 50
                np.testing.assert_array_equal(arr[lo : lo + 10, j:], data[lo : lo + 10, j:])
        except Exception as exc:  # collected: a failure in a thread must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_dask_from_array(written, scheduler):
    opener, data = written
    arr = opener()
    x = da.from_array(arr, chunks=arr.chunks)
    assert x.mean().compute(scheduler=scheduler) == pytest.approx(data.mean())
    np.testing.assert_array_equal(x[::3].compute(scheduler=scheduler), data[::3])
    # The original still reads after the graph's copies are gone.
    gc.collect()
    np.testing.assert_array_equal(arr[:], data)


def test_dask_tokens_follow_content(tmp_path):
    from dask.base import tokenize

    path = tmp_path / "t.b2nd"
    b2store.asarray(np.arange(100), path).close()
    a, b = b2store.open(path), b2store.open(path)
    assert tokenize(a) == tokenize(b)
    before = tokenize(a)
    with b2store.open(path, mode="a") as w:
        w[0] = 42
    assert tokenize(b2store.open(path)) != before


def test_copies_leak_no_descriptors(tmp_path):
    path = tmp_path / "l.b2nd"
    b2store.asarray(np.arange(1000.0), path).close()
    arr = b2store.open(path)
    arr[:]
    gc.collect()
    start = open_fds()
    for _ in range(50):
        clone = pickle.loads(pickle.dumps(arr))
        clone[:10]
        del clone
    gc.collect()
    assert open_fds() <= start + 1
