"""The chunk tests' inputs are small (kilobytes to a few megabytes): b2store would decode and
encode most of them with one thread whatever ``nthreads`` says (``native.threads_for``). Here
every block may get a thread, so the tests that ask for two threads run the threaded paths
(the shared block counter, the encoder's slots) on whatever they give; test_threads.py checks
the thresholds themselves."""

import pytest

from b2store.chunk import native


@pytest.fixture(autouse=True)
def threads_on_small_chunks(monkeypatch):
    monkeypatch.setattr(native, "THREAD_BYTES", 1)
    monkeypatch.setattr(native, "ENCODE_THREAD_BYTES", {})
    monkeypatch.setattr(native, "SLOW_ENCODE_THREAD_BYTES", 1)
