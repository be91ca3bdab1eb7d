"""A table's changes between two versions: what incremental reads and change streams return.

``changes_between(spark, table, Range(v1, v2))`` reads what changed in ``(v1, v2]``. On a
primary-key table that is, per key changed in the range, its last change (``_change_type`` 'upsert'
with the row, or 'delete' with the key) and ``_change_version``; on a table without a key, the rows
appended (``_change_type`` 'insert'). Only change data is read (the files each data commit added),
never base files that optimizing wrote, so an incremental read is as cheap as the changes it returns.
A range that crosses an INSERT OVERWRITE (or a rollback, or a copy-on-write DELETE/UPDATE of a table
without a key) is an error: those replace rows without recording per-key changes. CREATE TABLE AS
SELECT is the exception: its rows are all new, so they read as upserts (inserts) at its version.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow

from arctic_sql.errors import VersionNotFoundError
from arctic_sql.table.files import storage
from arctic_sql.table.format import versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import node_merge
from arctic_sql.table.reading.merge_on_read import (
    IS_DELETE,
    TAG,
    TXN,
    latest_changes,
    merged_dataframe,
    node_groups,
    read_files,
)
from arctic_sql.table.reading.scan import FileEntry, ReadPlan, live_files, plan_read

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from pyiceberg.manifest import DataFile
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot
    from pyspark.sql import DataFrame, SparkSession

CHANGE_TYPE = "_change_type"
CHANGE_VERSION = "_change_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
UPSERT, DELETE, INSERT = "upsert", "delete", "insert"
# Commits whose rows are all new: an incremental read may cross them.
_INITIAL_LOADS = frozenset({versions.Operation.CREATE_AS_SELECT})
_APPENDS = frozenset(
    {versions.Operation.INSERT, versions.Operation.APPEND, versions.Operation.STREAM, *_INITIAL_LOADS}
)


@dataclass(frozen=True)
class Range:
    """An incremental read's range of versions: ``(start, end]``."""

    start: int
    end: int


def version_at(history: versions.History, micros: int) -> int | None:
    """The newest version committed at or before ``micros``; None when every retained commit is later."""
    at = [c.version for c in history.commits if c.committed_at_ms * 1000 <= micros]
    return max(at) if at else None


# incremental reads -----------------------------------------------------------------------------
def _added_files(store: Table, snapshot: Snapshot, store_name: str, version: int) -> list[FileEntry]:
    """The files one data commit added, tagged with its version. The files a commit added carry the
    snapshot's own sequence number and sit in manifests it wrote (a merged manifest also holds
    older files, with older numbers); only those manifests are read, so planning a commit's
    changes does not grow with the files and manifests the table has kept."""
    return [
        dataclasses.replace(f, sequence_number=version)
        for f in live_files(store, snapshot, store_name, own=True)
        if f.sequence_number == snapshot.sequence_number
    ]


def crossing_error(table: ArcticTable, span: Range, commit: versions.Commit) -> VersionNotFoundError:
    return VersionNotFoundError(
        f"Incremental read of {table.identifier} over ({span.start}, {span.end}] crosses the "
        f"{commit.operation.upper()} at version {commit.version}, which replaced rows without per-key "
        f"changes; read the changes after it (VERSION BETWEEN {commit.version} AND {span.end}, or "
        f"startingVersion {commit.version + 1}), or the rows it wrote (VERSION AS OF {commit.version}, or "
        f"versionAsOf {commit.version})"
    )


def carries_changes(table: ArcticTable, commit: versions.Commit) -> bool:
    """Whether a data commit recorded its rows as changes an incremental read can return (an
    INSERT OVERWRITE or rollback replaced rows without them)."""
    return commit.store == Store.CHANGE or commit.operation in (
        _INITIAL_LOADS if table.is_keyed else _APPENDS
    )


def commit_files(table: ArcticTable, commit: versions.Commit) -> list[FileEntry]:
    """The files a data commit that carries changes added, tagged with its version."""
    store = table.change if commit.store == Store.CHANGE else table.base
    assert store is not None
    snapshot = store.snapshot_by_id(commit.snapshot_id)
    assert snapshot is not None  # a retained commit's
    return _added_files(store, snapshot, commit.store, commit.version)


def change_files(
    table: ArcticTable, span: Range, *, skip_overwrites: bool = False, history: versions.History | None = None
) -> tuple[FileEntry, ...]:
    """The files holding the changes of the data commits in ``span``, each tagged with its version;
    ``skip_overwrites``: leave out the commits that carry no changes instead of refusing them;
    ``history``: the table's, when the caller has it (it is read from both stores' metadata)."""
    files: list[FileEntry] = []
    commits = history.commits if history is not None else versions.data_commits(table.base, table.change)
    for commit in commits:
        if not span.start < commit.version <= span.end:
            continue
        if carries_changes(table, commit):
            files.extend(commit_files(table, commit))
        elif not skip_overwrites:
            raise crossing_error(table, span, commit)
    return tuple(files)


def changes_between(spark: SparkSession, table: ArcticTable, span: Range) -> DataFrame:
    """The incremental read of ``span``: the table's columns, ``_change_type`` and ``_change_version``."""
    from pyspark.sql import functions as F

    files = change_files(table, span)
    columns = [F.col(f"`{f.name}`") for f in table.schema.fields]
    if files and table.is_keyed and not table.merge_engine.newest_wins:
        return _folded_changes(spark, table, span, files)
    if files and storage.is_remote(
        table.base.location()
    ):  # Spark's Parquet reader would need a JVM connector
        return _changes_in_tasks(spark, table, files)
    if table.is_keyed:
        plan = ReadPlan(span.end, table.schema, (), files, {}, None)
        if not files:
            empty = read_files(spark, table, table.schema, (), all_nullable=True)
            return empty.select(
                *columns, F.lit(UPSERT).alias(CHANGE_TYPE), F.lit(0).cast("long").alias(CHANGE_VERSION)
            )
        latest = latest_changes(spark, table, plan)
        kind = F.when(F.col(IS_DELETE), F.lit(DELETE)).otherwise(F.lit(UPSERT))
        return latest.select(*columns, kind.alias(CHANGE_TYPE), F.col(TXN).alias(CHANGE_VERSION))
    return _appended_rows(spark, table, files).select(
        *columns, F.lit(INSERT).alias(CHANGE_TYPE), F.col(TXN).alias(CHANGE_VERSION)
    )


def _folded_changes(
    spark: SparkSession, table: ArcticTable, span: Range, files: tuple[FileEntry, ...]
) -> DataFrame:
    """``changes_between`` of a table whose merge engine folds changes (partial-update, first-row,
    aggregation, a sequence field): a change row is not the key's new state, so the post-image is
    the key's row in the merged read of the range's end, 'delete' when the key is gone there."""
    from pyspark.sql import functions as F

    keys = list(table.primary_key)
    latest = latest_changes(spark, table, ReadPlan(span.end, table.schema, (), files, {}, None))
    changed = latest.select(*[F.col(f"`{k}`") for k in keys], F.col(TXN))
    present = "_arctic_present"
    state = merged_dataframe(spark, table, plan_read(table, span.end)).withColumn(present, F.lit(True))
    joined = changed.join(state, on=keys, how="left")
    kind = F.when(F.col(present).isNull(), F.lit(DELETE)).otherwise(F.lit(UPSERT))
    columns = [F.col(f"`{f.name}`") for f in table.schema.fields]
    return joined.select(*columns, kind.alias(CHANGE_TYPE), F.col(TXN).alias(CHANGE_VERSION))


def _appended_rows(spark: SparkSession, table: ArcticTable, files: tuple[FileEntry, ...]) -> DataFrame:
    """Rows of the appended files, each with the version that appended it (``_arctic_txn``)."""
    from pyspark.sql import functions as F

    rows = read_files(spark, table, table.schema, files, tagged=True)
    return rows.withColumn(TXN, F.expr(f"{TAG} DIV 2")).drop(TAG)


def net_changes(
    store: Callable[[str], node_merge.Store],
    files: Sequence[tuple[str, DataFile, int]],
    schema: Schema,
    keys: Sequence[str],
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The newest change per key among tagged files (``(store name, file, node_merge.tag)``), in
    pyarrow; without ``keys`` every row, as an insert. The rows (``schema`` made optional; a delete
    carries only its key), each row's change type and version."""
    optional = node_merge.optional(schema)
    parts = tagged_parts(store, files, schema, keys)
    if not parts:
        return (
            schema_to_pyarrow(optional, include_field_ids=False).empty_table(),
            np.zeros(0, str),
            np.zeros(0, np.int64),
        )
    if keys:
        rows = node_merge.newest_changes(parts, keys)
        tags = rows.column(node_merge.TAG).to_numpy()
        rows = rows.drop_columns([node_merge.TAG])
        kinds = np.where(tags % 2 == 1, DELETE, UPSERT)
    else:
        rows = pa.concat_tables([t for t, _ in parts], promote_options="permissive")
        tags = np.concatenate([np.asarray(t, np.int64) for _, t in parts])
        kinds = np.full(len(tags), INSERT)
    return rows, kinds, tags // 2


def tagged_parts(
    store: Callable[[str], node_merge.Store],
    files: Sequence[tuple[str, DataFile, int]],
    schema: Schema,
    keys: Sequence[str],
    sequence: Sequence[str] = (),
) -> list[tuple[pa.Table, np.ndarray]]:
    """The rows of tagged files (``(store name, file, node_merge.tag)``), read per store and kind, each
    part with the tag of each row (``schema`` made optional; a delete carries only its key and its
    ``sequence`` columns)."""
    optional = node_merge.optional(schema)
    deleted = node_merge.delete_schema(optional, keys, sequence)
    parts = []
    for name in (Store.BASE, Store.CHANGE):
        for is_delete in (False, True):
            tagged = [(f, tag) for s, f, tag in files if s == name and bool(tag % 2) == is_delete]
            if tagged:
                parts.append(store(name).read_tagged(tagged, deleted if is_delete else optional))
    return parts


def with_change_columns(
    rows: pa.Table, kinds: np.ndarray, versions: np.ndarray, committed_at_ms: Mapping[int, int]
) -> pa.Table:
    """``rows`` with ``_change_type``, ``_change_version`` and ``_commit_timestamp`` (the commit time of
    each row's version, from ``committed_at_ms``)."""
    committed = np.array([committed_at_ms.get(int(v), 0) for v in versions], np.int64)
    return (
        rows.append_column(CHANGE_TYPE, pa.array(kinds, pa.string()))
        .append_column(CHANGE_VERSION, pa.array(versions, pa.int64()))
        .append_column(COMMIT_TIMESTAMP, pa.array(committed * 1000, pa.timestamp("us", tz="UTC")))
    )


def conformed(rows: pa.Table, arrow_type: pa.Schema) -> pa.Table:
    """``rows`` as ``arrow_type``: its columns in its order, a missing one null (a delete carries only the key)."""
    for f in arrow_type:
        if f.name not in rows.column_names:
            rows = rows.append_column(f.name, pa.nulls(rows.num_rows, f.type))
    return rows.select(arrow_type.names).cast(arrow_type)


def _changes_in_tasks(spark: SparkSession, table: ArcticTable, files: tuple[FileEntry, ...]) -> DataFrame:
    """``changes_between``'s rows read in pyarrow inside Spark tasks, a node group at a time (a
    file at a time without a key), as merges are: the files never pass through Spark's reader."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from arctic_sql.table.model.schemas import spark_schema

    groups = node_groups(files) if table.is_keyed else [[f] for f in files]
    tagged = [
        tuple((f.store, f.data_file, node_merge.tag(f.sequence_number, f.is_delete)) for f in g)
        for g in groups
    ]
    base = node_merge.Store.of(table.base)
    change = node_merge.Store.of(table.change) if table.change is not None else base
    schema, keys = table.schema, tuple(table.primary_key)
    spark_type = StructType(
        [
            *spark_schema(schema, all_nullable=True).fields,
            StructField(CHANGE_TYPE, StringType()),
            StructField(CHANGE_VERSION, LongType()),
        ]
    )
    arrow_type = to_arrow_schema(spark_type, timezone="UTC")

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # group indexes in, changes out
        for batch in batches:
            for i in batch.column(0).to_pylist():
                rows, kinds, found = net_changes(
                    lambda name: change if name == Store.CHANGE else base, tagged[i], schema, keys
                )
                rows = rows.append_column(CHANGE_TYPE, pa.array(kinds, pa.string())).append_column(
                    CHANGE_VERSION, pa.array(found, pa.int64())
                )
                yield from conformed(rows, arrow_type).to_batches()

    indexes = spark.range(0, len(groups), 1, numPartitions=len(groups)).selectExpr("CAST(id AS INT) AS i")
    return indexes.mapInArrow(storage.shipped(read), spark_type)
