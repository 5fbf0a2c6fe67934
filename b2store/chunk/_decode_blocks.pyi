"""Typed stub of the GIL-free block loop (b2store/chunk/_decode_blocks.pyx)."""

from collections.abc import Buffer, Mapping, Sequence

class Scratch:
    def __init__(self) -> None: ...

def set_entry_points(addresses: Mapping[str, int]) -> None: ...
def decodable(codec_format: int, with_dict: bool) -> bool: ...
def encodable(codec: int) -> bool: ...
def walk(
    src: Buffer,
    bstarts: Buffer,
    which: Buffer,
    ends: Buffer,
    nbytes: int,
    blocksize: int,
    full_nstreams: int,
    codec_format: int,
    table: Buffer,
) -> int: ...
def decode(
    src: Buffer,
    table: Buffer,
    blocks: Buffer,
    counter: Buffer,
    failed: Buffer,
    dest: Buffer,
    dest_base: int,
    nbytes: int,
    blocksize: int,
    full_nstreams: int,
    codec_format: int,
    steps: Sequence[tuple[int, int]],
    typesize: int,
    blosc1: bool,
    scratch: Scratch,
    dictionary: bytes | None = None,
    first: Buffer | None = None,
) -> int: ...
