"""The ``b2store`` command: look into, dump, verify and convert Blosc2 data, and run the demo.

Every subcommand takes its input by path and recognises it by content (see
:mod:`b2store.cli.inspection`). A user's mistake (a missing or corrupt file, a wrong option) is
one line on stderr and exit status 2; ``verify`` exits 1 when it finds bad chunks.

This module is the parser and the dispatch; each command is a module of this package with a
``run(args)``, imported only when that command runs (so ``b2store --help`` imports no zarr).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import __version__
from ..errors import B2StoreError
from .arguments import USAGE_ERROR

__all__ = ["main"]


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
    p.set_defaults(command_module="info")

    p = sub.add_parser("dump", help="print the values, numpy-style")
    p.add_argument("path")
    p.add_argument("--slice", help='a numpy basic index, e.g. "0, 10:20, ::4"')
    p.add_argument("--array", help="only this array of a tree or group (e.g. /temp)")
    p.add_argument("--dtype", help="view the bytes of a chunk or super-chunk as this dtype")
    p.add_argument("--full", action="store_true", help="print every value, however many")
    p.set_defaults(command_module="dump")

    p = sub.add_parser("verify", help="decode every chunk and report the bad ones")
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.set_defaults(command_module="verify")

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
    p.set_defaults(command_module="convert")

    p = sub.add_parser(
        "demo",
        help="write a small climate dataset to Blosc2 and use it from xarray, zarr, python-blosc2",
    )
    p.add_argument("--dir", help="write the files here and keep them (default: a temp dir)")
    p.set_defaults(command_module="demo")

    p = sub.add_parser("quickstart", help="decode the embedded sample chunks and check them")
    p.set_defaults(command_module="quickstart")

    p = sub.add_parser("decode", help="decode a chunk to raw bytes")
    p.add_argument("path")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.set_defaults(command_module="decode")
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
        command = importlib.import_module(f"{__name__}.{args.command_module}")
        return command.run(args)
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
