"""The central directory of a ``.b2z`` zip: its members (each a span of its own inside the
file) and where each member's bytes start, read by a few byte ranges; and the bytes of a
small member read whole (:func:`read_member`).

A frame is read where it lies, so it must be stored. Other members may be deflated too
(xarray-blosc2 deflates its ``dataset.json``): they are listed, and inflated only when read,
in memory and at most ``Limits.max_member_nbytes`` whatever their header says.

Everything a hostile zip could ask for is checked against the file before it is used: the
end record is read whole, the entry count is bounded by ``Limits.max_tree_members`` and by
the directory's size, members may not overlap each other or the directory (the classic zip
bomb), members compressed otherwise than deflated, encrypted ones and names leaving the tree
are refused.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Protocol

from .errors import FormatError
from .limits import Limits, resolve

__all__ = ["zip_members", "member_data_offset", "read_member", "STORED", "DEFLATED"]

STORED, DEFLATED = 0, 8  # the zip compression methods a .b2z member may have


class ZipFile(Protocol):
    """What the zip is read through (``b2store.tree``'s local-or-fsspec files): its size and
    byte ranges of it (``rel`` is ``""``, the zip itself)."""

    def size(self, rel: str = "") -> int: ...

    def read(self, rel: str, start: int, size: int) -> bytes: ...


_EOCD = struct.Struct("<IHHHHIIH")
_EOCD64_LOCATOR = struct.Struct("<IIQI")
_EOCD64 = struct.Struct("<IQHHIIQQQQ")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_LOCAL = struct.Struct("<IHHHHHIIIHH")


@dataclass(frozen=True)
class _Member:
    name: str
    header_offset: int
    size: int
    # The name's length in the central directory: the local header's is the same, so the
    # header and the name are read in one request.
    name_len: int = 0
    method: int = STORED
    csize: int = -1  # the bytes the member takes in the file (``size`` when stored)
    crc: int | None = None

    @property
    def stored_size(self) -> int:
        return self.size if self.csize < 0 else self.csize


def _safe_member_name(name: str) -> str:
    """A member name that stays inside the tree: relative, no ``..``, no odd characters."""
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or any(c in name for c in "\0\n\r\t:")
        or any(p in ("", ".", "..") for p in parts[:-1])
        or parts[-1] in (".", "..")
    ):
        raise FormatError("zip member name", "a relative path inside the tree", repr(name))
    return name


def zip_members(files: ZipFile, limits: Limits | None = None) -> list[_Member]:
    """The members of a zip file, read from its central directory (a few range reads); at
    most ``limits.max_tree_members`` entries."""
    size = files.size()
    # Most zips have no comment: the end record is the last 22 bytes (one small read).
    tail_len = min(size, _EOCD.size + _EOCD64_LOCATOR.size)
    tail = files.read("", size - tail_len, tail_len)
    if tail[-_EOCD.size : -_EOCD.size + 4] != b"PK\x05\x06":
        tail_len = min(size, _EOCD.size + 0xFFFF + _EOCD64_LOCATOR.size)
        tail = files.read("", size - tail_len, tail_len)
    at = tail.rfind(b"PK\x05\x06", 0, max(0, len(tail) - _EOCD.size + 4))
    # (an end record is whole, its comment too; a file shorter than one has none)
    while at >= 0 and (
        at + _EOCD.size > len(tail)
        or at + _EOCD.size + struct.unpack_from("<H", tail, at + 20)[0] > len(tail)
    ):
        at = tail.rfind(b"PK\x05\x06", 0, at)
    if at < 0:
        raise FormatError(".b2z end of central directory", "a zip file", "no zip signature")
    eocd_pos = size - tail_len + at
    _, _, _, _, count, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, at)
    cd_end = eocd_pos
    if (count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF) and at >= 20:
        sig, _, eocd64_pos, _ = _EOCD64_LOCATOR.unpack_from(tail, at - 20)
        if sig == 0x07064B50:
            if not 0 <= eocd64_pos <= size - _EOCD64.size:
                raise FormatError("zip64 end of central directory", "inside the file", eocd64_pos)
            rec = _EOCD64.unpack(files.read("", eocd64_pos, _EOCD64.size))
            if rec[0] != 0x06064B50:
                raise FormatError("zip64 end of central directory", "its signature", hex(rec[0]))
            count, cd_size, cd_offset = rec[7], rec[8], rec[9]
            cd_end = eocd64_pos
    if cd_offset + cd_size != cd_end:
        raise FormatError(
            "zip central directory",
            f"ending where the end record starts ({cd_end})",
            cd_offset + cd_size,
            eocd_pos,
        )
    resolve(limits).check("max_tree_members", count, "zip entries", eocd_pos)
    if count * _CENTRAL.size > cd_size:
        raise FormatError("zip entries", f"at most {cd_size // _CENTRAL.size}", count, eocd_pos)
    cd = files.read("", cd_offset, cd_size)
    members, pos = [], 0
    for _ in range(count):
        if pos + _CENTRAL.size > len(cd):
            raise FormatError(
                "zip central directory", "a whole entry", "truncated", cd_offset + pos
            )
        fields = _CENTRAL.unpack_from(cd, pos)
        sig, flags, method, crc = fields[0], fields[3], fields[4], fields[7]
        csize, usize = fields[8], fields[9]
        name_len, extra_len, comment_len, header_offset = (
            fields[10],
            fields[11],
            fields[12],
            fields[16],
        )
        if sig != 0x02014B50:
            raise FormatError(
                "zip central directory entry", "signature PK\\1\\2", hex(sig), cd_offset + pos
            )
        start = pos + _CENTRAL.size
        end = start + name_len + extra_len + comment_len
        if end > len(cd):
            raise FormatError(
                "zip central directory", "a whole entry", "truncated", cd_offset + pos
            )
        raw_name = cd[start : start + name_len]
        try:
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
        except UnicodeDecodeError:
            raise FormatError(
                "zip member name", "UTF-8 (flag bit 11 is set)", bytes(raw_name), cd_offset + pos
            ) from None
        extra = cd[start + name_len : start + name_len + extra_len]
        usize, csize, header_offset = _zip64_sizes(extra, usize, csize, header_offset)
        pos = end
        if name.endswith("/"):
            continue  # a directory entry
        if flags & 0x1:
            raise FormatError(f"zip member {name!r}", "not encrypted", "encrypted")
        if method not in (STORED, DEFLATED):
            raise FormatError(
                f"zip member {name!r} compression",
                "stored (0), or deflated (8) for a small member that is no frame: a .b2z is"
                " read in place; unzip it and open the directory",
                method,
            )
        if method == STORED and csize != usize:
            raise FormatError(f"zip member {name!r} size", f"{usize} (stored)", csize)
        members.append(
            _Member(_safe_member_name(name), header_offset, usize, name_len, method, csize, crc)
        )
    # Members may not overlap each other or the central directory (the classic zip bomb).
    spans = sorted(
        (m.header_offset, m.header_offset + _LOCAL.size + m.stored_size, m.name) for m in members
    )
    last_end = 0
    for begin, end, name in spans:
        if begin < last_end or end > cd_offset:
            raise FormatError(
                f"zip member {name!r}", "a span of its own before the directory", begin
            )
        last_end = end
    if len({m.name for m in members}) != len(members):
        raise FormatError("zip member names", "unique", "a duplicate")
    return members


def _zip64_sizes(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4 : pos + 4 + size]
        if tag == 0x0001:
            values = list(struct.unpack_from(f"<{len(body) // 8}Q", body)) if len(body) >= 8 else []
            if usize == 0xFFFFFFFF and values:
                usize = values.pop(0)
            if csize == 0xFFFFFFFF and values:
                csize = values.pop(0)
            if offset == 0xFFFFFFFF and values:
                offset = values.pop(0)
        pos += 4 + size
    return usize, csize, offset


def member_data_offset(files: ZipFile, member: _Member) -> int:
    """Where a stored member's bytes start: after its local header, name and extra field."""
    # One read (a request over HTTP) for the header and the name the directory promises.
    head = files.read("", member.header_offset, _LOCAL.size + member.name_len)
    fields = _LOCAL.unpack_from(head)
    if fields[0] != 0x04034B50:
        raise FormatError(f"zip member {member.name!r}", "local header PK\\3\\4", hex(fields[0]))
    name_len, extra_len = fields[9], fields[10]
    if name_len == member.name_len:
        name = head[_LOCAL.size :]
    else:
        name = files.read("", member.header_offset + _LOCAL.size, name_len)
    if name.decode("utf-8", "replace") != member.name and name.decode("cp437") != member.name:
        raise FormatError(f"zip member {member.name!r}", "the same name in its local header", name)
    return member.header_offset + _LOCAL.size + name_len + extra_len


_PIECE = 1 << 16  # compressed bytes read (one request over HTTP) per step of inflating


def read_member(files: ZipFile, member: _Member, limits: Limits | None = None) -> bytes:
    """The bytes of a small member, read whole: stored ones as they lie, deflated ones
    inflated in memory. Either is at most ``limits.max_member_nbytes``: the size the central
    directory states is checked first, and inflating stops one byte past the smaller of it
    and the limit, so a member whose header lies (a zip bomb) never inflates further."""
    limit = resolve(limits).max_member_nbytes
    field = f"zip member {member.name!r} bytes"
    resolve(limits).check("max_member_nbytes", member.size, field, member.header_offset)
    start = member_data_offset(files, member)
    if member.method == STORED:
        data = files.read("", start, member.size)
    else:
        data = _inflate(files, member, start, min(member.size, limit))
    if member.crc is not None and zlib.crc32(data) != member.crc:
        raise FormatError(
            f"zip member {member.name!r} CRC-32", hex(member.crc), hex(zlib.crc32(data)), start
        )
    return data


def _inflate(files: ZipFile, member: _Member, start: int, budget: int) -> bytes:
    """Inflate the member's raw deflate stream, never producing more than ``budget + 1``
    bytes (zlib's ``max_length`` caps each call; what is left waits in its input tail)."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    out = bytearray()
    pos, csize = 0, member.stored_size
    try:
        while pos < csize and not inflater.eof:
            data = files.read("", start + pos, min(_PIECE, csize - pos))
            pos += len(data)
            while data and not inflater.eof:
                # budget + 1 - len(out) >= 1 here: a max_length of 0 would mean no limit.
                out += inflater.decompress(data, budget + 1 - len(out))
                if len(out) > budget:
                    raise FormatError(
                        f"zip member {member.name!r} inflated size",
                        f"the {member.size} bytes its central directory states",
                        f"more than {budget}",
                        start,
                    )
                data = inflater.unconsumed_tail
    except zlib.error as exc:
        raise FormatError(
            f"zip member {member.name!r} deflate stream", "valid deflate data", str(exc), start
        ) from None
    if not inflater.eof:
        raise FormatError(
            f"zip member {member.name!r} deflate stream",
            f"its end within {csize} compressed bytes",
            "truncated",
            start,
        )
    if len(out) != member.size:
        raise FormatError(f"zip member {member.name!r} inflated size", member.size, len(out), start)
    return bytes(out)
