"""The ``b2store`` command: look into, dump, verify and convert Blosc2 data, and run the demo.

Every subcommand takes its input by path and recognises it by content (see
:mod:`b2store.inspection`). A user's mistake (a missing or corrupt file, a wrong option) is
one line on stderr and exit status 2; ``verify`` exits 1 when it finds bad chunks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from importlib import resources

import numpy as np

from . import __version__, _files
from .chunk.decoder import chunk_info, decode_chunk
from .errors import B2StoreError
from .limits import DEFAULT_LIMITS

__all__ = ["main", "parse_slice"]

#: Exit status of a user's mistake (argparse uses it too).
USAGE_ERROR = 2
#: ``dump`` refuses to load more than this without ``--full`` or ``--slice``.
DUMP_LIMIT = 256 * 2**20

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


def _selection_shape(shape, key) -> tuple[int, ...]:
    """The shape ``key`` selects from ``shape``, computed on a zero-byte view (no data)."""
    try:
        return np.broadcast_to(np.empty((), np.uint8), shape)[key].shape
    except IndexError as exc:
        raise UsageError(f"bad --slice for shape {tuple(shape)}: {exc}") from None


# --- commands ------------------------------------------------------------------------------


def _describe_chunk(info) -> str:
    filters = ", ".join(
        f"{getattr(f, 'name', f)}({m})" for f, m in zip(info.filters, info.filters_meta) if f
    )
    special = info.special.name if info.special else "no"
    return (
        f"version {info.version}, {info.codec.name if hasattr(info.codec, 'name') else info.codec}"
        f", typesize {info.typesize}, {info.nbytes} -> {info.cbytes} bytes"
        f" ({info.nbytes / max(info.cbytes, 1):.1f}x), {info.nblocks} blocks of {info.blocksize}"
        f"{', split' if info.split else ''}, filters [{filters or 'none'}], special {special}"
    )


def _quickstart(_args) -> int:
    """Decode the embedded sample chunks, describe them and check them against their hashes."""
    samples = resources.files("b2store.samples")
    manifest = json.loads((samples / "samples.json").read_text())
    failures = 0
    for name, meta in manifest.items():
        data = (samples / name).read_bytes()
        decoded = decode_chunk(data)
        ok = hashlib.sha256(decoded).hexdigest() == meta["sha256"]
        failures += not ok
        values = decoded.view(meta["dtype"]).reshape(meta["shape"])
        print(f"{name} (written by {meta['writer']})")
        print(f"  {_describe_chunk(chunk_info(data))}")
        print(
            f"  {meta['dtype']} {tuple(values.shape)}: min {values.min()}, max {values.max()}, "
            f"mean {values.mean():.3f}; sha256 {'matches' if ok else 'DIFFERS'}"
        )
    return 1 if failures else 0


def _info(args) -> int:
    from .inspection import describe
    from .report import format_info

    info = describe(args.path, chunks=args.chunks)
    print(json.dumps(info, indent=1) if args.json else format_info(info))
    return 0


def _dump(args) -> int:
    from .inspection import open_arrays

    key = parse_slice(args.slice) if args.slice is not None else (Ellipsis,)
    found = False
    with np.printoptions(threshold=sys.maxsize) if args.full else np.printoptions():
        for name, arr in open_arrays(args.path, dtype=args.dtype):
            if args.array is not None and name.strip("/") != args.array.strip("/"):
                continue
            found = True
            shape = _selection_shape(arr.shape, key)
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


def _verify(args) -> int:
    from .verification import verify

    report = verify(args.path)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for p in report["problems"]:
            where = [f"array {p['array']}"] if p["array"] is not None else []
            if p["chunk"] is not None:
                where.append(f"chunk {p['chunk']}")
            if p["offset"] is not None:
                where.append(f"at byte {p['offset']}")
            print(f"BAD {', '.join(where) or args.path}: {p['error']}")
        state = "ok" if report["ok"] else f"{len(report['problems'])} bad"
        print(f"{args.path}: {report['chunks']} chunks checked, {state}")
    return 0 if report["ok"] else 1


def _decode(args) -> int:
    decoded = decode_chunk(_files.read_regular(args.path))
    out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")
    with out:
        out.write(np.ascontiguousarray(decoded).tobytes())
    return 0


def _convert(args) -> int:
    from .convert import convert

    convert(
        args.src,
        args.dst,
        chunks=_ints(args.chunks, "--chunks"),
        blocks=_ints(args.blocks, "--blocks"),
        codec=args.codec,
        clevel=args.clevel,
        filters=_names(args.filters),
        variable=args.variable,
        zarr_format=args.zarr_format,
        overwrite=args.overwrite,
        progress=args.progress,
        verbose=not args.quiet,
    )
    return 0


def _demo(args) -> int:
    from .demo import run_demo

    return run_demo(args.dir, keep=args.dir is not None)


def _ints(text: str | None, option: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(_INT.match(p) and int(p) > 0 for p in parts):
        raise UsageError(f"bad {option} {text!r}: expected positive integers such as 100,200")
    return tuple(int(p) for p in parts)


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    if text.strip().lower() in ("", "none"):
        return []
    return [p.strip().lower() for p in text.split(",") if p.strip()]


# --- the parser ---------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block): ``b2store: error: ...``."""

    def error(self, message: str):
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="b2store",
        description="Look into, verify and convert Blosc2 data (chunks, frames, .b2nd arrays, "
        ".b2d/.b2z trees, Zarr stores using Blosc2).",
    )
    parser.add_argument("--version", action="version", version=f"b2store {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error (for bug reports)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("info", help="describe any Blosc input (like ncdump -h)")
    p.add_argument("path", help="a chunk, frame, sparse frame, .b2d/.b2z tree or Zarr store")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.add_argument("--chunks", action="store_true", help="list every chunk too")
    p.set_defaults(handler=_info)

    p = sub.add_parser("dump", help="print the values, numpy-style")
    p.add_argument("path")
    p.add_argument("--slice", help='a numpy basic index, e.g. "0, 10:20, ::4"')
    p.add_argument("--array", help="only this array of a tree or group (e.g. /temp)")
    p.add_argument("--dtype", help="view the bytes of a chunk or super-chunk as this dtype")
    p.add_argument("--full", action="store_true", help="print every value, however many")
    p.set_defaults(handler=_dump)

    p = sub.add_parser("verify", help="decode every chunk and report the bad ones")
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.set_defaults(handler=_verify)

    p = sub.add_parser(
        "convert",
        help="convert between .npy, netCDF/HDF5, Zarr v2/v3 and Blosc2 (.b2nd, .b2d, .b2z)",
        description="Convert SRC to DST, chunk by chunk (memory stays within a few chunks). "
        "The formats come from the contents of SRC and the suffix of DST: .b2nd (one "
        "array), .b2d or .b2z (a tree of arrays), .npy, .zarr, .nc.",
    )
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--chunks", help="chunk shape, e.g. 100,200,200")
    p.add_argument("--blocks", help="block shape (Blosc2 outputs)")
    p.add_argument("--codec", help="blosclz, lz4, lz4hc, zlib or zstd (default zstd)")
    p.add_argument("--clevel", type=int, choices=range(10), metavar="0-9", help="default 5")
    p.add_argument("--filters", help='e.g. "shuffle", "bitshuffle", "shuffle,bytedelta", "none"')
    p.add_argument("--variable", help="the variable of a dataset to write to an array format")
    p.add_argument(
        "--zarr-format", type=int, choices=(2, 3), default=3, help="for .zarr outputs (3)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("--progress", action="store_true", default=None, help="always show a bar")
    bar.add_argument("--no-progress", dest="progress", action="store_false", help="never")
    p.set_defaults(handler=_convert)

    p = sub.add_parser(
        "demo",
        help="write a small climate dataset to Blosc2 and use it from xarray, zarr, python-blosc2",
    )
    p.add_argument("--dir", help="write the files here and keep them (default: a temp dir)")
    p.set_defaults(handler=_demo)

    p = sub.add_parser("quickstart", help="decode the embedded sample chunks and check them")
    p.set_defaults(handler=_quickstart)

    p = sub.add_parser("decode", help="decode a chunk to raw bytes")
    p.add_argument("path")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.set_defaults(handler=_decode)
    return parser


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (B2StoreError, OSError)):
        if isinstance(exc, FileNotFoundError) and exc.filename:
            return f"{exc.filename}: no such file or directory"
        return text
    if isinstance(exc, ImportError):
        return f"{text} (install the extras: pip install 'b2store[all]')"
    return f"{type(exc).__name__}: {text}"


def main(argv: list[str] | None = None) -> int:
    """Run the ``b2store`` command with ``argv`` (default: ``sys.argv[1:]``); the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("b2store: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `b2store dump x | head`: the reader left; nothing more to say.
        sys.stderr.close()
        return 0
    except Exception as exc:
        if args.debug:
            raise
        print(f"b2store: {_one_line(exc)}", file=sys.stderr)
        return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
