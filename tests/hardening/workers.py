"""Threads and child processes for the concurrency tests, whose failures fail the test.

A thread's uncaught exception only prints (pytest turns it into a warning), and a child
process that dies only leaves a return code: either would let a test pass on a dead writer.
"""

from __future__ import annotations

import subprocess
import sys
import threading


def run_threads(*targets) -> None:
    """Run each callable in its own thread and wait for all; the first exception any of them
    raised is raised here, with its traceback."""
    failures: list[BaseException] = []

    def guarded(target):
        try:
            target()
        except BaseException as exc:  # re-raised in the test's own thread below
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]


def spawn(script: str, *args) -> subprocess.Popen:
    """A child interpreter running ``script`` with ``args``, its output captured."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    """Wait for a child from :func:`spawn`; its stdout, or an AssertionError with its
    stderr's end when it failed (or was killed at ``timeout``)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"child still running after {timeout} s: {err[-2000:]}") from None
    assert proc.returncode == 0, f"child exited with {proc.returncode}: {err[-3000:]}"
    return out
