"""python-blosc2's UTF8Array: variable-length strings kept as Arrow's large_string layout in
two b2nd arrays, ``offsets`` (int64, one more than the rows) and ``data`` (uint8, the UTF-8
bytes of every row one after another). In python-blosc2 4.14.1 it exists only as a CTable
column kind (the column's array holds the offsets, ``<column>.utf8`` beside it the bytes)."""

from __future__ import annotations

import numpy as np

from ..errors import FormatError
from ..nd.array import B2ndArray
from .base import normalize_index

__all__ = ["UTF8Array", "STRING_DTYPE"]

#: What python-blosc2 returns for a run of rows: NumPy's variable-length string dtype.
STRING_DTYPE = np.dtypes.StringDType()


class UTF8Array:
    """Strings over ``offsets`` and ``data``: ``len()`` rows, ``arr[i]`` a ``str``,
    ``arr[i:j]`` (or an index array) a 1-d NumPy array of :data:`STRING_DTYPE`, as
    python-blosc2's bulk reads return them. A read of rows ``[a, b)`` reads only
    ``offsets[a:b + 1]`` and the bytes between the first and the last of them. Offsets that
    go back, start past 0, or point past ``data``, and bytes that are not UTF-8, are
    FormatErrors naming the row."""

    kind = "UTF8Array"

    def __init__(self, offsets: B2ndArray, data: B2ndArray, name: str = "UTF8Array"):
        for arr, what, dtype in ((offsets, "offsets", np.int64), (data, "data", np.uint8)):
            if arr.ndim != 1 or arr.dtype != np.dtype(dtype):
                found = f"{arr.ndim}-d {arr.dtype}"
                raise FormatError(f"{name} {what}", f"a 1-d {np.dtype(dtype)} array", found)
        if offsets.shape[0] < 1:
            raise FormatError(f"{name} offsets", "at least one offset (0)", "none")
        self.offsets, self.data, self.name = offsets, data, name

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    dtype = STRING_DTYPE

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def __iter__(self):
        step = 65536
        for a in range(0, len(self), step):
            yield from self.read(a, min(a + step, len(self))).tolist()

    def __getitem__(self, index):
        n = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step == 1:
                return self.read(start, max(start, stop))
            rows = np.arange(start, stop, step)
        elif isinstance(index, list | tuple | np.ndarray):
            rows = np.asarray(index)
            if rows.dtype == np.bool_:
                if rows.shape != (n,):
                    raise IndexError(f"boolean mask of shape {rows.shape} for {n} rows")
                rows = np.flatnonzero(rows)
            rows = np.array([normalize_index(i, n, self.kind) for i in rows.tolist()], np.int64)
        else:
            i = normalize_index(index, n, self.kind)
            return str(self.read(i, i + 1)[0])
        if not len(rows):
            return np.empty(0, STRING_DTYPE)
        lo, hi = int(rows.min()), int(rows.max()) + 1
        return self.read(lo, hi)[rows - lo]

    def read(self, a: int, b: int) -> np.ndarray:
        """Rows ``[a, b)`` (``0 <= a <= b <= len``) as an array of :data:`STRING_DTYPE`."""
        if not 0 <= a <= b <= len(self):
            raise IndexError(f"rows [{a}, {b}) of {len(self)}")
        offs = np.asarray(self.offsets[a : b + 1], dtype=np.int64)
        nbytes = self.data.shape[0]
        bad = np.flatnonzero(np.diff(offs) < 0)
        if a == 0 and offs[0] != 0:
            raise FormatError(f"{self.name} offsets[0]", "0", int(offs[0]))
        if len(bad) or offs[0] < 0 or offs[-1] > nbytes:
            row = a + int(bad[0]) if len(bad) else a
            expected = f"offsets that never go back, within the {nbytes} data bytes"
            found = f"offsets[{row}:{row + 2}] = {offs[row - a : row - a + 2].tolist()}"
            if not len(bad):
                found = f"offsets[{a}], offsets[{b}] = {int(offs[0])}, {int(offs[-1])}"
            raise FormatError(f"{self.name} offsets", expected, found)
        raw = bytes(np.asarray(self.data[int(offs[0]) : int(offs[-1])], dtype=np.uint8))
        out = np.empty(b - a, STRING_DTYPE)
        base = int(offs[0])
        for k in range(b - a):
            piece = raw[int(offs[k]) - base : int(offs[k + 1]) - base]
            try:
                out[k] = piece.decode("utf-8")
            except UnicodeDecodeError as exc:
                field = f"{self.name} row {a + k}"
                raise FormatError(
                    field, "UTF-8 text", f"{exc.reason} at byte {exc.start}"
                ) from None
        return out
