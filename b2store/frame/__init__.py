"""The frame layer: contiguous and sparse frames, their metalayers, vlmeta and chunk index."""
