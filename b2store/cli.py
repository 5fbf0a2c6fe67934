"""The ``b2store`` command: inspect and decode Blosc chunks from the shell."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from importlib import resources

import numpy as np

from .chunk.decoder import chunk_info, decode_chunk
from .errors import B2StoreError

__all__ = ["main"]


def _describe(info) -> str:
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
        print(f"  {_describe(chunk_info(data))}")
        print(
            f"  {meta['dtype']} {tuple(values.shape)}: min {values.min()}, max {values.max()}, "
            f"mean {values.mean():.3f}; sha256 {'matches' if ok else 'DIFFERS'}"
        )
    return 1 if failures else 0


def _info(args) -> int:
    with open(args.path, "rb") as f:
        print(_describe(chunk_info(f.read())))
    return 0


def _decode(args) -> int:
    with open(args.path, "rb") as f:
        decoded = decode_chunk(f.read())
    out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")
    with out:
        out.write(np.ascontiguousarray(decoded).tobytes())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="b2store", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("quickstart", help="decode the embedded samples and check them")
    p = sub.add_parser("info", help="print what a chunk's header says")
    p.add_argument("path")
    p = sub.add_parser("decode", help="decode a chunk to raw bytes")
    p.add_argument("path")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    args = parser.parse_args(argv)
    handler = {"quickstart": _quickstart, "info": _info, "decode": _decode}[args.command]
    try:
        return handler(args)
    except (B2StoreError, OSError) as exc:
        print(f"b2store: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
