"""What python-blosc2 (Blosc2) and numcodecs (Blosc1) compress, b2store decodes bit-exact.

The oracle is the original data for lossless pipelines: python-blosc2 is also compared, but
for pipelines with a filter before DELTA its threaded decoder returns something else than
what went in, and b2store is right where it is not.
"""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import b2store
from b2store import Codec, Filter

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")

CODECS = [Codec.BLOSCLZ, Codec.LZ4, Codec.LZ4HC, Codec.ZLIB, Codec.ZSTD]
TYPESIZES = [1, 2, 3, 4, 8, 12, 16, 300]
PIPELINES = [
    (),
    (Filter.SHUFFLE,),
    (Filter.BITSHUFFLE,),
    (Filter.DELTA,),
    (Filter.DELTA, Filter.SHUFFLE),
    (Filter.DELTA, Filter.BITSHUFFLE),
    (Filter.SHUFFLE, Filter.BYTEDELTA),
    (Filter.TRUNC_PREC, Filter.SHUFFLE),
    (Filter.TRUNC_PREC, Filter.DELTA, Filter.BITSHUFFLE),
    (Filter.SHUFFLE, Filter.DELTA),
    (Filter.BITSHUFFLE, Filter.DELTA),
    (Filter.SHUFFLE, Filter.SHUFFLE),
    (Filter.INT_TRUNC, Filter.SHUFFLE),
    (Filter.SHUFFLE, Filter.BYTEDELTA_BUGGY),
]
LOSSY = {Filter.TRUNC_PREC, Filter.INT_TRUNC}
SPLITS = list(blosc2.SplitMode)


def sample(nbytes: int, seed: int, kind: str = "walk") -> np.ndarray:
    """Data that compresses somewhat: a random walk, noise, constant runs, or text-like."""
    rng = np.random.default_rng(seed)
    if kind == "noise":
        return rng.integers(0, 256, nbytes, dtype=np.uint8)
    if kind == "runs":
        return np.repeat(rng.integers(0, 4, nbytes // 500 + 1, dtype=np.uint8), 500)[:nbytes]
    if kind == "float":
        return np.sin(np.arange(nbytes // 8 + 1) / 50.0).view(np.uint8)[:nbytes].copy()
    return (np.cumsum(rng.integers(-3, 4, nbytes)) % 251).astype(np.uint8)


def compress(data, typesize, codec, clevel, pipeline, splitmode, use_dict=False, blocksize=0):
    filters = [int(f) for f in pipeline]
    meta = [0] * len(filters)
    if Filter.TRUNC_PREC in pipeline:
        if typesize not in (4, 8):
            return None
        meta[filters.index(Filter.TRUNC_PREC)] = 13
    if Filter.INT_TRUNC in pipeline:
        if typesize not in (1, 2, 4, 8):
            return None
        meta[filters.index(Filter.INT_TRUNC)] = 3
    for bytedelta in (Filter.BYTEDELTA, Filter.BYTEDELTA_BUGGY):
        if bytedelta in pipeline:
            meta[filters.index(bytedelta)] = typesize if typesize < 256 else 0
    try:
        return blosc2.compress2(
            data,
            typesize=typesize,
            clevel=clevel,
            codec=blosc2.Codec(int(codec)),
            filters=filters,
            filters_meta=meta,
            splitmode=splitmode,
            use_dict=use_dict,
            blocksize=blocksize,
        )
    except (RuntimeError, ValueError, OverflowError):
        return None  # a combination python-blosc2 itself refuses


def check(chunk: bytes, data: np.ndarray, pipeline, typesize: int) -> None:
    try:
        got = b2store.decode_chunk(chunk)
    except b2store.FormatError:
        # Acceptable only for a chunk python-blosc2 cannot decode to what it was given either:
        # asked for a blocksize that is not a multiple of the typesize, c-blosc2 writes
        # blocks of another size than its header says, or leaves bytes unstored.
        assert b2store.chunk_info(chunk).blocksize % typesize
        try:
            back = np.frombuffer(blosc2.decompress2(chunk), np.uint8)
        except ValueError:
            return
        assert not np.array_equal(back, data)
        return
    if LOSSY.intersection(pipeline):
        np.testing.assert_array_equal(got, np.frombuffer(blosc2.decompress2(chunk), np.uint8))
    else:
        np.testing.assert_array_equal(got, data)
        delta_after_other = Filter.DELTA in pipeline and pipeline[0] != Filter.DELTA
        if not delta_after_other:
            np.testing.assert_array_equal(got, np.frombuffer(blosc2.decompress2(chunk), np.uint8))


@pytest.mark.slow
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: "-".join(f.name for f in p) or "none")
def test_matrix_of_codecs_filters_splits_and_clevels(codec, pipeline):
    checked = 0
    for typesize, clevel, split in itertools.product(TYPESIZES, range(10), SPLITS):
        nbytes = (70_000 + 333 * typesize) // typesize * typesize
        data = sample(nbytes, typesize * 10 + clevel)
        chunk = compress(data, typesize, codec, clevel, pipeline, split)
        if chunk is not None:
            check(chunk, data, pipeline, typesize)
            checked += 1
    assert checked > 0


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    typesize=st.sampled_from(TYPESIZES),
    nitems=st.integers(0, 40_000),
    kind=st.sampled_from(["walk", "noise", "runs", "float"]),
    codec=st.sampled_from(CODECS),
    clevel=st.integers(0, 9),
    pipeline=st.sampled_from(PIPELINES),
    split=st.sampled_from(SPLITS),
    blocksize=st.sampled_from([0, 0, 256, 4096, 40_000]),
    seed=st.integers(0, 2**16),
)
def test_property_random_chunks(
    typesize, nitems, kind, codec, clevel, pipeline, split, blocksize, seed
):
    data = sample(nitems * typesize, seed, kind)
    chunk = compress(data, typesize, codec, clevel, pipeline, split, blocksize=blocksize)
    if chunk is not None:
        check(chunk, data, pipeline, typesize)


@pytest.mark.parametrize("codec", [Codec.ZSTD, Codec.LZ4, Codec.LZ4HC], ids=lambda c: c.name)
@pytest.mark.parametrize("clevel", [1, 5, 9])
@pytest.mark.parametrize("typesize", [1, 4, 8])
def test_dictionaries(codec, clevel, typesize):
    data = (np.arange(400_000 // typesize, dtype=np.uint64) % 977).astype(f"<u{typesize}")
    data = data.view(np.uint8)
    chunk = compress(
        data, typesize, codec, clevel, (Filter.SHUFFLE,), blosc2.SplitMode.AUTO_SPLIT, use_dict=True
    )
    assert b2store.chunk_info(chunk).use_dict
    check(chunk, data, (Filter.SHUFFLE,), typesize)


def special_chunk(nitems: int, typesize: int, special, value: bytes | None = None) -> bytes:
    schunk = blosc2.SChunk(chunksize=nitems * typesize, cparams={"typesize": typesize})
    schunk.fill_special(nitems, special, value)
    return schunk.get_chunk(0)


@pytest.mark.parametrize(
    "value",
    [
        np.float64(2.5),
        np.int32(-7),
        np.int16(-300),
        np.uint8(9),
        np.complex128(1j),
        np.void(b"abc"),  # 3 bytes: filled by doubling copies, not as one integer
    ],
    ids=repr,
)
def test_special_value_chunks(value):
    chunk = special_chunk(1000, value.itemsize, blosc2.SpecialValue.VALUE, value.tobytes())
    info = b2store.chunk_info(chunk)
    assert info.special == b2store.SpecialValue.VALUE and info.cbytes == 32 + value.itemsize
    np.testing.assert_array_equal(
        b2store.decode_chunk(chunk).view(value.dtype), np.full(1000, value)
    )


@pytest.mark.parametrize("typesize", [1, 4, 8, 12])
def test_zero_chunks(typesize):
    chunk = special_chunk(999, typesize, blosc2.SpecialValue.ZERO)
    assert len(chunk) == 32 and b2store.chunk_info(chunk).special == b2store.SpecialValue.ZERO
    out = np.full(999 * typesize, 3, np.uint8)
    b2store.decode_chunk(chunk, out=out)
    assert not out.any()


def test_nan_and_uninit_chunks():
    nan = b2store.decode_chunk(special_chunk(1000, 8, blosc2.SpecialValue.NAN)).view(np.float64)
    assert len(nan) == 1000 and np.isnan(nan).all()
    nan32 = b2store.decode_chunk(special_chunk(10, 4, blosc2.SpecialValue.NAN)).view(np.float32)
    assert len(nan32) == 10 and np.isnan(nan32).all()
    uninit = special_chunk(1000, 4, blosc2.SpecialValue.UNINIT)
    assert b2store.chunk_info(uninit).special == b2store.SpecialValue.UNINIT
    assert len(b2store.decode_chunk(uninit)) == 4000


def test_all_zero_input_becomes_a_zero_special_chunk_that_decodes():
    chunk = blosc2.compress2(np.zeros(100_000, np.uint8), typesize=4)
    assert b2store.chunk_info(chunk).special == b2store.SpecialValue.ZERO
    assert not b2store.decode_chunk(chunk).any()


def test_runs_of_one_byte_value():
    # Streams that hold one repeated non-zero byte are stored as a negative csize.
    data = np.repeat(np.arange(1, 9, dtype=np.uint8), 40_000)
    chunk = blosc2.compress2(data, typesize=1, clevel=5, codec=blosc2.Codec.LZ4, blocksize=40_000)
    np.testing.assert_array_equal(b2store.decode_chunk(chunk), data)
    assert len(chunk) < 200


def test_multithreaded_chunks_with_unordered_block_starts():
    data = sample(4_000_000, 3)
    old = blosc2.set_nthreads(4)
    try:
        chunk = blosc2.compress2(
            data, typesize=4, clevel=5, codec=blosc2.Codec.ZSTD, blocksize=65536
        )
    finally:
        blosc2.set_nthreads(old)
    nblocks = b2store.chunk_info(chunk).nblocks
    starts = np.frombuffer(chunk, "<i4", nblocks, 32)
    np.testing.assert_array_equal(b2store.decode_chunk(chunk), data)
    assert nblocks == 62 and len(starts) == nblocks


@pytest.mark.slow
@pytest.mark.parametrize("cname", ["blosclz", "lz4", "lz4hc", "zlib", "zstd"])
@pytest.mark.parametrize("shuffle", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["u1", "<i2", "<f4", "<f8", "S12", "V20"])
@pytest.mark.parametrize("blocksize", [0, 256, 100_000])
def test_numcodecs_blosc1_chunks(cname, shuffle, dtype, blocksize):
    from numcodecs import Blosc

    rng = np.random.default_rng(7)
    raw = (np.cumsum(rng.integers(-2, 3, 300_007)) % 200).astype(np.uint8)
    itemsize = np.dtype(dtype).itemsize
    raw = raw[: len(raw) // itemsize * itemsize]
    for clevel in (0, 1, 5, 9):
        codec = Blosc(cname=cname, clevel=clevel, shuffle=shuffle, blocksize=blocksize)
        chunk = codec.encode(raw.view(dtype))
        assert b2store.chunk_info(chunk).version == 2
        np.testing.assert_array_equal(b2store.decode_chunk(chunk), raw)
