"""The ``verify`` command: decode every chunk of any Blosc input and report each bad one with
where it lies and what is wrong."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from .. import _files
from ..chunk.decoder import decode_chunk
from ..errors import B2StoreError
from ..limits import DEFAULT_LIMITS
from .chunks import check_within, checked_decoder, expected_nbytes
from .inspection import detect, not_blosc, open_frame_path, zarr_arrays

__all__ = ["Problem", "run", "verify"]

# What verify checks besides chunks, named where a problem's chunk would be.
_NOT_CHUNKS = ("vlmeta", "group attributes")


# --- verify -------------------------------------------------------------------------------


@dataclass
class Problem:
    """One thing ``verify`` found wrong: where (array, chunk, byte offset) and the error."""

    error: str
    array: str | None = None
    chunk: int | str | None = None
    offset: int | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "array": self.array,
            "chunk": self.chunk,
            "offset": self.offset,
            "error": self.error,
        }

    def __str__(self) -> str:
        where = []
        if self.array is not None:
            where.append(f"array {self.array}")
        if self.chunk is not None:
            where.append(f"chunk {self.chunk}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{', '.join(where) or 'file'}: {self.error}"


def _error_text(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, B2StoreError) else f"{type(exc).__name__}: {text}"


def _verify_frame(obj, array: str | None) -> tuple[int, list[Problem]]:
    schunk = obj.schunk if hasattr(obj, "schunk") else obj
    problems = []
    header = schunk.header
    limit = schunk.limits.max_chunk_nbytes
    scratch = np.empty(0, np.uint8)
    start = 0  # (where chunk i starts, for frames of chunks of varying size)
    for i in range(schunk.nchunks):
        offset = None
        try:
            span = schunk.chunk_span(i)
            offset = None if span is None else span[1]
            chunk = schunk.get_chunk(i)
            # Checked as the readers check it (and dump), before anything is allocated.
            expected = expected_nbytes(header, i, schunk.nchunks)
            decoder = checked_decoder(chunk, expected, limit, i, schunk.blockshape, header.typesize)
            nbytes = decoder.header.nbytes
            if expected is None:
                check_within(header, i, start, nbytes)
                start += nbytes
            if decoder.special:
                continue  # its header is all there is to check (never fill gigabytes)
            # One buffer for every chunk (they are one size but the last): memory stays at
            # one chunk, however many there are.
            if len(scratch) < nbytes:
                scratch = np.empty(nbytes, np.uint8)
            decode_chunk(
                chunk, out=scratch[:nbytes], max_nbytes=limit, blockshape=schunk.blockshape
            )
        except Exception as exc:  # every failure is a finding: verify reports, never stops
            if offset is None:
                offset = _index_entry(schunk, i)
            problems.append(Problem(_error_text(exc), array, i, offset))
    # The vlmeta too, as the readers decode it (the Zarr store and the xarray engine read all
    # of it for attributes): a value they refuse is a finding, not an ok.
    try:
        dict(schunk.vlmeta)
    except Exception as exc:
        problems.append(Problem(_error_text(exc), array, _NOT_CHUNKS[0]))
    return schunk.nchunks, problems


def _index_entry(schunk, i: int) -> int | None:
    try:
        entry = int(schunk.offsets[i])
    except Exception:
        return None
    return entry if entry >= 0 else None


def _verify_zarr(path) -> tuple[int, list[Problem]]:
    count, problems = 0, []
    for name, arr in zarr_arrays(path):
        grid = arr.cdata_shape
        for idx in np.ndindex(*grid):
            count += 1
            region = tuple(
                slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(idx, arr.chunks, arr.shape)
            )
            try:
                arr[region]
            except Exception as exc:
                key = arr.metadata.encode_chunk_key(idx)
                problems.append(Problem(_error_text(exc), name, key))
    return count, problems


def verify(path) -> dict:
    """Decode every chunk of ``path``; report each one that fails.

    Returns
    -------
    dict
        ``{"path", "kind", "chunks": number checked, "ok": bool, "problems": [{"array",
        "chunk", "offset", "error"}, ...]}``; ``offset`` is the chunk's byte offset in its
        file when known.
    """
    kind = detect(path)
    problems: list[Problem] = []
    count = 0
    if kind == "chunk":
        count = 1
        try:
            data = _files.read_regular(path)
            if not checked_decoder(data, None, DEFAULT_LIMITS.max_chunk_nbytes, 0).special:
                decode_chunk(data)
        except Exception as exc:
            off = getattr(exc, "offset", None)
            problems.append(Problem(_error_text(exc), None, 0, off))
    elif kind in ("frame", "sparse-frame"):
        try:
            obj = open_frame_path(path)
        except Exception as exc:
            problems.append(Problem(_error_text(exc), offset=getattr(exc, "offset", None)))
        else:
            with obj:
                count, problems = _verify_frame(obj, None)
    elif kind == "tree":
        from ..tree import open_tree

        try:
            tree = open_tree(os.fspath(path))
            refs = tree.arrays()
        except Exception as exc:
            problems.append(Problem(_error_text(exc), offset=getattr(exc, "offset", None)))
            refs = {}
        else:
            # The groups' attributes (each group's __vlmeta__ frame), as the readers take them.
            try:
                tree.groups()
            except Exception as exc:
                problems.append(Problem(_error_text(exc), None, _NOT_CHUNKS[1]))
        for name, ref in refs.items():
            try:
                obj = ref.open()
            except Exception as exc:
                problems.append(Problem(_error_text(exc), name, offset=ref.offset or None))
                continue
            with obj:
                n, found = _verify_frame(obj, name)
            count += n
            problems += found
    elif kind == "zarr":
        count, problems = _verify_zarr(path)
    else:
        raise not_blosc(path, kind)
    return {
        "path": os.fspath(path),
        "kind": kind,
        "chunks": count,
        "ok": not problems,
        "problems": [p.as_dict() for p in problems],
    }


def run(args) -> int:
    report = verify(args.path)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for p in report["problems"]:
            where = [f"array {p['array']}"] if p["array"] is not None else []
            if p["chunk"] in _NOT_CHUNKS:
                where.append(p["chunk"])
            elif p["chunk"] is not None:
                where.append(f"chunk {p['chunk']}")
            if p["offset"] is not None:
                where.append(f"at byte {p['offset']}")
            print(f"BAD {', '.join(where) or args.path}: {p['error']}")
        state = "ok" if report["ok"] else f"{len(report['problems'])} bad"
        print(f"{args.path}: {report['chunks']} chunks checked, {state}")
    return 0 if report["ok"] else 1
