"""The ``dump`` command: an array's values (or a slice of them), printed numpy-style, with the
size of what would be decoded checked before anything is read."""

from __future__ import annotations

import sys

import numpy as np

from ..limits import DEFAULT_LIMITS
from .arguments import UsageError, parse_slice, selection_shape

__all__ = ["DUMP_LIMIT", "run"]

#: ``dump`` refuses to load more than this without ``--full`` or ``--slice``.
DUMP_LIMIT = 256 * 2**20


def run(args) -> int:
    from .inspection import open_arrays

    key = parse_slice(args.slice) if args.slice is not None else (Ellipsis,)
    found = False
    with np.printoptions(threshold=sys.maxsize) if args.full else np.printoptions():
        for name, arr in open_arrays(args.path, dtype=args.dtype):
            if args.array is not None and name.strip("/") != args.array.strip("/"):
                continue
            found = True
            shape = selection_shape(arr.shape, key)
            nbytes = int(np.prod(shape)) * np.dtype(arr.dtype).itemsize
            # Checked before anything is read: a 300-byte file may hold a terabyte of zeros.
            if nbytes > DUMP_LIMIT and not args.full:
                raise UsageError(
                    f"{name}: the selection is {nbytes} bytes decoded; narrow it with "
                    "--slice, or give --full"
                )
            if nbytes > DEFAULT_LIMITS.max_chunk_nbytes:
                raise UsageError(
                    f"{name}: the selection is {nbytes} bytes decoded, more than dump holds "
                    f"at once even with --full ({DEFAULT_LIMITS.max_chunk_nbytes}, "
                    "Limits.max_chunk_nbytes); print it in pieces with --slice"
                )
            values = np.asarray(arr[key])
            sel = f"[{args.slice}]" if args.slice is not None else ""
            print(f"{name}{sel}: shape {values.shape}, dtype {values.dtype}")
            print(values)
    if not found:
        raise UsageError(f"{args.path}: no array named {args.array!r}")
    return 0
