"""The progress bar of long writes (``to_b2nd``, ``asarray``, ``b2store convert``): one tqdm
bar on stderr counting bytes, shared by every layer that writes (it imports nothing of b2store).

``progress=True`` always shows it, ``False`` never, ``None`` (the default) only when stderr is
a terminal and the work is large: more than :data:`LARGE_BYTES` of data or
:data:`LARGE_CHUNKS` chunks. Small writes stay silent even on a terminal, so that an
interactive session is not filled with bars of writes that take no time; a large one on a
terminal shows its bar after half a second (a fast one never draws).
"""

from __future__ import annotations

import sys

__all__ = ["LARGE_BYTES", "LARGE_CHUNKS", "bar", "is_large"]

#: Data above this many bytes is large enough for a bar by default (64 MiB).
LARGE_BYTES = 64 * 2**20
#: ...as is data written in more than this many chunks.
LARGE_CHUNKS = 16


def is_large(nbytes: int, nchunks: int = 0) -> bool:
    """Whether a write of ``nbytes`` in ``nchunks`` chunks deserves a bar by default."""
    return nbytes > LARGE_BYTES or nchunks > LARGE_CHUNKS


def bar(total: int, desc: str, progress: bool | None, *, large: bool = True):
    """A bar for ``total`` bytes: always (``progress=True``), never (``False``), or, for
    ``None``, when ``large`` and stderr is a terminal; a stand-in that counts nothing
    otherwise (or when tqdm is missing)."""
    if progress is False or (progress is None and not (large and _on_terminal())):
        return NoBar()
    try:
        from tqdm import tqdm
    except ImportError:  # a dependency, but the work goes on without a bar
        return NoBar()
    return tqdm(
        total=total,
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        delay=0 if progress else 0.5,
        file=sys.stderr,
        leave=True,
    )


def _on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


class NoBar:
    """What callers update when no bar is shown."""

    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass
