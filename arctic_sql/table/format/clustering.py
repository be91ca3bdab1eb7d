"""Clustering: the order major and full optimizing write each tree node's rows in.

Rows are placed in tree nodes by the hash of the key, so a filter on another column (a date, a
customer) would touch a file in every node. With ``write.cluster.columns`` set, optimizing sorts
each node's rows by those columns (``write.cluster.mode = sort``, what ``WRITE [LOCALLY] ORDERED BY``
sets) or by their Z-order value (``z-order``, ``CLUSTER BY``) before cutting them into files and
row groups, so each file and row group holds a narrow range of them and readers skip the rest by
their bounds.

The Z-order value interleaves the bits of each column's *rank* within the rows ordered (scaled to
``bits_per_column`` bits), as Delta interleaves range ids: every column gets the same number of
significant bits whatever its values' range or type, so a date spanning a year and a customer id
spanning millions weigh alike. The same value is computed over Arrow here (a node merged in memory)
and with Spark window functions in ``optimizer/executor.py`` (a node merged by a Spark query).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.schema import Schema
from pyiceberg.types import ListType, MapType, StructType

from arctic_sql.errors import InvalidArgumentError, NoSuchColumnError

COLUMNS = "write.cluster.columns"
MODE = "write.cluster.mode"
SORT, ZORDER = "sort", "z-order"
MODES = (SORT, ZORDER)


@dataclass(frozen=True)
class Clustering:
    """Which columns a table's optimized files are ordered by, and how."""

    mode: str  # SORT or ZORDER
    columns: tuple[str, ...]

    @classmethod
    def of(cls, properties: Mapping[str, str], schema: Schema) -> Clustering | None:
        """The table's clustering, or None (key order). A rename carries the order along and an
        ordered column cannot be dropped (statements/schema_changes.py); a name the schema lacks
        all the same is left out: the files are still correct, only less ordered."""
        names = {f.name for f in schema.fields}
        columns = tuple(c for c in parse_columns(properties.get(COLUMNS, "")) if c in names)
        if not columns:
            return None
        return cls(properties.get(MODE, SORT) or SORT, columns)

    def describe(self) -> str:
        """As DESCRIBE and SHOW CREATE TABLE show it: the statement that sets it."""
        listed = ", ".join(self.columns)
        return f"CLUSTER BY ({listed})" if self.mode == ZORDER else f"WRITE ORDERED BY ({listed})"


def parse_columns(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def ordered_by(properties: Mapping[str, str], name: str) -> bool:
    """Whether the table's files are ordered by column ``name`` (any spelling of its case)."""
    return name.lower() in (c.lower() for c in parse_columns(properties.get(COLUMNS, "")))


def renamed(properties: Mapping[str, str], old: str, new: str) -> dict[str, str]:
    """The clustering property after column ``old`` is renamed ``new`` (empty when it names no
    such column), to be committed with the rename so the order follows the column."""
    if not ordered_by(properties, old):
        return {}
    columns = parse_columns(properties[COLUMNS])
    return {COLUMNS: ",".join(new if c.lower() == old.lower() else c for c in columns)}


def check(columns: Sequence[str], schema: Schema, primary_key: Sequence[str], table: str) -> list[str]:
    """The columns as the schema spells them, or a one-line error: unknown, repeated, nested, or
    only primary-key columns (the files already are in key order)."""
    by_lower = {f.name.lower(): f for f in schema.fields}
    found = []
    for name in columns:
        field = by_lower.get(name.lower())
        if field is None:
            raise NoSuchColumnError(f"Cannot order {table} by '{name}': no such column")
        if isinstance(field.field_type, (StructType, ListType, MapType)):
            raise InvalidArgumentError(
                f"Cannot order {table} by '{field.name}': a {field.field_type} column has no order"
            )
        if field.name in found:
            raise InvalidArgumentError(f"Cannot order {table} by '{field.name}' twice")
        found.append(field.name)
    if not found:
        raise InvalidArgumentError(f"Cannot order {table} by no column")
    if primary_key and set(found) <= set(primary_key):
        raise InvalidArgumentError(
            f"Cannot order {table} by its primary key only: its files already are in key order"
        )
    return found


def bits_per_column(count: int) -> int:
    """Bits of each column's scaled rank in a Z-order value: all fit one signed 64-bit long."""
    return min(31, 63 // max(1, count))


def scaled_ranks(column: pa.Array | pa.ChunkedArray, bits: int) -> np.ndarray:
    """Each value's rank among ``column`` (ties share the lowest, nulls first), scaled to
    ``[0, 2^bits - 1]``: Spark's ``floor(percent_rank() * (2^bits - 1))``."""
    n = len(column)
    if n <= 1:
        return np.zeros(n, dtype=np.uint64)
    rank = pc.rank(column, sort_keys=[("", "ascending", "at_start")], tiebreaker="min")
    fraction = (rank.to_numpy().astype(np.float64) - 1) / (n - 1)
    return np.floor(fraction * float((1 << bits) - 1)).astype(np.uint64)


def interleave(values: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """The Z-order value of unsigned ``values`` of ``bits`` bits each: from the highest bit down,
    one bit of each column in turn (the first column's bit highest)."""
    count = len(values)
    z = np.zeros(len(values[0]) if count else 0, dtype=np.uint64)
    for bit in range(bits):
        for c, v in enumerate(values):
            z |= ((v >> np.uint64(bit)) & np.uint64(1)) << np.uint64(bit * count + count - 1 - c)
    return z


def z_values(rows: pa.Table, columns: Sequence[str]) -> np.ndarray:
    bits = bits_per_column(len(columns))
    return interleave([scaled_ranks(rows.column(c), bits) for c in columns], bits)


def ordered(rows: pa.Table, clustering: Clustering | None) -> pa.Table:
    """``rows`` in ``clustering``'s order (unchanged when None)."""
    if clustering is None or rows.num_rows == 0:
        return rows
    if clustering.mode == ZORDER and len(clustering.columns) > 1:
        return rows.take(pa.array(np.argsort(z_values(rows, clustering.columns), kind="stable")))
    return rows.sort_by([(c, "ascending") for c in clustering.columns])
