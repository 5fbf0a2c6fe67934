"""Checks every numcodecs codec of b2store must pass, in the manner of numcodecs' own codec
suite (which numcodecs 0.17 no longer ships): round trips through every kind of buffer and
``out=``, configurations through JSON, ``repr`` that rebuilds the codec, object buffers
refused, ``max_buffer_size`` enforced, and committed fixtures that must always decode.
"""

from __future__ import annotations

import array
import json
from pathlib import Path

import numpy as np
import pytest
from numcodecs import get_codec


def as_array_like(result, like: np.ndarray) -> np.ndarray:
    """``result`` (any buffer) viewed with ``like``'s dtype, shape and memory order."""
    if isinstance(result, np.ndarray):
        flat = result.reshape(-1).view(np.uint8)
    else:
        flat = np.frombuffer(result, np.uint8)
    order = "F" if like.flags.f_contiguous and not like.flags.c_contiguous else "C"
    return flat.view(like.dtype).reshape(like.shape, order=order)


def check_encode_decode(arr: np.ndarray, codec) -> None:
    """Encode from, and decode from and into, every buffer kind numcodecs promises."""
    raw = arr.tobytes(order="A")
    for source in (arr, raw, bytearray(raw), array.array("b", raw)):
        np.testing.assert_array_equal(as_array_like(codec.decode(codec.encode(source)), arr), arr)
    enc = bytes(codec.encode(arr))
    for source in (enc, bytearray(enc), array.array("b", enc), np.frombuffer(enc, np.uint8)):
        np.testing.assert_array_equal(as_array_like(codec.decode(source), arr), arr)
    out = np.empty_like(arr)
    codec.decode(enc, out=out)
    np.testing.assert_array_equal(out, arr)
    out = bytearray(arr.nbytes)
    codec.decode(enc, out=out)
    np.testing.assert_array_equal(as_array_like(out, arr), arr)


def check_config(codec) -> None:
    """The configuration survives JSON and rebuilds an equal codec through the registry."""
    config = json.loads(json.dumps(codec.get_config()))
    assert get_codec(config) == codec


def check_repr(statement: str, namespace: dict) -> None:
    """``repr`` is the statement that builds the codec."""
    assert repr(eval(statement, namespace)) == statement


def check_object_buffers_refused(codec) -> None:
    """Object arrays hold pointers, not data: neither encoded nor decoded into."""
    with pytest.raises(TypeError, match="fixed-size items, not object"):
        codec.encode(np.array(["foo", "bar", "baz"], dtype=object))
    with pytest.raises(TypeError, match="object arrays are not supported"):
        codec.decode(codec.encode(np.arange(10)), out=np.empty(10, dtype=object))


def check_max_buffer_size(codec) -> None:
    """At ``max_buffer_size`` a buffer encodes; one byte more is a ValueError both ways."""
    saved = codec.max_buffer_size
    try:
        for limit in (4, 64, 1024):
            codec.max_buffer_size = limit
            codec.encode(np.zeros(limit - 1, np.int8))
            codec.encode(np.zeros(limit, np.int8))
            for buf in (
                b"x" * (limit + 1),
                np.zeros(limit + 1, np.int8),
                np.zeros(limit, np.int16),
            ):
                with pytest.raises(ValueError, match=f"buffers of > {limit} bytes"):
                    codec.encode(buf)
                with pytest.raises(ValueError, match=f"buffers of > {limit} bytes"):
                    codec.decode(buf)
    finally:
        codec.max_buffer_size = saved


def check_fixtures(fixture_dir: Path, arrays: list[np.ndarray], codecs: list, oracle=None) -> int:
    """Every committed ``codec.NN/encoded.MM.dat`` decodes to ``array.MM.npy`` with the codec
    its ``config.json`` names; ``oracle(bytes)`` (another library's decoder), where given,
    decodes each to the same bytes. Nothing is written: a missing fixture fails. Returns the
    number of encoded files checked."""
    checked = 0
    for i, expected in enumerate(arrays):
        stored = np.load(fixture_dir / f"array.{i:02d}.npy", allow_pickle=False)
        np.testing.assert_array_equal(stored, expected)
        for j, codec in enumerate(codecs):
            codec_dir = fixture_dir / f"codec.{j:02d}"
            config = json.loads((codec_dir / "config.json").read_text())
            assert get_codec(config) == codec, f"{codec_dir}/config.json"
            enc = (codec_dir / f"encoded.{i:02d}.dat").read_bytes()
            got = as_array_like(codec.decode(enc), stored)
            np.testing.assert_array_equal(got, stored, err_msg=f"{codec_dir} array {i}")
            if oracle is not None:
                theirs = bytes(oracle(enc))
                assert theirs == stored.tobytes(order="A"), f"oracle: {codec_dir} array {i}"
            checked += 1
    return checked
