"""The merge rule over Arrow tables, one tree node at a time.

Base and change files are bucketed by the hash of the primary key (DESIGN "The tree"), so a key's
rows all lie in one node: a node's files merge alone, with no shuffle. Within the node the rule of
DESIGN "Transactions and order" applies: per key, the change with the highest transaction wins
over older changes and over the base, and a winning delete removes the key.

Each change table carries a *tag*, ``transaction * 2 + (1 if a delete)``: one number that orders by
transaction and tells the kind. Only the change rows are sorted (by key, newest first); the base is
filtered by the set of changed keys and keeps its order, as the pyarrow baseline of figure L1 does.

Files are read through pyiceberg's ``ArrowScan``, which resolves columns by Iceberg field id, so
files written before a rename, drop or added column come back in the current schema; written files
carry the field ids of ``schema_to_pyarrow``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import NestedField

from arctic_sql import storage

if TYPE_CHECKING:
    from arctic_sql.catalog import ArcticTable

TAG = "_arctic_tag"


def tag(transaction: int, is_delete: bool) -> int:
    return transaction * 2 + int(is_delete)


def newest_changes(changes: Sequence[tuple[pa.Table, int]], keys: Sequence[str]) -> pa.Table:
    """The newest change row per key among tagged change tables, with its ``_arctic_tag``.

    Delete tables may hold only the key columns: their other columns come back null.
    """
    parts = [t.append_column(TAG, pa.array(np.full(len(t), value, np.int64))) for t, value in changes]
    change = pa.concat_tables(parts, promote_options="permissive")
    if change.num_rows == 0:
        return change
    change = change.sort_by([*((k, "ascending") for k in keys), (TAG, "descending")])
    first = np.zeros(change.num_rows, dtype=bool)
    first[0] = True
    for k in keys:  # a row starts a new key when any key column differs from the row before
        column = change.column(k).combine_chunks()
        first[1:] |= pc.fill_null(pc.not_equal(column.slice(1), column.slice(0, len(column) - 1)), True).to_numpy(
            zero_copy_only=False)
    return change.filter(pa.array(first))


def merge(base: pa.Table | None, changes: Sequence[tuple[pa.Table, int]], keys: Sequence[str],
          *, sort: bool = True) -> pa.Table:
    """The rows of one node after applying ``changes`` (table, tag) to ``base``, in ``base``'s schema
    when there is a base; sorted by ``keys`` when there are changes and ``sort`` (files are written
    sorted; a reader does not need the order)."""
    if not changes:
        if base is None:
            raise ValueError("nothing to merge: no base and no change rows")
        return base
    newest = newest_changes(changes, keys)
    upserts = newest.filter(pc.equal(pc.bit_wise_and(newest.column(TAG), 1), 0)).drop_columns([TAG])
    if base is None:
        return upserts
    # In the base's key types: pyiceberg reads strings as string but makes an empty table of large_string.
    changed = newest.select(list(keys)).cast(base.select(list(keys)).schema)
    if len(keys) == 1:
        kept = base.filter(pc.invert(pc.is_in(base.column(keys[0]), value_set=changed.column(0))))
    else:
        kept = base.join(changed, keys=list(keys), join_type="left anti").select(base.column_names)
    for f in base.schema:  # with only delete tables, the change rows carry only the key
        if f.name not in upserts.column_names:
            upserts = upserts.append_column(f.name, pa.nulls(upserts.num_rows, f.type))
    # A join drops the not-null flags of the base's required columns: both sides back to its schema.
    merged = pa.concat_tables([kept.cast(base.schema), upserts.select(base.column_names).cast(base.schema)])
    return merged.sort_by([(k, "ascending") for k in keys]) if sort else merged


@dataclass(frozen=True)
class Store:
    """What reading a store's files needs: its metadata (field ids, name mapping) and file IO."""

    metadata: TableMetadata
    io: FileIO

    def read(self, files: Sequence[DataFile], schema: Schema) -> pa.Table:
        scan = ArrowScan(self.metadata, self.io, schema, AlwaysTrue())
        return scan.to_table([FileScanTask(f) for f in files])

    @classmethod
    def both(cls, table: ArcticTable) -> tuple[Store, Store]:
        """The base and change stores of a primary-key table."""
        assert table.change is not None
        return cls(table.base.metadata, table.base.io), cls(table.change.metadata, table.change.io)


@dataclass(frozen=True)
class NodeTask:
    """One node's merge: its base files, its change files with their tags, where the output goes."""

    base_files: tuple[DataFile, ...]
    change_files: tuple[tuple[DataFile, int], ...]
    directory: str = ""  # the node's output directory (partition and node directories included)

    @classmethod
    def of(cls, files: Iterable[Any], directory: str = "") -> NodeTask:
        """From planned files (scan.FileEntry or optimizer PlanFile: ``store``, ``data_file``,
        ``sequence_number``, ``is_delete``)."""
        files = list(files)
        return cls(tuple(f.data_file for f in files if f.store == "base"),
                   tuple((f.data_file, tag(f.sequence_number, f.is_delete)) for f in files if f.store == "change"),
                   directory)


def read_node(task: NodeTask, schema: Schema, keys: Sequence[str], base: Store, change: Store, *,
              sort: bool = True) -> pa.Table:
    """The merged rows of one node, in ``schema``; ``sort``: by key (see :func:`merge`)."""
    base_rows = base.read(task.base_files, schema) if task.base_files else None
    by_tag: dict[int, list[DataFile]] = {}
    for f, value in task.change_files:
        by_tag.setdefault(value, []).append(f)
    # Delete rows may carry only the key: every column is optional on the change side.
    optional = Schema(*[NestedField(f.field_id, f.name, f.field_type, required=False) for f in schema.fields],
                      schema_id=schema.schema_id)
    key_schema = optional.select(*keys)
    changes = [(change.read(files, key_schema if value % 2 else optional), value) for value, files in by_tag.items()]
    if base_rows is None:
        base_rows = schema_to_pyarrow(schema, include_field_ids=False).empty_table()
    return merge(base_rows, changes, keys, sort=sort)


def write_node(rows: pa.Table, directory: str, schema: Schema, rows_per_file: int) -> list[str]:
    """Write ``rows`` under ``directory`` as Parquet files of at most ``rows_per_file`` rows, with
    Iceberg field ids; return their locations."""
    target = schema_to_pyarrow(schema, include_field_ids=True)
    rows = rows.cast(target)
    fs, path = storage.filesystem(directory)
    fs.create_dir(path, recursive=True)
    scheme = storage.prefix(directory, path)
    written = []
    name = uuid.uuid4().hex
    for i, start in enumerate(range(0, rows.num_rows, rows_per_file)):  # no rows left: no file
        chunk = rows.slice(start, rows_per_file)
        file_path = f"{path.rstrip('/')}/part-{i:05d}-{name}.parquet"
        pq.write_table(chunk, file_path, filesystem=fs, use_dictionary=dictionary_columns(chunk))
        written.append(scheme + file_path)
    return written


def dictionary_columns(rows: pa.Table) -> list[str]:
    """The columns worth dictionary encoding, as parquet-mr (Spark's writer) decides it: a
    fixed-width column only when dictionary plus indices are smaller than its plain values.

    pyarrow encodes every column with a dictionary until the dictionary passes 1 MB; a file of
    70,000 unique keys then stays dictionary-encoded and is about a third larger than Spark's.
    Columns of other types keep pyarrow's default (dictionary, with its fallback).
    """
    chosen = []
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        try:
            width = column.type.bit_width / 8
        except ValueError:  # variable width or nested
            chosen.append(name)
            continue
        n = len(column)
        distinct = pc.count_distinct(column).as_py() if n else 0
        if distinct * width + n * max(1, distinct.bit_length()) / 8 < n * width:
            chosen.append(name)
    return chosen
