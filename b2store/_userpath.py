"""Errors of a write name the path the user gave, never the temporary it is built under.

Every writer builds a new frame or tree under a hidden temporary beside its target
(``.NAME.PID.RANDOM.new``, ``.NAME.RANDOM.tmp``, nested when one writer calls another) and
renames it into place. An ``OSError`` met there (a read-only directory, a full disk, a missing
parent) would name that temporary, a file the user never asked for and that no longer
exists. :func:`names_user_path` wraps the public writers so that such an error names the path
the temporary stands for, with the same class and errno; the original stays chained.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

__all__ = ["names_user_path", "stands_for"]

# A hidden temporary's name: leading dots, the name it stands for, then one or more
# ``.PID.HEX12.new|tmp`` (b2store's) or ``.RANDOM8.tmp`` (tempfile.mkdtemp's) suffixes.
_TEMP = re.compile(r"^\.+(?P<name>.+?)(?:\.\d+\.[0-9a-f]{12}\.(?:new|tmp)|\.[a-z0-9_]{8}\.tmp)+$")


def stands_for(filename) -> str | None:
    """The path a temporary in ``filename`` stands for (the first temporary among its
    components, with what follows it dropped), or None when it names no temporary.

    >>> stands_for("/data/..x.b2nd.12.0123456789ab.new.12.ba9876543210.new")
    '/data/x.b2nd'
    >>> stands_for("/data/.t.b2d.k2j_x9qa.tmp/v.b2nd")
    '/data/t.b2d'
    >>> stands_for("/data/x.b2nd") is None
    True
    """
    if filename is None or isinstance(filename, int):
        return None
    parts = Path(os.fsdecode(filename)).parts
    for i, part in enumerate(parts):
        m = _TEMP.match(part)
        if m:
            return str(Path(*parts[:i], m["name"]))
    return None


def _renamed(exc: OSError) -> OSError | None:
    if type(exc).__module__ != "builtins" or exc.errno is None:
        return None  # b2store's own OSError subclasses already say what they mean
    user = stands_for(exc.filename)
    if user is None:
        return None
    other = exc.filename2
    if other is not None and os.fsdecode(other) != user and stands_for(other) is None:
        return type(exc)(exc.errno, exc.strerror, user, None, other)
    return type(exc)(exc.errno, exc.strerror, user)


def names_user_path(func):
    """Wrap a writer so that an OSError naming one of its temporaries names the path it
    stands for instead (same class and errno; the original chained as the cause)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except OSError as exc:
            renamed = _renamed(exc)
            if renamed is None:
                raise
            raise renamed from exc

    return wrapper
