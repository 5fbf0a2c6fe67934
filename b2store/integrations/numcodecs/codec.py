"""The numcodecs ``blosc2`` codec: Blosc2 chunks for Zarr v2 arrays and any numcodecs user.

Registered through the ``numcodecs.codecs`` entry point (nothing happens at import time). It
also reads the configurations that ``ocf_blosc2`` wrote into public Zarr datasets, such as
``{"id": "blosc2", "cname": "blosc2", "clevel": 9}`` where ``"blosc2"`` meant BloscLZ.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray

from ...chunk.decoder import decode_chunk
from ...chunk.encoder import (
    encode_chunk,
    quick_encode,
    resolve_filters,
    resolve_splitmode,
    writable_dtype,
)
from ...chunk.header import ChunkHeader
from ...chunk.params import (
    ChunkParams,
    codec_name,
    filter_name,
    parse_b2nd_codec,
    splitmode_name,
)
from ...constants import MAX_BUFFERSIZE
from ...errors import FormatError
from ...limits import DEFAULT_LIMITS

__all__ = ["Blosc2"]


class Blosc2(Codec):
    """Blosc2 compression of whole buffers, one Blosc2 chunk each.

    Parameters
    ----------
    cname : str
        ``"blosclz"``, ``"lz4"``, ``"lz4hc"``, ``"zlib"`` or ``"zstd"`` (``"blosc2"`` is read
        as ``"blosclz"``, as ocf_blosc2 meant it).
    clevel : int
        Compression level, 0 (none) to 9.
    filters : sequence of str
        The filter pipeline, applied in order: ``"shuffle"``, ``"bitshuffle"``, ``"delta"``,
        ``"trunc_prec"``, ``"bytedelta"``, ``"int_trunc"``.
    filters_meta : sequence of int, optional
        One parameter per filter (0 where the filter takes none).
    blocksize : int
        Bytes per block; 0 lets c-blosc2's rules pick.
    splitmode : str
        ``"auto"``, ``"always"``, ``"never"`` or ``"forward_compat"``.
    typesize : int, optional
        Bytes per item; by default the itemsize of the array being encoded.
    use_dict : bool
        Train a dictionary per chunk (zstd, lz4 and lz4hc).
    nthreads : int
        Blocks compressed in parallel (not part of the configuration).

    Notes
    -----
    Decoding reads any Blosc1 or Blosc2 chunk, whatever the configuration.
    """

    codec_id = "blosc2"
    max_buffer_size = MAX_BUFFERSIZE

    def __init__(
        self,
        cname: str = "zstd",
        clevel: int = 5,
        filters: Sequence[str] = ("shuffle",),
        filters_meta: Sequence[int] | None = None,
        blocksize: int = 0,
        splitmode: str = "auto",
        typesize: int | None = None,
        use_dict: bool = False,
        nthreads: int = 1,
    ):
        self.params = ChunkParams.from_numcodecs(
            {
                "cname": cname,
                "clevel": clevel,
                "filters": filters,
                "filters_meta": filters_meta,
                "blocksize": blocksize,
                "splitmode": splitmode,
                "typesize": typesize,
                "use_dict": use_dict,
            }
        )
        self._nthreads = nthreads

    @classmethod
    def from_params(cls, params: ChunkParams, nthreads: int = 1) -> Blosc2:
        """The codec that compresses with ``params``."""
        config = params.to_numcodecs()
        del config["id"]
        return cls(**config, nthreads=nthreads)

    # The configuration's fields, as numcodecs users read them off a codec.
    cname = property(lambda self: codec_name(self.params.codec))
    clevel = property(lambda self: self.params.clevel)
    filters = property(lambda self: [filter_name(f) for f in self.params.filters])
    filters_meta = property(lambda self: list(self.params.filters_meta))
    blocksize = property(lambda self: self.params.blocksize)
    splitmode = property(lambda self: splitmode_name(self.params.splitmode))
    typesize = property(lambda self: self.params.typesize)
    use_dict = property(lambda self: self.params.use_dict)

    def encode(self, buf) -> bytes:
        if isinstance(buf, np.ndarray):
            writable_dtype(buf.dtype)  # StringDType, objects: refused, named
        arr = self._contiguous(buf)
        params = self.params
        if params.typesize is None:
            # ensure_contiguous_ndarray keeps a numpy input's dtype; other buffers are bytes.
            size = arr.dtype.itemsize if isinstance(buf, np.ndarray) else 1
            params = self._sized(params, size)
        if self._nthreads == 1 and type(arr) is np.ndarray:
            # One call of the C loop, the layout decided once per chunk size: encode_chunk's
            # keywords and checks were 3.4 us of a 128 kB LZ4 chunk's 26 us.
            chunk = quick_encode(arr.reshape(-1).view(np.uint8), params, params.typesize)
            if chunk is not None:
                return chunk
        return encode_chunk(arr, params, nthreads=self._nthreads)

    def _contiguous(self, buf):
        """``buf`` as numcodecs' ``ensure_contiguous_ndarray`` checks it (no larger than
        ``max_buffer_size``, contiguous, no objects): ``bytes`` and contiguous NumPy arrays
        as they are, which the chunk layer takes, sparing its 2 us of a 5 us call."""
        kind = type(buf)
        if kind is bytes:
            if len(buf) <= self.max_buffer_size:
                return buf
        elif (
            kind is np.ndarray
            and buf.flags.c_contiguous
            and not buf.dtype.hasobject
            and buf.nbytes <= self.max_buffer_size
        ):
            return buf
        return ensure_contiguous_ndarray(buf, self.max_buffer_size)

    def _sized(self, params: ChunkParams, size: int) -> ChunkParams:
        """``params`` with the item size ``size``, kept per size: ``replace`` checks every
        field again, 17 us of a 128 kB LZ4 chunk's 48 us encode."""
        kept = self.__dict__.setdefault("_sized_params", {})
        found = kept.get(size)
        if found is None or found[0] is not params:
            found = kept[size] = (params, params.replace(typesize=size))
        return found[1]

    def decode(self, buf, out=None):
        src = self._contiguous(buf)
        # The decoded size a chunk header may ask for: this codec's buffer bound, and the
        # library's chunk limit (b2store.limits), checked before anything is allocated.
        limit = min(self.max_buffer_size, DEFAULT_LIMITS.max_chunk_nbytes)
        name = "max_chunk_nbytes"
        if limit < DEFAULT_LIMITS.max_chunk_nbytes:
            name = f"{type(self).__name__}.max_buffer_size"
        if out is None:
            return decode_chunk(src, max_nbytes=limit, limit_name=name)
        # Any writable buffer of the decoded size in bytes, whatever its dtype or shape.
        out_buf = self._contiguous(out)
        decode_chunk(src, out=out_buf, max_nbytes=limit, limit_name=name)
        return out

    @classmethod
    def from_config(cls, config) -> Blosc2:
        """The codec of a numcodecs configuration. It may also carry the same codec in the
        Zarr v3 form (``name`` and ``configuration``), as the compressor the ``b2nd`` xarray
        engine reports does so that Zarr v2 and v3 writers both take it; the two must agree."""
        config = dict(config)
        name, v3 = config.pop("name", None), config.pop("configuration", None)
        codec = cls(**config)
        if name is not None or v3 is not None:
            if name != "blosc2" or not isinstance(v3, dict):
                raise ValueError(f"a blosc2 configuration with name={name!r}: not blosc2's")
            other = ChunkParams.from_zarr(v3, itemsize=codec.params.typesize)
            if _pipeline_of(other) != _pipeline_of(codec.params):
                raise ValueError(
                    f"the blosc2 configuration {config} and its Zarr v3 form {v3} disagree"
                )
        return codec

    def get_config(self) -> dict:
        """``id``, ``cname`` and ``clevel``, plus the settings that differ from the defaults
        (so that ocf_blosc2 reads what default settings write)."""
        return self.params.to_numcodecs()

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "id")
        return f"Blosc2({params})"


def _pipeline_of(params: ChunkParams) -> tuple:
    """What a configuration decides of the compressed bytes (the item size aside)."""
    params = params.compact()
    return params.codec, params.clevel, params.pipeline, params.splitmode, params.blocksize


# The attributes every B2nd configuration holds, in its order (filters and codec_meta follow
# where they are set).
_CONFIG_KEYS = ("chunkshape", "blockshape", "dtype", "cname", "clevel", "splitmode")


class B2nd(Codec):
    """One b2nd chunk (blocks in block order, padded to whole blocks) per Zarr v2 chunk: the
    numcodecs twin of the Zarr v3 ``b2nd`` codec, for kerchunk's v2 references to ``.b2nd``
    files. ``decode`` returns the chunk's items in C order, cropped to ``chunkshape``.

    Parameters
    ----------
    chunkshape, blockshape : sequence of int
        The b2nd chunk and block shapes.
    dtype : str
        The items' NumPy type string (byte order included), e.g. ``"<f4"``.
    cname, clevel, filters, filters_meta, splitmode
        Compression of new chunks (python-blosc2's defaults: zstd, 5, shuffle). c-blosc2's
        plugins work on the blocks, so they are taken here: ``cname`` ``"zfp_acc"``,
        ``"zfp_prec"``, ``"zfp_rate"`` (the ``zfp`` extra), ``"ndlz"``; filters ``"ndcell"``
        and ``"ndmean"``.
    codec_meta
        The plugin codec's parameter byte (python-blosc2's ``codec_meta``).
    """

    codec_id = "b2nd"

    def __init__(
        self,
        chunkshape,
        blockshape,
        dtype,
        cname: str = "zstd",
        clevel: int = 5,
        filters: Sequence[str] | None = None,
        filters_meta: Sequence[int] | None = None,
        splitmode: str = "auto",
        codec_meta: int = 0,
    ):
        self.chunkshape = [int(c) for c in chunkshape]
        self.blockshape = [int(b) for b in blockshape]
        self.dtype = writable_dtype(dtype).str
        self.cname = parse_b2nd_codec(cname).name.lower()
        self.codec_meta = int(codec_meta)
        self.clevel = int(clevel)
        self.filters = None if filters is None else list(filters)
        self.filters_meta = None if filters_meta is None else [int(m) for m in filters_meta]
        self.splitmode = resolve_splitmode(splitmode).name.lower().removesuffix("_split")

    def encode(self, buf):
        from ...nd.chunks import cparams_for, encode_array_chunk
        from ...nd.geometry import array_to_chunk

        dtype = np.dtype(self.dtype)
        if isinstance(buf, np.ndarray):
            writable_dtype(buf.dtype)  # StringDType, objects: refused, named
        data = ensure_contiguous_ndarray(buf).view(dtype).reshape(self.chunkshape)
        kwargs = {
            "codec": self.cname,
            "clevel": self.clevel,
            "splitmode": self.splitmode,
            "codec_meta": self.codec_meta,
        }
        if self.filters is not None:
            slots, metas = resolve_filters(self.filters, self.filters_meta)
            kwargs.update(filters=list(slots), filters_meta=list(metas))
        cparams = cparams_for(dtype, self.blockshape, **kwargs)
        chunk = array_to_chunk(data, self.chunkshape, self.blockshape)
        # One thread, as the other codecs: Zarr and dask run codecs side by side already.
        return encode_array_chunk(chunk, dtype, cparams, nthreads=1)

    def decode(self, buf, out=None):
        from ...nd.geometry import chunk_nitems, chunk_to_array

        dtype = np.dtype(self.dtype)
        nbytes = chunk_nitems(self.chunkshape, self.blockshape) * dtype.itemsize
        # The header first (a whole frame is named there): a chunk whose nbytes is not this
        # codec's chunk is corrupt, refused before anything is allocated for it.
        found = ChunkHeader.from_bytes(ensure_contiguous_ndarray(buf)).nbytes
        if found != nbytes:
            raise FormatError(
                "b2nd chunk nbytes",
                f"{nbytes} (chunk {self.chunkshape}, blocks {self.blockshape}, {self.dtype})",
                found,
                4,
            )
        ext = chunk_to_array(
            decode_chunk(buf, max_nbytes=nbytes, blockshape=self.blockshape),
            self.chunkshape,
            self.blockshape,
            dtype,
        )
        items = np.ascontiguousarray(ext[tuple(slice(0, c) for c in self.chunkshape)])
        if out is None:
            return items.reshape(-1)
        dest = ensure_contiguous_ndarray(out).view(np.uint8)
        dest[:] = items.view(np.uint8).reshape(-1)
        return out

    def get_config(self) -> dict:
        config = {"id": self.codec_id, **{key: getattr(self, key) for key in _CONFIG_KEYS}}
        if self.filters is not None:
            config["filters"] = self.filters
            config["filters_meta"] = self.filters_meta
        if self.codec_meta:
            config["codec_meta"] = self.codec_meta
        return config

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(chunkshape={self.chunkshape}, blockshape={self.blockshape}, "
            f"dtype={self.dtype!r}, cname={self.cname!r}, clevel={self.clevel})"
        )
