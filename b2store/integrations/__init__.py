"""What connects b2store to other libraries: the numcodecs codec, the Zarr v3 codecs, the Zarr
store and the xarray backend. Nothing below this package imports it; each module imports its
library (numcodecs, zarr, xarray) itself, so ``import b2store`` pulls in none of them."""
