"""Limits: each one accepts a file at the limit, refuses one past it, and refuses before
allocating what the file asks for (msgpack's test_limits.py, for Blosc2 files)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import b2store
from b2store import LimitError, Limits, SChunk, SpecialValue
from b2store.chunk.encoder import special_chunk
from b2store.frame.header import FrameHeader
from b2store.limits import DEFAULT_LIMITS

# What opening or decoding a refused file may allocate: parsing, never the payload.
SMALL = 1 << 20


def peak_of(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    except LimitError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def frame_bytes(nchunks=3, chunk_items=1000, vlmeta=None) -> bytes:
    s = SChunk.create(None, typesize=4, chunksize=4 * chunk_items)
    for k in range(nchunks):
        s.append_data(np.full(chunk_items, k, "<i4"))
    if vlmeta:
        s.vlmeta.update(vlmeta)
    return s.to_cframe()


def with_header(data: bytes, **fields) -> bytes:
    header_len, _ = FrameHeader.peek_len(data[:24])
    new = FrameHeader.from_bytes(data[:header_len]).with_fields(**fields).to_bytes()
    assert len(new) == header_len
    return new + data[header_len:]


def test_defaults_are_one_place_and_validated():
    assert b2store.open.__kwdefaults__["limits"] is None  # None means DEFAULT_LIMITS
    assert DEFAULT_LIMITS == Limits()
    assert DEFAULT_LIMITS.max_chunk_nbytes == 1 << 30 and DEFAULT_LIMITS.max_ndim == 16
    with pytest.raises(ValueError, match="max_nchunks"):
        Limits(max_nchunks=-1)
    with pytest.raises(TypeError):
        b2store.open(frame_bytes(), limits={"max_nchunks": 1})


def test_limit_errors_are_format_errors_naming_the_limit():
    with pytest.raises(b2store.FormatError, match="Limits.max_nchunks") as info:
        b2store.open(frame_bytes(3), limits=Limits(max_nchunks=2))
    assert isinstance(info.value, LimitError) and info.value.limit == 2
    assert info.value.found == 3 and info.value.limit_name == "max_nchunks"


# --- one chunk ------------------------------------------------------------------------------


def test_decode_chunk_at_and_past_max_nbytes():
    chunk = b2store.encode_chunk(np.arange(1000, dtype="<i4"))
    assert len(b2store.decode_chunk(chunk, max_nbytes=4000)) == 4000
    with pytest.raises(LimitError, match="nbytes"):
        b2store.decode_chunk(chunk, max_nbytes=3999)


def test_a_special_chunk_asking_for_2_gib_is_refused_before_allocating():
    # 32 bytes that say "2 GiB of zeros": within c-blosc2's own ceiling, past the default.
    chunk = special_chunk(SpecialValue.NAN, (1 << 31) - 64, 8, blocksize=1 << 20)
    assert len(chunk) == 32
    with pytest.raises(LimitError):
        b2store.decode_chunk(chunk)
    assert peak_of(lambda: b2store.decode_chunk(chunk)) < SMALL
    # At a limit the caller raised, the same chunk decodes (checked on a smaller one).
    small = special_chunk(SpecialValue.NAN, 1 << 20, 8)
    assert np.isnan(b2store.decode_chunk(small, max_nbytes=1 << 20).view("<f8")).all()
    with pytest.raises(LimitError):
        b2store.decode_chunk(small, max_nbytes=(1 << 20) - 1)


def test_frame_chunks_at_and_past_max_chunk_nbytes():
    data = frame_bytes(2, 1000)
    with b2store.open(data, limits=Limits(max_chunk_nbytes=4000)) as s:
        assert (s.decompress_chunk(1).view("<i4") == 1).all()
    with b2store.open(data, limits=Limits(max_chunk_nbytes=3999)) as s:
        with pytest.raises(LimitError):
            s.decompress_chunk(1)


# --- the frame --------------------------------------------------------------------------------


def test_nchunks_at_and_past_the_limit():
    data = frame_bytes(5)
    with b2store.open(data, limits=Limits(max_nchunks=5)) as s:
        assert s.nchunks == 5
    with pytest.raises(LimitError, match="nchunks"):
        b2store.open(data, limits=Limits(max_nchunks=4))


def test_a_header_claiming_2_40_chunks_is_refused_before_its_index_is_decoded():
    data = with_header(frame_bytes(3, 1000), nbytes=1 << 40, chunksize=1)
    with pytest.raises(LimitError, match="nchunks"):
        b2store.open(data)
    assert peak_of(lambda: b2store.open(data)) < SMALL


def test_frame_nbytes_at_and_past_the_limit():
    data = frame_bytes(3, 1000)
    with b2store.open(data, limits=Limits(max_frame_nbytes=12000)) as s:
        assert s.nbytes == 12000
    with pytest.raises(LimitError, match="nbytes"):
        b2store.open(data, limits=Limits(max_frame_nbytes=11999))


def test_header_and_metalayers_at_and_past_the_limit():
    s = SChunk.create(None, typesize=1, meta={"big": bytes(5000)})
    s.append_data(b"x" * 100)
    data = s.to_cframe()
    header_len, _ = FrameHeader.peek_len(data[:24])
    with b2store.open(data, limits=Limits(max_metalayer_nbytes=header_len)) as ok:
        assert ok.meta["big"] == bytes(5000)
    with pytest.raises(LimitError, match="header_len"):
        b2store.open(data, limits=Limits(max_metalayer_nbytes=header_len - 1))


def test_vlmeta_entry_at_and_past_the_limit():
    value = "v" * 10_000
    data = frame_bytes(1, vlmeta={"note": value})
    with b2store.open(data) as s:
        stored = len(s._raw_vlmeta["note"])
        decoded = len(b2store.decode_chunk(s._raw_vlmeta["note"]))
    size = max(stored, decoded)
    with b2store.open(data, limits=Limits(max_vlmeta_nbytes=size)) as s:
        assert s.vlmeta["note"] == value
    with b2store.open(data, limits=Limits(max_vlmeta_nbytes=size - 1)) as s:
        with pytest.raises(LimitError, match="vlmeta|nbytes"):
            s.vlmeta["note"]


# --- arrays -----------------------------------------------------------------------------------


def test_ndim_at_and_past_the_limit():
    data = b2store.asarray(np.zeros((2, 3, 4), "i2")).schunk.to_cframe()
    with b2store.open(data, limits=Limits(max_ndim=3)) as a:
        assert a.ndim == 3
    with pytest.raises(LimitError, match="ndim"):
        b2store.open(data, limits=Limits(max_ndim=2))


def test_b2nd_chunk_size_at_and_past_the_limit():
    arr = b2store.asarray(np.arange(400, dtype="<f8").reshape(20, 20), chunks=(10, 10))
    data = arr.schunk.to_cframe()
    per_chunk = 10 * 10 * 8
    with b2store.open(data, limits=Limits(max_chunk_nbytes=per_chunk)) as a:
        np.testing.assert_array_equal(a[...], np.arange(400.0).reshape(20, 20))
    with pytest.raises(LimitError, match="chunk nbytes"):
        b2store.open(data, limits=Limits(max_chunk_nbytes=per_chunk - 1))


def test_limits_survive_pickling():
    import pickle

    limits = Limits(max_nchunks=7)
    with b2store.open(frame_bytes(3), limits=limits) as s:
        assert pickle.loads(pickle.dumps(s)).limits == limits
