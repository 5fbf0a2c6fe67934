"""What python-blosc2's variable-length containers share: a frame (an SChunk) opened read-only,
its metalayers and user attributes, closing, and Python's index rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import B2StoreError, UnsupportedError
from ..frame.schunk import OnSChunk, SChunk

__all__ = ["Container", "ContainerNotArrayError", "normalize_index"]


class ContainerNotArrayError(UnsupportedError):
    """A python-blosc2 container of variable-length items met where an n-dimensional array
    is needed (an xarray variable, a Zarr array, a tree's array)."""

    def __init__(self, kind: str, where: str, how: str):
        self.feature = "python-blosc2 container"
        self.ident = kind
        B2StoreError.__init__(
            self,
            f"{where} is a python-blosc2 {kind} (items of variable length), not an "
            f"n-dimensional array, so it is no variable or array here; read it with b2store: "
            f"{how} gives item i",
        )


def normalize_index(index: Any, n: int, what: str) -> int:
    """``index`` (an int, negative from the end) as a position in ``range(n)``; TypeError
    and IndexError as a Python list raises them, naming ``what``."""
    if isinstance(index, bool) or not hasattr(index, "__index__"):
        raise TypeError(f"{what} indices must be integers or slices, not {type(index).__name__}")
    i = index.__index__()
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError(f"{what} index {index} out of range (length {n})")
    return i


class Container(OnSChunk):
    """A python-blosc2 container read from one frame; ``schunk`` is that frame.

    Subclasses say what an item is (``__getitem__``); iteration reads item by item, and a
    slice reads only the items (and so the chunks) it covers."""

    #: The name python-blosc2 gives the class (and the error messages here).
    kind = "container"

    def __init__(self, schunk: SChunk):
        self.schunk = schunk

    @property
    def urlpath(self) -> str:
        return self.schunk.urlpath

    def close(self) -> None:
        self.schunk.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:  # pragma: no cover - every subclass says
        raise NotImplementedError

    def __getitem__(self, index):  # pragma: no cover - every subclass says
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"<b2store {self.kind} of {len(self)} at {self.urlpath!r}>"
