"""The central directory of a ``.b2z`` zip: its members (stored, never compressed, each a span
of its own inside the file) and where each member's bytes start, read by a few byte ranges.

Everything a hostile zip could ask for is checked against the file before it is used: the
end record is read whole, the entry count is bounded by ``Limits.max_tree_members`` and by
the directory's size, members may not overlap each other or the directory (the classic zip
bomb), compressed or encrypted members and names leaving the tree are refused.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Protocol

from .errors import FormatError
from .limits import Limits, resolve

__all__ = ["zip_members", "member_data_offset"]


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
        sig, flags, method, csize, usize = fields[0], fields[3], fields[4], fields[8], fields[9]
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
        if method != 0:
            raise FormatError(
                f"zip member {name!r} compression",
                "stored (0): a .b2z is read in place; unzip it and open the directory",
                method,
            )
        if csize != usize:
            raise FormatError(f"zip member {name!r} size", f"{usize} (stored)", csize)
        members.append(_Member(_safe_member_name(name), header_offset, usize, name_len))
    # Members may not overlap each other or the central directory (the classic zip bomb).
    spans = sorted(
        (m.header_offset, m.header_offset + _LOCAL.size + m.size, m.name) for m in members
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
