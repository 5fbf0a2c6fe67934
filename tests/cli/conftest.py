"""Running the installed ``b2store`` command as a user does: a subprocess, its exit status,
its stdout and its stderr."""

from __future__ import annotations

import subprocess
import sys

import pytest


class Result:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def __repr__(self) -> str:
        return f"Result(code={self.code}, out={self.out[-2000:]!r}, err={self.err[-2000:]!r})"


def run_b2store(*args, cwd=None, timeout: float = 300) -> Result:
    """``python -m b2store.cli ARGS`` with the interpreter running the tests."""
    proc = subprocess.run(
        [sys.executable, "-m", "b2store.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )
    return Result(proc)


def assert_user_error(result: Result, *words: str) -> None:
    """Exit status 2, one line on stderr naming the problem, no traceback."""
    assert result.code == 2, result
    assert "Traceback" not in result.err, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result
    for word in words:
        assert word in lines[0], result


@pytest.fixture
def cli(capsys):
    """The command run in this process (``b2store.cli.main``): for sweeps over many files,
    where a subprocess each would cost a second of imports; the subprocess tests cover the
    command as installed."""
    from b2store.cli import main

    def run(*args) -> Result:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(subprocess.CompletedProcess(args, code, out, err))

    return run
