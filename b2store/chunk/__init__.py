"""The chunk layer: one Blosc1/Blosc2 chunk, from its bytes to the data it holds and back."""
