"""b2store: Blosc2 chunks, frames and b2nd arrays for numcodecs, Zarr and xarray.

Pure Python and small Cython kernels over numpy, lz4, zstandard and msgpack; no C-Blosc.
"""

from ._sync import set_sync
from .api import open
from .chunk.decoder import chunk_info, decode_chunk
from .chunk.encoder import encode_chunk
from .chunk.header import ChunkInfo
from .constants import Codec, Filter, SpecialValue, SplitMode
from .errors import (
    B2StoreError,
    ConflictError,
    FormatError,
    LinkError,
    RemoteError,
    TargetExistsError,
    UnsupportedError,
    WriterLockedError,
)
from .frame.schunk import FrameClosedError, SChunk
from .limits import LimitError, Limits
from .nd.array import B2ndArray
from .nd.create import asarray, empty, frombuffer, full, zeros

__all__ = [
    "decode_chunk",
    "Blosc2",
    "B2ndStore",
    "to_b2nd",
    "open_tree",
    "open_table",
    "to_table",
    "encode_chunk",
    "open",
    "SChunk",
    "B2ndArray",
    "asarray",
    "zeros",
    "empty",
    "full",
    "frombuffer",
    "chunk_info",
    "ChunkInfo",
    "Codec",
    "Filter",
    "SplitMode",
    "SpecialValue",
    "B2StoreError",
    "LinkError",
    "FormatError",
    "UnsupportedError",
    "RemoteError",
    "TargetExistsError",
    "ConflictError",
    "WriterLockedError",
    "FrameClosedError",
    "Limits",
    "LimitError",
    "set_sync",
]

__version__ = "0.1.0.dev0"


# Integrations are imported on first use: importing b2store stays cheap (no numcodecs, zarr
# or xarray until a name that needs them is asked for).
_LAZY = {
    "Blosc2": ".integrations.numcodecs.codec",
    "B2ndStore": ".integrations.zarr.store",
    "to_b2nd": ".integrations.xarray.to_b2nd",
    "open_tree": ".tree",
    "open_table": ".table.reader",
    "to_table": ".table.to_table",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'b2store' has no attribute {name!r}")
