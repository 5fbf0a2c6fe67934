"""``python -m b2store.cli``: the ``b2store`` command."""

import sys

from . import main

# Guarded: tools that import every module of the package (the docs' inspection) must not run it.
if __name__ == "__main__":
    sys.exit(main())
