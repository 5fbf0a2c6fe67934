"""A CTable's live rows: which stored rows ``/_valid_rows`` keeps, found a chunk of the mask
at a time, never the whole mask held.

python-blosc2 deletes a row by setting its flag False; the row stays in every column, and a
table's columns have room for more rows than it holds (their flags False too). Opening counts
each mask chunk's live rows once; a read of live rows ``[start, stop)`` then decodes only the
mask chunks those rows lie in (none where a chunk is all live), and gives their positions.
"""

from __future__ import annotations

import numpy as np

from ..errors import FormatError
from ..nd.array import B2ndArray

__all__ = ["LiveRows"]


class LiveRows:
    """The live rows of a table whose ``/_valid_rows`` is ``valid`` (a 1-d bool array)."""

    def __init__(self, valid: B2ndArray):
        if valid.ndim != 1 or valid.dtype != np.dtype(bool):
            raise FormatError(
                "CTable /_valid_rows", "a 1-d bool array", f"{valid.dtype} of shape {valid.shape}"
            )
        self.valid = valid
        self.nstored = valid.shape[0]
        self.step = max(int(valid.chunks[0]), 1)
        nchunks = -(-self.nstored // self.step)
        counts = np.zeros(nchunks, dtype=np.int64)
        for i in range(nchunks):
            counts[i] = np.count_nonzero(self._flags(i))
        self.counts = counts
        #: the live index of each mask chunk's first live row, and the total last
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _flags(self, i: int) -> np.ndarray:
        return np.asarray(self.valid[i * self.step : min((i + 1) * self.step, self.nstored)])

    def positions(self, start: int, stop: int) -> np.ndarray:
        """The stored positions (int64, increasing) of live rows ``start`` to ``stop``."""
        start, stop = max(start, 0), min(stop, len(self))
        if stop <= start:
            return np.zeros(0, dtype=np.int64)
        first = int(np.searchsorted(self.starts, start, side="right")) - 1
        parts = []
        i = first
        while i < len(self.counts) and self.starts[i] < stop:
            lo = max(start - int(self.starts[i]), 0)
            hi = min(stop - int(self.starts[i]), int(self.counts[i]))
            if hi > lo:
                base = i * self.step
                if self.counts[i] == min(self.step, self.nstored - base):
                    parts.append(np.arange(base + lo, base + hi, dtype=np.int64))
                else:
                    live = np.flatnonzero(self._flags(i))
                    if len(live) != self.counts[i]:
                        raise FormatError(
                            f"CTable /_valid_rows chunk {i}",
                            f"{self.counts[i]} live rows (as when opened)",
                            len(live),
                        )
                    parts.append(base + live[lo:hi].astype(np.int64))
            i += 1
        return np.concatenate(parts)
