"""The n-dimensional layer: the b2nd metalayer, chunk/block geometry, and arrays."""
