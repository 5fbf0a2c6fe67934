"""The docstring examples of the installed package run as tests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import b2store

# What the extras bring (pyproject.toml): modules that use them import them at the top.
OPTIONAL = {
    "fsspec",
    "aiohttp",
    "zlib_ng",
    "distributed",
    "virtualizarr",
    "obstore",
    "obspec_utils",
}

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(b2store.__path__, "b2store.")
    if not info.name.split(".")[-1].startswith("_")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        # Only an optional dependency's absence is a reason to skip; b2store's own broken
        # imports fail here.
        missing = (exc.name or "").split(".")[0]
        if missing not in OPTIONAL:
            raise
        pytest.skip(f"{name} needs {exc.name}, an optional dependency")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
