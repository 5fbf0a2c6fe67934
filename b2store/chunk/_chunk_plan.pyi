"""Typed stub of the one-pass decode of a common chunk (b2store/chunk/_chunk_plan.pyx)."""

from collections.abc import Buffer

from b2store.chunk._decode_blocks import Scratch

class Plan:
    ok: bool
    nbytes: int
    nblocks: int
    delta: bool
    def __init__(self, src: Buffer) -> None: ...
    def first(self, dest: Buffer, scratch: Scratch) -> int: ...
    def run(self, dest: Buffer, scratch: Scratch) -> int: ...
    def run_alone(self, dest: Buffer, scratch: Scratch) -> int: ...
