"""The docstring examples of the installed package run as tests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import b2store

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(b2store.__path__, "b2store.")
    if not info.name.split(".")[-1].startswith("_")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional integration whose dependency is missing
        pytest.skip(f"{name} needs {exc.name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
