"""Every error b2store raises crosses a process boundary intact: dask sends a task's error
back to the client pickled, and an error that does not unpickle arrives as another one."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

import b2store
from b2store.errors import B2StoreError

# Values by parameter name: what each error's constructor is given.
_BY_NAME = {"timeout": 1.5, "offset": 12, "status": 503, "tries": 3, "holder": 4242}


def _all_modules() -> None:
    for info in pkgutil.walk_packages(b2store.__path__, "b2store."):
        try:
            importlib.import_module(info.name)
        except ImportError as exc:  # an optional dependency of one integration
            if not (exc.name or "").startswith(("icechunk", "kerchunk", "virtualizarr")):
                raise


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


_all_modules()
ERRORS = sorted(set(_subclasses(B2StoreError)) | {B2StoreError}, key=lambda c: c.__qualname__)


def _made(cls):
    params = [
        p
        for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return cls(*[_BY_NAME.get(p.name, f"<{p.name}>") for p in params])


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_error_pickles_with_its_message_and_attributes(cls):
    exc = _made(cls)
    exc.__cause__ = None
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is cls
    assert str(again) == str(exc)
    assert again.args == exc.args
    assert vars(again) == vars(exc)


def test_the_classes_were_found():
    names = {c.__name__ for c in ERRORS}
    assert {"FormatError", "UnsupportedError", "LinkError", "WriterLockedError"} <= names
    assert len(ERRORS) >= 15
