"""The ``quickstart`` command: decode the sample chunks b2store ships (written by c-blosc2 and
c-blosc1), describe them and check them against their hashes."""

from __future__ import annotations

import hashlib
import json
from importlib import resources

from ..chunk.decoder import chunk_info, decode_chunk

__all__ = ["run"]


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


def run(_args) -> int:
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
