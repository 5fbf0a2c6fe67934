"""A chunk gets a second thread only where each thread has enough of it to do: the handoff
costs more than decoding a small chunk (bench/bench_threads.py)."""

import numpy as np
import pytest

import b2store
from b2store.chunk import native


@pytest.fixture(autouse=True)
def real_thresholds(monkeypatch, threads_on_small_chunks):
    monkeypatch.undo()  # conftest.py lowered them for the other tests of this folder


def test_threads_for_gives_each_thread_its_share():
    per = native.THREAD_BYTES
    assert native.threads_for(per - 1, 2) == 1
    assert native.threads_for(2 * per, 2) == 2
    assert native.threads_for(2 * per, None) == 1
    assert native.threads_for(100 * per, 4) == 4
    assert native.threads_for(0, 8) == 1


def _walk(nbytes: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    return np.cumsum(rng.normal(size=nbytes // 8))


@pytest.mark.skipif(not native.enabled(), reason="the C block loop has no codec entry points")
@pytest.mark.parametrize(
    ("nbytes", "codec", "threaded"),
    [
        (64 << 10, "lz4", False),  # LZ4 encodes 64 kB faster than a thread starts
        (64 << 10, "zstd", True),  # Zstd does not
        (4 << 20, "lz4", True),
    ],
)
def test_encoding_uses_threads_only_where_they_pay(monkeypatch, nbytes, codec, threaded):
    data = _walk(nbytes)
    one = b2store.encode_chunk(data, codec=codec, blocksize=8192, nthreads=1)
    calls = []
    executor = native.executor
    monkeypatch.setattr(native, "executor", lambda n: calls.append(n) or executor(n))
    two = b2store.encode_chunk(data, codec=codec, blocksize=8192, nthreads=2)
    assert bool(calls) == threaded, calls
    assert two == one  # the same bytes either way


@pytest.mark.skipif(not native.enabled(), reason="the C block loop has no codec entry points")
@pytest.mark.parametrize(("nbytes", "threaded"), [(16 << 10, False), (4 << 20, True)])
def test_decoding_uses_threads_only_where_they_pay(monkeypatch, nbytes, threaded):
    if threaded and native.cpu_count() < 2:
        pytest.skip("one core: a chunk is decoded with one thread whatever its size")
    data = _walk(nbytes)
    chunk = b2store.encode_chunk(data, codec="lz4", blocksize=4096, nthreads=1)
    calls = []
    executor = native.executor
    monkeypatch.setattr(native, "executor", lambda n: calls.append(n) or executor(n))
    out = b2store.decode_chunk(chunk, nthreads=2)
    assert bool(calls) == threaded, calls
    assert out.tobytes() == data.tobytes()
