"""The ``b2store`` command's arguments as text: numpy slices, lists of ints and names, and the
one-line error a wrong one gets."""

from __future__ import annotations

import re

import numpy as np

from ..errors import B2StoreError

__all__ = ["USAGE_ERROR", "UsageError", "parse_slice", "selection_shape", "ints", "names"]

#: Exit status of a user's mistake (argparse uses it too).
USAGE_ERROR = 2

_INT = re.compile(r"[+-]?\d+\Z")


class UsageError(B2StoreError):
    """A wrong option value, said in one line."""


# --- slices ------------------------------------------------------------------------------


def parse_slice(text: str) -> tuple:
    """A numpy basic index from its text: ``"0, 10:20, ::4"`` -> ``(0, slice(10, 20), slice(None,
    None, 4))``; ``...`` is Ellipsis. Nothing is evaluated.

    >>> parse_slice("0, 10:20, ::4")
    (0, slice(10, 20, None), slice(None, None, 4))
    >>> parse_slice("..., -1")
    (Ellipsis, -1)
    """
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()  # a trailing comma, as in "0,"
    key: list = []
    for part in parts:
        if part == "...":
            key.append(Ellipsis)
        elif ":" in part:
            fields = [f.strip() for f in part.split(":")]
            if len(fields) > 3:
                raise UsageError(f"bad --slice {text!r}: {part!r} has more than two colons")
            values = []
            for f in fields:
                if f and not _INT.match(f):
                    raise UsageError(f"bad --slice {text!r}: {f!r} is not an integer")
                values.append(int(f) if f else None)
            if len(values) == 3 and values[2] == 0:
                raise UsageError(f"bad --slice {text!r}: a step cannot be zero")
            key.append(slice(*values))
        elif _INT.match(part):
            key.append(int(part))
        else:
            raise UsageError(
                f"bad --slice {text!r}: {part!r} is not an integer, a start:stop:step or '...'"
            )
    return tuple(key)


def selection_shape(shape, key) -> tuple[int, ...]:
    """The shape ``key`` selects from ``shape``, computed on a zero-byte view (no data)."""
    try:
        return np.broadcast_to(np.empty((), np.uint8), shape)[key].shape
    except IndexError as exc:
        raise UsageError(f"bad --slice for shape {tuple(shape)}: {exc}") from None


def ints(text: str | None, option: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(_INT.match(p) and int(p) > 0 for p in parts):
        raise UsageError(f"bad {option} {text!r}: expected positive integers such as 100,200")
    return tuple(int(p) for p in parts)


def names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    if text.strip().lower() in ("", "none"):
        return []
    return [p.strip().lower() for p in text.split(",") if p.strip()]
