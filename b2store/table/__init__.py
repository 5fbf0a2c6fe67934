"""python-blosc2's columnar tables (CTable): the manifest (``schema``), the live rows
(``rows``), reading (``reader``) and writing (``writer``)."""

from .reader import Table, open_table
from .schema import Column, Schema
from .to_table import to_table

__all__ = ["Column", "Schema", "Table", "open_table", "to_table"]
