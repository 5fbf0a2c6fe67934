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

    def command(name: str, help: str, example: str, description: str | None = None):
        # The examples are laid out by hand: the raw formatter keeps their lines.
        made = sub.add_parser(
            name,
            help=help,
            description=description or help[0].upper() + help[1:] + ".",
            epilog="example:\n" + example,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        made.set_defaults(command_module=name)  # (each command is the module of its name)
        return made

    p = command(
        "info",
        "describe any Blosc input (like ncdump -h)",
        "  b2store info sst.b2nd            the shape, chunks, codec and attributes\n"
        "  b2store info era5.b2z --chunks   every chunk of every array too\n"
        "  b2store info x.zarr --json | jq .",
    )
    p.add_argument("path", help="a chunk, frame, sparse frame, .b2d/.b2z tree or Zarr store")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.add_argument("--chunks", action="store_true", help="list every chunk too")

    p = command(
        "dump",
        "print the values, numpy-style",
        '  b2store dump sst.b2nd --slice "0, 10:20, ::4"\n'
        "  b2store dump era5.b2d --array /t2m --full",
    )
    p.add_argument("path", help="a chunk, frame, .b2d/.b2z tree or Zarr store")
    p.add_argument("--slice", help='a numpy basic index, e.g. "0, 10:20, ::4"')
    p.add_argument("--array", help="only this array of a tree or group (e.g. /temp)")
    p.add_argument("--dtype", help="view the bytes of a chunk or super-chunk as this dtype")
    p.add_argument("--full", action="store_true", help="print every value, however many")

    p = command(
        "verify",
        "decode every chunk and report the bad ones",
        "  b2store verify era5.b2z          exit status 1 when a chunk is bad\n"
        "  b2store verify sst.b2nd --json",
    )
    p.add_argument("path", help="a chunk, frame, .b2d/.b2z tree or Zarr store to check")
    p.add_argument("--json", action="store_true", help="print JSON for machines")

    p = command(
        "convert",
        "convert between .npy, netCDF/HDF5, Zarr v2/v3 and Blosc2 (.b2nd, .b2d, .b2z)",
        "  b2store convert sst.b2nd sst.zarr                 a Zarr v3 group xr.open_zarr reads\n"
        "  b2store convert era5.nc era5.b2z --codec zstd --clevel 5 --chunks 24,90,180\n"
        "  b2store convert era5.b2d era5.nc --nc-compression none\n"
        "  b2store convert era5.nc t2m.npy --variable t2m",
        description="Convert SRC to DST, chunk by chunk (memory stays within a few chunks). "
        "The formats come from the contents of SRC and the suffix of DST: .b2nd (one "
        "array), .b2d or .b2z (a tree of arrays), .npy, .zarr, .nc. Datasets keep their "
        "variable names (those the b2nd engine gives), dimensions, coordinates, attributes "
        "and groups: a .zarr output is the group xarray.open_zarr opens.",
    )
    p.add_argument("src", help="the input: .npy, .b2nd, .b2d/.b2z, Zarr v2/v3, netCDF or HDF5")
    p.add_argument("dst", help="the output, its format chosen by suffix")
    p.add_argument("--chunks", help="chunk shape, e.g. 100,200,200 (default: a choice by size)")
    p.add_argument("--blocks", help="block shape (Blosc2 outputs)")
    p.add_argument(
        "--codec",
        help="blosclz, lz4, lz4hc, zlib or zstd (default zstd); for Blosc2 outputs also "
        "zfp_acc, zfp_prec, zfp_rate (the zfp extra) and ndlz, with --codec-meta",
    )
    p.add_argument(
        "--codec-meta",
        type=int,
        choices=range(256),
        metavar="0-255",
        help="the plugin codec's parameter, as python-blosc2's codec_meta: zfp_acc's error "
        "exponent as an int8 (253: 10**-3), zfp_prec's bit planes, zfp_rate's percent of "
        "the item's bits, ndlz's cell (4 or 8)",
    )
    p.add_argument(
        "--clevel",
        type=int,
        choices=range(10),
        metavar="0-9",
        help="compression level (default 5; 4 for .nc outputs)",
    )
    p.add_argument("--filters", help='e.g. "shuffle", "bitshuffle", "shuffle,bytedelta", "none"')
    p.add_argument("--variable", help="the variable of a dataset to write to an array format")
    p.add_argument(
        "--zarr-format", type=int, choices=(2, 3), default=3, help="for .zarr outputs (3)"
    )
    p.add_argument(
        "--nc-compression",
        default="zlib",
        metavar="{zlib,none}",
        help="for .nc outputs: netCDF4's zlib deflate at --clevel (default), or none",
    )
    p.add_argument(
        "--decoded",
        action="store_true",
        help="write datasets' values as xarray decodes them (packed integers as floats, fill "
        "values as NaN); by default each variable keeps its dtype, packing and fill value",
    )
    p.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument(
        "--progress",
        action="store_true",
        default=None,
        help="always show a bar on stderr (default: on a terminal, for more than 64 MiB)",
    )
    bar.add_argument("--no-progress", dest="progress", action="store_false", help="never")

    p = command(
        "demo",
        "write a small climate dataset to Blosc2 and use it from xarray, zarr, python-blosc2",
        "  b2store demo                     in a temporary directory, removed after\n"
        "  b2store demo --dir ./demo        keep the files to look at",
    )
    p.add_argument("--dir", help="write the files here and keep them (default: a temp dir)")

    p = command(
        "quickstart",
        "decode the embedded sample chunks and check them",
        "  b2store quickstart               takes no arguments",
    )

    p = command(
        "decode",
        "decode a chunk to raw bytes",
        "  b2store decode chunk.bin -o raw.bin\n  b2store decode chunk.bin | od -f | head",
    )
    p.add_argument("path", help="one Blosc chunk (a file holding its bytes)")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
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
