"""An obstore store (``obstore.store.S3Store``, ``GCSStore``, ``AzureStore``, ``LocalStore``,
``MemoryStore``...) or a zarr ``ObjectStore`` over one, seen as an fsspec filesystem, so that
every remote read and write of b2store goes through it as through s3fs.

A user who holds such a store passes it as ``storage_options={"store": store}`` with a URL
whose path is the key in that store (``s3://bucket/x.b2nd`` for ``S3Store("bucket")``: the
scheme and bucket name the store already knows; they only make the string a URL). Objects
opened that way pickle with their store (obstore's S3, GCS, Azure and local stores pickle as
their configuration).

Conditional writes map to obstore's put modes: ``If-None-Match: *`` to ``"create"``,
``If-Match`` to an ``e_tag`` update; a store that refuses them raises ``FileExistsError``
here, which :mod:`b2store.frame.remote_sparse` reads as a lost race.
"""

from __future__ import annotations

import errno

from fsspec.spec import AbstractFileSystem

__all__ = ["ObstoreFileSystem"]

# A range end past any object's: read to the end of the object instead.
_TO_THE_END = 1 << 40


class ObstoreFileSystem(AbstractFileSystem):
    """The few fsspec calls b2store makes, answered by an obstore store."""

    protocol = ("obstore",)
    cachable = False  # (one instance per store: fsspec's cache keys by the arguments' text)
    root_marker = ""
    conditional_writes = True

    def __init__(self, store, **kwargs):
        super().__init__(**kwargs)
        # A zarr ObjectStore wraps the obstore store it reads through.
        self.store = getattr(store, "store", store)

    def __reduce__(self):
        return ObstoreFileSystem, (self.store,)

    # --- reading ---------------------------------------------------------------------------

    def info(self, path, **kwargs):
        import obstore

        path = self._strip_protocol(path)
        try:
            meta = obstore.head(self.store, path)
        except FileNotFoundError:
            listed = obstore.list(self.store, prefix=path.rstrip("/") + "/", chunk_size=1)
            if next(iter(listed), None):
                return {"name": path, "size": 0, "type": "directory"}
            raise FileNotFoundError(errno.ENOENT, "no such object", path) from None
        return {"name": path, "size": meta["size"], "type": "file", "ETag": meta.get("e_tag")}

    def ls(self, path, detail=True, **kwargs):
        import obstore

        path = self._strip_protocol(path).rstrip("/")
        listed = obstore.list_with_delimiter(self.store, prefix=path + "/" if path else None)
        out = [{"name": p.rstrip("/"), "size": 0, "type": "directory"}
               for p in listed["common_prefixes"]]  # fmt: skip
        out += [
            {"name": o["path"], "size": o["size"], "type": "file", "ETag": o.get("e_tag")}
            for o in listed["objects"]
        ]
        if not out and path:
            self.info(path)  # a missing path is FileNotFoundError; one object, itself
            return [self.info(path)] if detail else [path]
        return out if detail else [o["name"] for o in out]

    def cat_file(self, path, start=None, end=None, **kwargs):
        import obstore

        path = self._strip_protocol(path)
        if start is None and end is None:
            return bytes(obstore.get(self.store, path).bytes())
        start = start or 0
        if end is None or end >= _TO_THE_END:
            rng = {"offset": start}
        else:
            if end <= start:
                return b""
            rng = (start, end)
        options = {"range": rng}
        if kwargs.get("if_match"):
            options["if_match"] = kwargs["if_match"]
        try:
            return bytes(obstore.get(self.store, path, options=options).bytes())
        except FileNotFoundError:
            raise
        except Exception as exc:
            if kwargs.get("if_match") and "precondition" in type(exc).__name__.lower():
                raise FileExistsError(errno.EEXIST, "another version of the object", path) from exc
            if "range" in str(exc).lower():
                # (as an HTTP 416: a range that starts past the object's end)
                raise OSError(errno.EINVAL, f"range {rng} not satisfiable", path) from exc
            raise

    # --- writing ---------------------------------------------------------------------------

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        import obstore

        path = self._strip_protocol(path)
        if kwargs.get("IfNoneMatch") == "*":
            put_mode = "create"
        elif kwargs.get("IfMatch"):
            put_mode = {"e_tag": kwargs["IfMatch"]}
        else:
            put_mode = "overwrite"
        try:
            result = obstore.put(self.store, path, bytes(value), mode=put_mode)
        except FileExistsError:
            raise
        except Exception as exc:
            refused = type(exc).__name__.lower()
            if put_mode != "overwrite" and ("precondition" in refused or "exists" in refused):
                raise FileExistsError(errno.EEXIST, "the store refused the write", path) from exc
            raise
        return {"ETag": result.get("e_tag")}

    def put_file(self, lpath, rpath, **kwargs):
        with open(lpath, "rb") as fh:
            self.pipe_file(rpath, fh.read())

    def rm_file(self, path):
        import obstore

        try:
            obstore.delete(self.store, self._strip_protocol(path))
        except FileNotFoundError:
            pass

    def rm(self, path, recursive=False, maxdepth=None):
        import obstore

        paths = [path] if isinstance(path, str) else list(path)
        if recursive:
            paths = [p for q in paths for p in [q, *self.find(q)]]
        keys = [self._strip_protocol(p) for p in paths]
        if keys:
            try:
                obstore.delete(self.store, keys)
            except FileNotFoundError:
                pass

    def _rm(self, path):
        self.rm_file(path)
