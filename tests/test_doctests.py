"""The docstring examples of the installed package run as tests.

Only modules with examples are collected: those whose source holds a ``>>>`` line, found
by reading the files (private modules too, and whether or not their package imports), so
that a module with nothing to run is not counted as a pass. Each must run at least one: an
example doctest cannot see (in a plain string, in a nested function's docstring) fails
rather than being passed over.
"""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

import b2store

PACKAGE = Path(b2store.__file__).resolve().parent
EXAMPLE = re.compile(r"^\s*>>> ", re.M)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(
    _module_name(p) for p in PACKAGE.rglob("*.py") if EXAMPLE.search(p.read_text("utf-8"))
)


def test_modules_with_examples_are_found():
    # A moved package or a changed pattern must not leave this file with nothing to run.
    assert "b2store.nd.geometry" in MODULES, (PACKAGE, MODULES)
    assert "b2store._userpath" in MODULES  # private modules' examples run too


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    # Any ImportError fails: these modules import no optional dependency (that is, none of
    # the extras), and a broken import of b2store's own is a failure, not a reason to skip.
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, (
        f"{name} has a '>>>' line, but doctest found no example to run in its docstrings"
    )
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
