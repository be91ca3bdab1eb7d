"""Tombstones of a table with ``sequence.field``: keys an applied sequenced delete removed, with the
delete's sequence, kept in the base store so that optimizing does not fold them away (issue 31).

A node's tombstones are one Iceberg *data* file of the base store (``tombstones-*.parquet``, beside
the node's base files, the table's full schema: the key and sequence columns, every other column
NULL or, where the column is required, a filler value) and, in the same commit, a file-scoped
position-delete file (``position_deletes.py``) that deletes every row of it. So:

- every Iceberg reader of the base store (pyiceberg's scan, Spark's Iceberg reader, the project's
  own base reads, which apply position deletes) sees no tombstone row: the base it reads is the
  table without the deleted keys, which is correct;
- a tombstone file is a table file like any other: snapshots, branches, tags, clones and time
  travel reference it through manifests, and expiration, orphan removal and DROP ... PURGE treat it
  as they treat every data and delete file, with no new kind of reference to learn;
- it commits atomically with the base snapshot whose state it belongs to (one base commit).

Why not the other candidates: Iceberg equality-delete files on the key (with the sequence columns as
extra columns) are what the spec offers, but pyiceberg 0.12's ``DataScan.plan_files`` raises on any
equality-delete file ("PyIceberg does not yet support equality deletes"), and this project's own
planning (``reading/scan.py``, ``optimizer/process.py``) and every pyiceberg user of the base store
scan through it. Keeping applied deletes in the change store beyond the watermark puts them in the
other store's commit, which lands after the base commit that advanced the watermark: a crash between
the two would lose them silently.

Only the folds read tombstones back (``read``): they ignore the position-delete file that hides them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema

from arctic_sql.table.files import position_deletes, storage

PREFIX = "tombstones-"


def is_tombstone_file(path: str) -> bool:
    """Whether ``path`` is a tombstone data file by its name (as ``write`` names them)."""
    return path.rsplit("/", 1)[-1].startswith(PREFIX)


def write(directory: str, schema: Schema, tombstones: pa.Table) -> list[str]:
    """Write ``tombstones`` (key and sequence columns) under ``directory`` as a tombstone data file
    in the table's ``schema`` and the position-delete file hiding all its rows; return both
    locations, to commit together (``commit.data_files`` makes their Iceberg entries)."""
    fs, path = storage.folder(directory)
    location = f"{path.rstrip('/')}/{PREFIX}{uuid.uuid4().hex}.parquet"
    arrow = schema_to_pyarrow(schema, include_field_ids=True)
    n = tombstones.num_rows
    columns = [
        tombstones.column(f.name).cast(f.type)
        if f.name in tombstones.column_names
        else (pa.nulls(n, f.type) if f.nullable else _filler(f.type, n))
        for f in arrow
    ]
    pq.write_table(pa.table(columns, schema=arrow), location, filesystem=fs)
    data = storage.prefix(directory, path) + location
    return [data, position_deletes.write(directory, data, np.arange(n, dtype=np.int64))]


def read(io: FileIO, locations: Iterable[str], columns: Sequence[str]) -> pa.Table | None:
    """The tombstone rows (``columns``: key and sequence) of the tombstone files at ``locations``,
    read whole (their position deletes are what hides them from every other reader); None if none."""
    parts = []
    for location in locations:
        with io.new_input(location).open() as stream:
            parts.append(pq.read_table(stream, columns=list(columns)))
    return pa.concat_tables(parts, promote_options="permissive") if parts else None


def _filler(kind: pa.DataType, n: int) -> pa.Array:
    """A value for a required column of a tombstone row, which no reader sees (its row is deleted)."""
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pa.array([""] * n, kind)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        width = kind.byte_width if pa.types.is_fixed_size_binary(kind) else 0
        return pa.array([b"\0" * width] * n, kind)
    if pa.types.is_boolean(kind):
        return pa.array(np.zeros(n, dtype=bool))
    if pa.types.is_date(kind):
        return pa.array(np.zeros(n, np.int32)).cast(kind)
    if pa.types.is_decimal(kind):
        return pa.array([0] * n, pa.int64()).cast(kind)
    return pa.array(np.zeros(n, np.int64)).cast(kind)
