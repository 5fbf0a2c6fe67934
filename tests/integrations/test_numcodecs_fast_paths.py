"""The numcodecs ``blosc2`` codec's short ways through a call: ``bytes`` and contiguous arrays
taken as they are, the caller's ``out`` of any dtype decoded into in one C pass, the item
size's parameters kept between encodes. Each gives what the general path gives, the same
result or the same error, on the fuzz seeds and their mutants too."""

from __future__ import annotations

import random

import numcodecs
import numpy as np
import pytest
from hardening.fuzz_targets import seeds
from hardening.test_fuzz_quick import mutate
from helpers import corpus_dir

import b2store
from b2store.chunk import decoder, native
from b2store.chunk.params import ChunkParams
from b2store.integrations.numcodecs.codec import Blosc2


def _data() -> np.ndarray:
    rng = np.random.default_rng(37)
    return np.cumsum(rng.normal(size=(64, 512)), axis=1).astype(np.float32)


@pytest.mark.parametrize("cname", ["lz4", "blosclz", "zstd", "zlib"])
def test_out_of_the_callers_dtype_is_decoded_in_one_pass(cname, monkeypatch):
    data = _data()
    chunks = [
        numcodecs.Blosc(cname=cname, clevel=5, shuffle=numcodecs.Blosc.SHUFFLE).encode(data),
        Blosc2(cname=cname, clevel=5).encode(data),
    ]

    def general(*args, **kwargs):
        raise AssertionError("the general decoder was asked")

    monkeypatch.setattr(decoder, "ChunkDecoder", general)
    codec = Blosc2()
    for chunk in chunks:
        out = np.zeros_like(data)
        assert codec.decode(chunk, out=out) is out
        assert np.array_equal(out, data)
        assert np.array_equal(codec.decode(chunk).view(np.float32), data.reshape(-1))
        assert np.array_equal(codec.decode(np.frombuffer(chunk, np.uint8)).view("f4"), data.ravel())


def _outcome(decode, buf, out=None):
    try:
        return "ok", bytes(np.asarray(decode(buf, out=out)).view(np.uint8).reshape(-1))
    except b2store.B2StoreError as exc:
        return type(exc), str(exc)


def test_fast_paths_and_the_general_path_agree_on_hostile_chunks(monkeypatch):
    inputs = [s for s in seeds("codec", corpus_dir("generated").parent) if len(s) < (1 << 20)]
    assert len(inputs) > 10
    rng = random.Random(37)
    inputs += [mutate(rng, rng.choice(inputs)) for _ in range(100)]
    codec = Blosc2()
    codec.max_buffer_size = 1 << 24
    quick = native.quick_decode
    checked = 0
    for data in inputs:
        # The size the header gives, where it gives one: an ``out`` of float32 items of it.
        try:
            nbytes = b2store.chunk_info(data).nbytes
        except b2store.B2StoreError:
            nbytes = 0
        out_a = np.zeros(max(nbytes // 4, 1), np.float32) if nbytes % 4 == 0 else None
        out_b = None if out_a is None else out_a.copy()
        monkeypatch.setattr(native, "quick_decode", quick)
        fast = [_outcome(codec.decode, data), _outcome(codec.decode, np.frombuffer(data, "u1"))]
        if out_a is not None:
            fast.append(_outcome(codec.decode, data, out_a))
        monkeypatch.setattr(native, "quick_decode", lambda *a: None)
        general = [_outcome(codec.decode, memoryview(data))] * 2
        if out_b is not None:
            general.append(_outcome(codec.decode, memoryview(data), out_b))
        assert fast == general, data[:32]
        checked += fast[0][0] == "ok"
    assert checked > 10  # the seeds' chunks decode, not only their errors agree


def test_encode_keeps_the_item_sizes_parameters(monkeypatch):
    calls = []
    replace = ChunkParams.replace

    def counted(self, **fields):
        calls.append(fields)
        return replace(self, **fields)

    monkeypatch.setattr(ChunkParams, "replace", counted)
    codec = Blosc2(cname="lz4")
    data = _data()
    first = codec.encode(data)
    assert codec.encode(data) == first and codec.encode(data) == first
    assert calls == [{"typesize": 4}]
    codec.encode(data.view(np.int16))
    assert calls[1:] == [{"typesize": 2}]
    # New parameters are used at once, not the kept ones.
    codec.params = Blosc2(cname="zstd").params
    again = codec.encode(data)
    assert b2store.chunk_info(again).codec.name == "ZSTD"
    assert b2store.chunk_info(again).typesize == 4
    assert np.array_equal(codec.decode(again).view(np.float32), data.reshape(-1))


def test_bytes_and_arrays_past_the_buffer_size_are_refused():
    codec = Blosc2()
    codec.max_buffer_size = 100
    for buf in (b"x" * 101, np.zeros(26, np.float32), np.zeros((2, 51), np.int8)):
        with pytest.raises(ValueError, match="buffers of > 100 bytes"):
            codec.decode(buf)
        with pytest.raises(ValueError, match="buffers of > 100 bytes"):
            codec.encode(buf)
    with pytest.raises(ValueError, match="buffers of > 100 bytes"):
        codec.decode(Blosc2().encode(np.zeros(8, np.int8)), out=np.zeros(101, np.int8))


_ENCODE_DATA = {
    "walk": lambda n: np.cumsum(np.random.default_rng(5).normal(size=n)).astype(np.float32),
    "zeros": lambda n: np.zeros(n, np.float32),
    "noise": lambda n: np.random.default_rng(6).integers(0, 2**32, n, dtype=np.uint32),
    "tiny": lambda n: np.arange(7, dtype=np.float32),  # under the smallest compressed chunk
}


@pytest.mark.parametrize("kind", sorted(_ENCODE_DATA))
@pytest.mark.parametrize("n", [1000, 32768, 300_000])
@pytest.mark.parametrize(
    "settings",
    [dict(cname=c, filters=f) for c in ("lz4", "blosclz", "zstd", "lz4hc", "zlib")
     for f in (["shuffle"], ["bitshuffle"], [], ["delta", "shuffle"], ["trunc_prec", "shuffle"])]
    + [dict(cname="zstd", use_dict=True), dict(cname="lz4", clevel=0),
       dict(cname="lz4", splitmode="never"), dict(cname="zstd", clevel=9)],
    ids=str,
)  # fmt: skip
def test_one_call_encode_writes_what_the_general_path_writes(monkeypatch, kind, n, settings):
    # The codec's encode of an array is one call of the C loop, its layout decided once per
    # chunk size: the same bytes as encode_chunk (and so python-blosc2) on every codec, filter,
    # raw, all-zero and tiny chunk; the cases it leaves (a dictionary, clevel 0) still encode.
    if "trunc_prec" in settings.get("filters", []):
        settings = {**settings, "filters_meta": [20, 0]}
    data = _ENCODE_DATA[kind](n)
    codec = Blosc2(**settings)
    fast = [codec.encode(data) for _ in range(2)]
    monkeypatch.setattr("b2store.integrations.numcodecs.codec.quick_encode", lambda *a: None)
    general = Blosc2(**settings).encode(data)
    assert fast[0] == fast[1] == general
    back = np.frombuffer(codec.decode(fast[0]), data.dtype)
    if "trunc_prec" not in settings.get("filters", []):
        assert np.array_equal(back, data)


def test_one_call_encode_takes_the_chunks_it_should(monkeypatch):
    # It is the path taken (not the general one) for a plain compressed chunk.
    from b2store.chunk import encoder

    def refuse(*args, **kwargs):
        raise AssertionError("encode_chunk called")

    monkeypatch.setattr("b2store.integrations.numcodecs.codec.encode_chunk", refuse)
    assert Blosc2(cname="lz4").encode(_data())  # no AssertionError: one call of the C loop
    with pytest.raises(AssertionError, match="encode_chunk called"):
        Blosc2(cname="lz4", clevel=0).encode(_data())  # raw: encode_chunk's
    assert encoder.quick_encode(_data().view(np.uint8).reshape(-1), ChunkParams(), 4)
