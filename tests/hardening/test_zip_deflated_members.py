"""Deflated ``.b2z`` members (xarray-blosc2 deflates its ``dataset.json``): listed, inflated
only when read, in memory and never past ``Limits.max_member_nbytes`` or the size the central
directory states, whatever the header says; a lying size, a bomb, a truncated or corrupt
stream and a deflated frame are refused, each naming the member."""

import struct
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest

import b2store
from b2store import FormatError, LimitError, Limits, open_tree

MANIFEST = b'{"attrs": {"title": "x"}}' * 40


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, kind in members:
            zf.writestr(name, data, compress_type=kind)
    return path


def _frame() -> bytes:
    return b2store.asarray(np.arange(10)).schunk.to_cframe()


def _with_manifest(tmp_path, data=MANIFEST, name="m.b2z"):
    return _zip(
        tmp_path / name,
        [("x.b2nd", _frame(), zipfile.ZIP_STORED), ("dataset.json", data, zipfile.ZIP_DEFLATED)],
    )


def _patch_sizes(path, usize=None, csize=None, crc=None, member=b"dataset.json"):
    """Rewrite a member's sizes (and CRC) in the central directory and its local header."""
    raw = bytearray(path.read_bytes())
    pos = 0
    while True:
        pos = raw.find(b"PK\x01\x02", pos)
        name_len = struct.unpack_from("<H", raw, pos + 28)[0]
        if raw[pos + 46 : pos + 46 + name_len] == member:
            break
        pos += 4
    central = pos
    local = struct.unpack_from("<I", raw, central + 42)[0]
    for at, off in ((central, 16), (local, 14)):
        if crc is not None:
            struct.pack_into("<I", raw, at + off, crc)
        if csize is not None:
            struct.pack_into("<I", raw, at + off + 4, csize)
        if usize is not None:
            struct.pack_into("<I", raw, at + off + 8, usize)
    path.write_bytes(bytes(raw))


def test_a_deflated_member_is_listed_and_read_whole(tmp_path):
    tree = open_tree(_with_manifest(tmp_path))
    assert list(tree.arrays()) == ["/x"] and tree.files() == ["dataset.json"]
    assert tree.read_file("dataset.json") == MANIFEST
    np.testing.assert_array_equal(tree.arrays()["/x"].open()[...], np.arange(10))
    with pytest.raises(KeyError, match="no file 'x.b2nd'"):
        tree.read_file("x.b2nd")


def test_a_stored_member_and_a_directory_file_are_read_too(tmp_path):
    path = _zip(
        tmp_path / "s.b2z",
        [("x.b2nd", _frame(), zipfile.ZIP_STORED), ("dataset.json", MANIFEST, 0)],
    )
    assert open_tree(path).read_file("dataset.json") == MANIFEST
    d = tmp_path / "d"
    d.mkdir()
    (d / "x.b2nd").write_bytes(_frame())
    (d / "dataset.json").write_bytes(MANIFEST)
    assert open_tree(d).read_file("dataset.json") == MANIFEST
    limits = Limits(max_member_nbytes=len(MANIFEST) - 1)
    with pytest.raises(LimitError, match="Limits.max_member_nbytes"):
        open_tree(d, limits=limits).read_file("dataset.json")


def test_the_member_limit_at_and_one_past(tmp_path):
    path = _with_manifest(tmp_path)
    exact = Limits(max_member_nbytes=len(MANIFEST))
    assert open_tree(path, limits=exact).read_file("dataset.json") == MANIFEST
    tight = Limits(max_member_nbytes=len(MANIFEST) - 1)
    tree = open_tree(path, limits=tight)  # listing reads no member
    with pytest.raises(LimitError, match=r"'dataset.json' bytes.*Limits.max_member_nbytes"):
        tree.read_file("dataset.json")


def test_a_bomb_is_refused_without_inflating_it(tmp_path):
    # 256 MiB of zeros in ~250 kB, stated honestly: refused from its stated size.
    path = _with_manifest(tmp_path, bytes(256 << 20), "bomb.b2z")
    tree = open_tree(path)
    tracemalloc.start()
    try:
        with pytest.raises(LimitError, match="max_member_nbytes"):
            tree.read_file("dataset.json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20


@pytest.mark.parametrize("stated", [10, 1000])
def test_a_bomb_that_states_a_small_size_inflates_no_further(tmp_path, stated):
    path = _with_manifest(tmp_path, bytes(256 << 20), "liar.b2z")
    _patch_sizes(path, usize=stated)
    tree = open_tree(path)
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match=rf"inflated size.*{stated} bytes"):
            tree.read_file("dataset.json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20


def test_a_member_that_inflates_short_of_its_stated_size_is_refused(tmp_path):
    path = _with_manifest(tmp_path)
    _patch_sizes(path, usize=len(MANIFEST) + 5)
    with pytest.raises(FormatError, match=rf"inflated size.*{len(MANIFEST)}"):
        open_tree(path).read_file("dataset.json")


def test_a_truncated_stream_is_refused(tmp_path):
    path = _with_manifest(tmp_path)
    member = zipfile.ZipFile(path).getinfo("dataset.json")
    _patch_sizes(path, csize=member.compress_size // 2)
    tree = open_tree(path)
    with pytest.raises(FormatError, match="deflate stream.*truncated"):
        tree.read_file("dataset.json")


def test_a_corrupt_stream_and_a_wrong_crc_are_refused(tmp_path):
    path = _with_manifest(tmp_path)
    raw = bytearray(path.read_bytes())
    member = zipfile.ZipFile(path).getinfo("dataset.json")
    start = member.header_offset + 30 + len(b"dataset.json")
    raw[start : start + 4] = b"\xff\xff\xff\xff"  # a reserved block type
    path.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="'dataset.json' deflate stream"):
        open_tree(path).read_file("dataset.json")
    path = _with_manifest(tmp_path, name="crc.b2z")
    _patch_sizes(path, crc=zlib.crc32(MANIFEST) ^ 1)
    with pytest.raises(FormatError, match="'dataset.json' CRC-32"):
        open_tree(path).read_file("dataset.json")


def test_a_deflated_frame_is_refused_at_listing(tmp_path):
    path = _zip(tmp_path / "f.b2z", [("x.b2nd", _frame(), zipfile.ZIP_DEFLATED)])
    with pytest.raises(FormatError, match="'x.b2nd' compression.*stored"):
        open_tree(path)


def test_other_compression_methods_are_still_refused(tmp_path):
    path = _zip(
        tmp_path / "b.b2z",
        [("x.b2nd", _frame(), zipfile.ZIP_STORED), ("a.txt", b"a" * 100, zipfile.ZIP_BZIP2)],
    )
    with pytest.raises(FormatError, match="'a.txt' compression"):
        open_tree(path)


def test_a_deflated_member_overlapping_the_next_is_refused(tmp_path):
    path = _with_manifest(tmp_path)
    info = zipfile.ZipFile(path).getinfo("dataset.json")
    _patch_sizes(path, csize=info.compress_size + 10_000)  # reaches into the directory
    with pytest.raises(FormatError, match="a span of its own"):
        open_tree(path)
