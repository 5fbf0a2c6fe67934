"""A lying special-value flag: a chunk whose header says "all zeros" (or NaN, a repeated value,
uninitialized) while its cbytes says it holds streams is corrupt, and every decode path says
so with a FormatError naming cbytes, never returning the special value in place of the data.

The class is generated: real chunks (encoded here with every codec, filter and item size, and
the reference corpus' chunks) with each special kind set on them, through the chunk decoder,
the block reads, the numcodecs codec, and frames read by b2store.open, B2ndStore and xarray.
Real special chunks (python-blosc2's zeros, NaN, repeated values, uninitialized) still read.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import CORPUS

import b2store
from b2store.chunk.decoder import chunk_info, decode_chunk
from b2store.chunk.header import ChunkHeader
from b2store.chunk.partial import decode_blocks, plan_blocks, prefix_length
from b2store.constants import SpecialValue
from b2store.errors import FormatError

SPECIALS = [SpecialValue.ZERO, SpecialValue.NAN, SpecialValue.VALUE, SpecialValue.UNINIT]
LIE = r"cbytes at offset 12: expected (exactly the 32-byte header|the 32-byte header plus one)"
# A frame's reader names the chunk: chunk 1, say (c/0/1 through B2ndStore).
IN_FRAME = LIE.replace("cbytes ", r"cbytes of chunk [0-9c/]+ ")


def lie(chunk: bytes, special: SpecialValue) -> bytes:
    """``chunk`` with its blosc2_flags claiming ``special``, every other byte kept."""
    out = bytearray(chunk)
    out[31] = (out[31] & 0x8F) | (int(special) << 4)
    return bytes(out)


def _tells(chunk: bytes, special: SpecialValue) -> bool:
    """Whether a lie about ``chunk`` can be told from its sizes at all: a chunk of exactly a
    header (plus one item, for a repeated value) could be that special chunk."""
    h = ChunkHeader.from_bytes(chunk)
    if not h.extended or h.vl_blocks:
        return False  # a 16-byte header has no special bits; VL chunks are refused anyway
    size = 32 + (h.typesize if special == SpecialValue.VALUE else 0)
    return h.cbytes != size and h.nbytes > 0


def _encoded_chunks(seed: int, n: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    chunks = []
    codecs = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]
    filters = [[], ["shuffle"], ["bitshuffle"], ["delta", "shuffle"], ["bytedelta"]]
    for i in range(n):
        dtype = np.dtype(["u1", "<i2", "<f4", "<f8", "<i8", "V3"][i % 6])
        nitems = int(rng.integers(1, 5000))
        raw = rng.integers(0, 7, nitems * dtype.itemsize, dtype=np.uint8)  # compressible
        if i % 3 == 0:
            raw = rng.integers(0, 256, raw.size, dtype=np.uint8)  # incompressible: memcpyed
        chunks.append(
            b2store.encode_chunk(
                raw.tobytes(),
                typesize=dtype.itemsize,
                codec=codecs[i % len(codecs)],
                clevel=int(rng.integers(1, 10)),
                filters=filters[(i // 5) % len(filters)] if dtype.itemsize > 1 else [],
                blocksize=[None, 256, 1024][i % 3],
            )
        )
    return chunks


def _corpus_chunks(limit: int) -> list[bytes]:
    """Chunks of the reference corpus (python-blosc2 and c-blosc2 writers), when present."""
    out = []
    for folder in ("generated", "compat"):
        root = CORPUS / folder
        if not root.is_dir():
            continue
        for path in sorted(root.glob("*.b2nd")) + sorted(root.glob("*.b2frame")):
            try:
                with b2store.SChunk.open(path) as s:
                    for i in range(min(s.nchunks, 2)):
                        out.append(bytes(s.get_chunk(i)))
            except b2store.B2StoreError:
                continue
            if len(out) >= limit:
                return out
    return out


def _cases():
    chunks = _encoded_chunks(19, 60) + _corpus_chunks(200)
    rng = random.Random(19)
    for chunk in chunks:
        for special in rng.sample(SPECIALS, 2):
            if _tells(chunk, special):
                yield lie(chunk, special)


CASES = list(_cases())


def test_the_class_is_generated():
    assert len(CASES) >= 100


def test_chunk_decoder_refuses_lying_flags():
    for chunk in CASES:
        with pytest.raises(FormatError, match=LIE):
            decode_chunk(chunk)
        with pytest.raises(FormatError, match=LIE):
            chunk_info(chunk)


def test_block_reads_refuse_lying_flags():
    for chunk in CASES[:80]:
        with pytest.raises(FormatError, match=LIE):
            prefix_length(chunk[:32])
        with pytest.raises(FormatError, match=LIE):
            plan = plan_blocks(chunk, [0], size=len(chunk))
            decode_blocks(plan, chunk, [chunk], np.empty(1 << 22, np.uint8))


def test_numcodecs_codec_refuses_lying_flags():
    from b2store.integrations.numcodecs.codec import Blosc2

    codec = Blosc2()
    for chunk in CASES[:80]:
        with pytest.raises(FormatError, match=LIE):
            codec.decode(chunk)


def test_lying_value_of_another_size():
    """A repeated value is one item: a 'value' longer than the typesize is a lie too."""
    chunk = b2store.encode_chunk(np.arange(1000, dtype="<f8").tobytes(), typesize=8)
    head = bytearray(lie(chunk, SpecialValue.VALUE)[:32])
    head[12:16] = (32 + 16).to_bytes(4, "little")  # 16 bytes of "value" for 8-byte items
    with pytest.raises(FormatError, match="plus one 8-byte value"):
        decode_chunk(bytes(head) + b"\x00" * 16)


def _frame_with_lies(tmp_path, seed: int):
    """A b2nd file whose stored chunks all claim a special value; the true data."""
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(40, 30)).round(2)
    path = tmp_path / f"lie{seed}.b2nd"
    b2store.asarray(data, urlpath=path, chunks=(10, 30), blocks=(5, 30)).close()
    raw = bytearray(path.read_bytes())
    with b2store.SChunk.open(path) as s:
        spans = [s.chunk_span(i) for i in range(s.nchunks)]
    r = random.Random(seed)
    for span in spans:
        assert span is not None
        offset = span[1]
        raw[offset : offset + 32] = lie(bytes(raw[offset : offset + 32]), r.choice(SPECIALS))
    path.write_bytes(bytes(raw))
    return path, data


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_frames_refuse_lying_flags(tmp_path, seed):
    path, _ = _frame_with_lies(tmp_path, seed)
    with b2store.open(path) as arr:
        with pytest.raises(FormatError, match=IN_FRAME):
            arr[...]
        with pytest.raises(FormatError, match=IN_FRAME):
            arr[3, 4]  # the small-read path: one block of one chunk
        with pytest.raises(FormatError, match=IN_FRAME):
            arr.schunk.decompress_chunk(1)


def test_zarr_and_xarray_refuse_lying_flags(tmp_path):
    zarr = pytest.importorskip("zarr")
    xr = pytest.importorskip("xarray")
    from b2store.integrations.zarr.store import B2ndStore

    path, _ = _frame_with_lies(tmp_path, 4)
    with pytest.raises(FormatError, match=IN_FRAME):
        zarr.open_array(B2ndStore(path), mode="r")[...]
    with pytest.raises(FormatError, match=IN_FRAME):
        zarr.open_array(B2ndStore(path), mode="r")[2, 3]
    with pytest.raises(FormatError, match=IN_FRAME):
        xr.open_dataset(path, engine="b2nd").load()


# --- real special chunks still read ---------------------------------------------------------

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the special chunks")


@pytest.mark.parametrize(
    "make,expected",
    [
        (lambda p: blosc2.zeros((100,), urlpath=p, mode="w", chunks=(10,)), np.zeros(100)),
        (lambda p: blosc2.full((100,), 3.5, urlpath=p, mode="w", chunks=(10,)), np.full(100, 3.5)),
        (
            lambda p: blosc2.full((100,), np.nan, urlpath=p, mode="w", chunks=(10,)),
            np.full(100, np.nan),
        ),
        (
            lambda p: blosc2.full((100,), 7, dtype="i1", urlpath=p, mode="w", chunks=(10,)),
            np.full(100, 7, "i1"),
        ),
        (  # items wider than the header's typesize byte: typesize 1, a 300-byte value
            lambda p: blosc2.full(
                (10,), np.void(b"x" * 300), dtype="V300", urlpath=p, mode="w", chunks=(5,)
            ),
            np.full(10, np.void(b"x" * 300), "V300"),
        ),
        (lambda p: blosc2.empty((100,), urlpath=p, mode="w", chunks=(10,)), None),
    ],
)
def test_python_blosc2_special_chunks_still_read(tmp_path, make, expected):
    path = str(tmp_path / "s.b2nd")
    make(path)
    with b2store.open(path) as arr:
        got = arr[...]
        if expected is not None:
            np.testing.assert_array_equal(got, expected)
        for i in range(arr.schunk.nchunks):
            assert ChunkHeader.from_bytes(bytes(arr.schunk.get_chunk(i))).special


@pytest.mark.parametrize(
    "special,value",
    [
        ("ZERO", 0.0),
        ("NAN", np.nan),
        ("VALUE", 2.5),
        ("UNINIT", None),
    ],
)
def test_python_blosc2_schunk_special_chunks_still_read(tmp_path, special, value):
    path = str(tmp_path / "s.b2frame")
    sc = blosc2.SChunk(chunksize=800, cparams={"typesize": 8}, urlpath=path, mode="w")
    kind = getattr(blosc2.SpecialValue, special)
    if special == "VALUE":
        sc.fill_special(300, kind, value=np.float64(value))
    else:
        sc.fill_special(300, kind)
    for i in range(sc.nchunks):  # each chunk, as c-blosc2 hands it out, decodes here too
        got = decode_chunk(sc.get_chunk(i)).view("<f8")
        if value is not None:
            np.testing.assert_array_equal(got, np.full(got.size, value))
    del sc
    with b2store.open(path) as s:
        got = np.concatenate([s.decompress_chunk(i).view("<f8") for i in range(s.nchunks)])
    assert got.size == 300
    if value is not None:
        np.testing.assert_array_equal(got, np.full(300, value))


@pytest.mark.parametrize("layout", [{}, {"contiguous": False}], ids=["contiguous", "sparse"])
@pytest.mark.parametrize("key", [slice(None), slice(9, 11), 9], ids=["whole", "part", "item"])
def test_a_repeated_value_of_another_size_than_the_items_is_refused(tmp_path, layout, key):
    # A 3-byte value in a frame of float32: repeated, it would cut across the items.
    from b2store.chunk.encoder import special_chunk

    path = tmp_path / "a.b2nd"
    with b2store.asarray(
        np.arange(48, dtype="<f4"), path, chunks=(24,), blocks=(8,), **layout
    ) as a:
        a.schunk.update_chunk(0, special_chunk(SpecialValue.VALUE, 96, 3, b"abc", blocksize=32))
    with b2store.open(path) as b:
        with pytest.raises(FormatError, match=r"chunk 0 cbytes.*typesize 4.*found 35"):
            b[key]
        np.testing.assert_array_equal(b[30:32], [30, 31])  # the other chunk still reads
    # One item of the frame's size is a repeated value as python-blosc2 writes it.
    with b2store.open(path, mode="a") as a:
        a.schunk.update_chunk(
            0, special_chunk(SpecialValue.VALUE, 96, 4, b"\0\0\x80?", blocksize=32)
        )
    with b2store.open(path) as b:
        want = np.concatenate([np.ones(24, "<f4"), np.arange(24, 48, dtype="<f4")])
        np.testing.assert_array_equal(b[key], want[key])
