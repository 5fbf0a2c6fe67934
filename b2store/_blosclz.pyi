"""Typed stub of the compiled BloscLZ codec (b2store/_blosclz.pyx)."""

from collections.abc import Buffer

def decompress(src: Buffer, dst: Buffer) -> int: ...
