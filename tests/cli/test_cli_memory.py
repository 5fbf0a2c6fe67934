"""The command line checks the sizes it will allocate before allocating them: small hostile
files (special-value chunks that say gigabytes, huge shapes of zeros) are refused, or read
in the part asked for, without holding what they claim (issue 19, item 12).

Generated: a bare chunk, a super-chunk of many chunks, a b2nd array of a huge shape, and the
same array as a tree member; each through ``dump`` (whole, ``--full``, ``--slice``),
``verify`` and ``info``. Memory is measured with tracemalloc (numpy's buffers are traced).
"""

from __future__ import annotations

import tracemalloc
import zipfile

import numpy as np
import pytest

import b2store
from b2store import SChunk, SpecialValue
from b2store.chunk.encoder import special_chunk
from b2store.nd.create import zeros

# What a refusal, a verify of special chunks or a slice of a few items may allocate.
SMALL = 8 << 20
MIB = 1 << 20


def _chunk(tmp_path):
    path = tmp_path / "c.chunk"
    path.write_bytes(special_chunk(SpecialValue.ZERO, 512 * MIB, 8, blocksize=MIB))
    return path


def _superchunk(tmp_path):
    path = tmp_path / "s.b2frame"
    s = SChunk.create(str(path), typesize=8, chunksize=8 * MIB)
    s.extend_chunks([special_chunk(SpecialValue.NAN, 8 * MIB, 8, blocksize=MIB)] * 200)
    s.close()
    return path


def _huge_array(tmp_path):
    path = tmp_path / "a.b2nd"
    zeros((1 << 32,), "f8", str(path), chunks=(MIB,), blocks=(1 << 14,))
    return path


def _tree(tmp_path):
    frame = zeros((1 << 32,), "f8", chunks=(MIB,), blocks=(1 << 14,)).schunk.to_cframe()
    path = tmp_path / "t.b2z"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("big.b2nd", frame)
    return path


INPUTS = {"chunk": _chunk, "super-chunk": _superchunk, "array": _huge_array, "tree": _tree}


def run_traced(cli, *args):
    tracemalloc.start()
    try:
        result = cli(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("kind", INPUTS)
def test_dump_of_a_huge_input_is_refused_before_reading_it(tmp_path, cli, kind):
    path = INPUTS[kind](tmp_path)
    assert path.stat().st_size < 4000
    result, peak = run_traced(cli, "dump", path)
    assert result.code == 2 and "narrow it with --slice" in result.err, result
    assert peak < SMALL, f"{kind}: {peak} bytes"


@pytest.mark.parametrize("kind", ["super-chunk", "array", "tree"])
def test_dump_full_refuses_what_it_cannot_hold(tmp_path, cli, kind):
    path = INPUTS[kind](tmp_path)
    result, peak = run_traced(cli, "dump", "--full", path)
    assert result.code == 2 and "even with --full" in result.err, result
    assert "Limits.max_chunk_nbytes" in result.err
    assert peak < SMALL, f"{kind}: {peak} bytes"


@pytest.mark.parametrize("kind", ["super-chunk", "array", "tree"])
def test_dump_of_a_slice_reads_only_the_chunks_it_needs(tmp_path, cli, kind):
    path = INPUTS[kind](tmp_path)
    args = ("--dtype", "f8") if kind == "super-chunk" else ()
    result, peak = run_traced(cli, "dump", *args, "--slice", "2:7", path)
    assert result.code == 0, result
    expected = "[nan nan nan nan nan]" if kind == "super-chunk" else "[0. 0. 0. 0. 0.]"
    assert expected in result.out
    # One chunk (8 MiB) at most, never the 1.6 GB the super-chunk holds.
    assert peak < 8 * MIB + SMALL, f"{kind}: {peak} bytes"


@pytest.mark.parametrize("kind", INPUTS)
def test_verify_checks_special_chunks_without_filling_them(tmp_path, cli, kind):
    path = INPUTS[kind](tmp_path)
    result, peak = run_traced(cli, "verify", path)
    assert result.code == 0 and "ok" in result.out, result
    assert peak < SMALL, f"{kind}: {peak} bytes"


@pytest.mark.parametrize("kind", INPUTS)
def test_info_reads_headers_only(tmp_path, cli, kind):
    path = INPUTS[kind](tmp_path)
    result, peak = run_traced(cli, "info", path)
    assert result.code == 0, result
    assert peak < SMALL, f"{kind}: {peak} bytes"


def test_verify_decodes_every_chunk_into_one_buffer(tmp_path, cli):
    # Forty 4 MiB chunks of data: verify holds one at a time.
    data = np.arange(20 * MIB, dtype="<i8")
    path = tmp_path / "d.b2nd"
    b2store.asarray(data, str(path), chunks=(MIB // 2,))
    result, peak = run_traced(cli, "verify", path)
    assert result.code == 0 and "40 chunks checked, ok" in result.out, result
    assert peak < 3 * 4 * MIB + SMALL


def test_verify_refuses_a_chunk_past_the_limit_without_decoding_it():
    from b2store.cli.chunks import checked_decoder

    with pytest.raises(b2store.LimitError, match="Limits.max_chunk_nbytes"):
        checked_decoder(special_chunk(SpecialValue.ZERO, 8 * MIB, 8), None, MIB, 0)


@pytest.mark.parametrize(
    "kind", [SpecialValue.ZERO, SpecialValue.NAN, SpecialValue.VALUE], ids=lambda k: k.name
)
def test_decode_writes_a_special_chunk_in_pieces(tmp_path, cli, kind):
    """``decode`` of a 32-byte chunk standing for 512 MiB held it twice (2.1 GB for 1 GiB):
    a special chunk is written a piece of its value at a time, equal to what it decodes to."""
    value = np.float64(2.5).tobytes() if kind == SpecialValue.VALUE else b""
    chunk = special_chunk(kind, 512 * MIB, 8, value=value, blocksize=MIB)
    src, out = tmp_path / "c.chunk", tmp_path / "c.out"
    src.write_bytes(chunk)
    result, peak = run_traced(cli, "decode", str(src), "-o", str(out))
    assert result.code == 0, result
    assert peak < SMALL, f"decode allocated {peak} bytes"
    assert out.stat().st_size == 512 * MIB
    with open(out, "rb") as f:
        head = f.read(MIB)
    assert head == bytes(b2store.decode_chunk(special_chunk(kind, MIB, 8, value=value)))


def test_decode_of_a_chunk_holds_it_once(tmp_path, cli):
    data = np.arange(4 * MIB // 8, dtype="f8")
    src, out = tmp_path / "c.chunk", tmp_path / "c.out"
    chunk = b2store.encode_chunk(data)  # a small file for 4 MiB
    src.write_bytes(chunk)
    result, peak = run_traced(cli, "decode", str(src), "-o", str(out))
    assert result.code == 0, result
    # The file read, and the chunk decoded once (it was copied once more to be written).
    held = len(chunk) + data.nbytes
    assert peak < held + MIB, f"decode held {peak} bytes for {held}"
    assert out.read_bytes() == data.tobytes()


# --- chunks that claim more than their frame says (issue 35, item 2) --------------------------
# A ~300-byte frame whose chunk says it decodes to 1 GiB: dump held it twice (2.1 GB) and
# printed it, exit 0, while verify called it bad. Now dump refuses it as verify and the
# readers do, with their message, never allocating the claim.

GIB = 1 << 30


def _claiming(path, i: int, nbytes: int = GIB):
    """Chunk ``i`` of the frame at ``path`` made to say it decodes to ``nbytes``."""
    with SChunk.open(path) as s:
        at = s.header.header_len + int(s.offsets[i]) + 4  # (nbytes: bytes 4-8 of a chunk)
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(nbytes.to_bytes(4, "little"))
    return path


def _value_chunk(nbytes: int) -> bytes:
    return special_chunk(SpecialValue.VALUE, nbytes, 8, value=np.float64(2.5).tobytes())


def _lying_superchunk(tmp_path):
    path = tmp_path / "s.b2frame"
    with SChunk.create(path, typesize=8, chunksize=1024) as s:
        s.extend_chunks([_value_chunk(1024), _value_chunk(1024)])
    return _claiming(path, 0)


def _lying_varying(tmp_path):
    # chunks of varying size (the frame's chunksize 0): the second one runs past nbytes
    path = tmp_path / "v.b2frame"
    with SChunk.create(path, typesize=8) as s:
        s.extend_chunks([_value_chunk(512), _value_chunk(1024)])
        assert s.header.chunksize == 0
    return _claiming(path, 1)


def _lying_array(tmp_path):
    path = tmp_path / "a.b2nd"
    b2store.full((1000,), 2.5, urlpath=path, chunks=(100,)).close()
    return _claiming(path, 0)


def _lying_member(tmp_path):
    tree = tmp_path / "t.b2d"
    tree.mkdir()
    _lying_array(tree)
    return tree


LYING = {
    "super-chunk": (_lying_superchunk, "chunk 0 nbytes: expected 1024, found 1073741824"),
    "varying": (
        _lying_varying,
        "chunk 1 nbytes: expected at most the 1024 bytes the frame has left of its "
        "nbytes=1536, found 1073741824",
    ),
    "array": (_lying_array, "chunk 0 nbytes: expected 800, found 1073741824"),
    "tree": (_lying_member, "chunk 0 nbytes: expected 800, found 1073741824"),
}


@pytest.mark.parametrize("args", [(), ("--full",), ("--slice=::7",)], ids=["", "full", "slice"])
@pytest.mark.parametrize("kind", LYING)
def test_dump_refuses_a_chunk_that_claims_more_than_its_frame(tmp_path, cli, kind, args):
    make, message = LYING[kind]
    path = make(tmp_path)
    result, peak = run_traced(cli, "dump", *args, path)
    assert result.code == 2 and result.out == "", result
    assert result.err.strip() == f"b2store: {message}", result
    assert peak < SMALL, f"{kind}: {peak} bytes"
    checked = cli("verify", path)  # the same chunk, the same words
    assert checked.code == 1 and f": {message}" in checked.out, checked


def test_dump_reads_the_good_chunks_of_a_frame_with_a_lying_one(tmp_path, cli):
    # As the readers do: what a selection reads is checked, the rest is not read.
    path = _lying_varying(tmp_path)
    result = cli("dump", "--dtype", "f8", "--slice", ":3", path)
    assert result.code == 0 and result.out.splitlines()[1] == "[2.5 2.5 2.5]", result


@pytest.mark.parametrize("kind", ["chunk", "super-chunk", "array", "tree"])
def test_dump_of_a_large_input_reads_only_what_numpy_shows(tmp_path, cli, kind):
    """Under the 256 MiB without --full, numpy shows the first and last three items: dump
    reads those (it read the whole selection, 200 MiB for this 300-byte file of zeros)."""
    n = 25 * MIB  # items of 8 bytes: 200 MiB
    if kind == "chunk":
        path = tmp_path / "c.chunk"
        path.write_bytes(special_chunk(SpecialValue.ZERO, 8 * n, 8, blocksize=MIB))
        args = ("--dtype", "f8")
    elif kind == "super-chunk":
        path = tmp_path / "s.b2frame"
        with SChunk.create(str(path), typesize=8, chunksize=8 * MIB) as s:
            s.extend_chunks([special_chunk(SpecialValue.NAN, 8 * MIB, 8, blocksize=MIB)] * 25)
        args = ("--dtype", "f8")
    else:
        path = tmp_path / ("t.b2d" if kind == "tree" else "a.b2nd")
        target = path / "a.b2nd" if kind == "tree" else path
        if kind == "tree":
            path.mkdir()
        zeros((n,), "f8", str(target), chunks=(MIB,), blocks=(1 << 14,)).close()
        args = ()
    result, peak = run_traced(cli, "dump", *args, path)
    assert result.code == 0, result
    shown = "[nan nan nan ... nan nan nan]" if kind == "super-chunk" else "[0. 0. 0. ... 0. 0. 0.]"
    assert result.out.splitlines()[-1] == shown
    assert peak < 8 * MIB + SMALL, f"{kind}: {peak} bytes"
