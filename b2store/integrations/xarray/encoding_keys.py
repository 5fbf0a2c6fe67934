"""The per-variable encoding keys ``to_b2nd`` knows, in named sets: those that choose how a
frame is stored, the CF keys handed to xarray's encoder (those of them that say how values are
stored apart), netCDF's character-array keys, and the keys other backends leave in a
variable's ``.encoding`` that say nothing about its values (see :mod:`.encoding`, which
applies them).
"""

from __future__ import annotations

from xarray.conventions import CF_RELATED_DATA

__all__ = ["CHAR_DIM", "CHAR_KEYS", "STORAGE_KEYS", "VALUE_KEYS", "CF_KEYS", "FOREIGN_KEYS"]

#: The encoding key (xarray's own, which its decoder sets on a character array it joins)
#: that marks a variable :func:`characters` split into one byte per item.
CHAR_DIM = "char_dim_name"
#: The CF keys of netCDF's character arrays (``dtype: "S1"``, see :func:`characters`).
CHAR_KEYS = ("_Encoding", CHAR_DIM)
#: Per-variable encoding keys that choose how the frame is stored.
STORAGE_KEYS = frozenset(
    {"codec", "codec_meta", "clevel", "filters", "filters_meta", "splitmode", "chunks", "blocks"}
)
#: The CF keys that say how values are stored (masking, packing, times, ``_Unsigned``): those
#: of a stored variable are the ones values appended or written into it are encoded with.
VALUE_KEYS = (
    "dtype",
    "_FillValue",
    "missing_value",
    "scale_factor",
    "add_offset",
    "units",
    "calendar",
    "_Unsigned",
)
#: Per-variable encoding keys handed to xarray's CF encoder, which stores them as attributes:
#: the value keys, and the CF linkage ``decode_coords="all"``, rioxarray and cf_xarray keep in
#: ``.encoding`` (``coordinates``, ``grid_mapping``, ``bounds``, ...).
CF_KEYS = frozenset(
    {
        *VALUE_KEYS,
        *CHAR_KEYS,
        "coordinates",
        *CF_RELATED_DATA,
    }
)
#: Keys other backends and xarray leave in a variable's ``.encoding`` on open, about how the
#: file they came from was stored (never about the values): ignored there, as xarray's
#: writers ignore them, refused through ``encoding=``.
FOREIGN_KEYS = frozenset(
    {
        # xarray's bookkeeping
        "source",
        "original_shape",
        "preferred_chunks",
        # netCDF4 / h5netcdf storage (xarray.backends.netCDF4_._extract_nc4_variable_encoding)
        "zlib",
        "szip",
        "bzip2",
        "blosc",
        "zstd",
        "complevel",
        "fletcher32",
        "contiguous",  # also the b2nd engine's: to_b2nd's ``contiguous=`` chooses
        "chunksizes",
        "shuffle",
        "compression",
        "compression_opts",
        "significant_digits",
        "quantize_mode",
        "blosc_shuffle",
        "szip_coding",
        "szip_pixels_per_block",
        "endian",
        "least_significant_digit",
        # Zarr storage (xarray.backends.zarr.extract_zarr_variable_encoding)
        "shards",
        "compressors",
        "compressor",
        "serializer",
        "cache_metadata",
        "write_empty_chunks",
        "chunk_key_encoding",
        "fill_value",
        "object_codec",
        "dimension_separator",
    }
)
