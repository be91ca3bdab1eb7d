"""Writing rows to a table: one change-store transaction of upserts and deletes, an overwrite of
partitions, an append, or a copy-on-write rewrite. SQL statements, the DataFrame writer and the
streaming sink all write through here (no SQL text: rows arrive as Spark DataFrames).

Writers that read the table first (DELETE, UPDATE, MERGE) pass the version they read; the commit
then fails with ``StaleRead`` if another data commit landed after it, and ``retrying`` runs the
writer again on the new state (a few times, then CommitConflictError). This keeps concurrent writers
from resurrecting or losing rows.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyiceberg.table import Table

from arctic_sql.errors import CommitConflictError, PrimaryKeyViolationError
from arctic_sql.table import bulk_writer, commit, leases, writer
from arctic_sql.table.catalog import ArcticTable
from arctic_sql.table.format import layout, versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.format.partitioning import partition_path
from arctic_sql.table.scan import latest_version, live_entries

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

ATTEMPTS = 5


class StaleRead(Exception):
    """A commit landed after the version a statement read; the statement must run again."""


def check_keys(df: DataFrame, keys: list[str], what: str) -> None:
    """Raise if a row of ``df`` has a null key or two rows share a key.

    One aggregation job answers both questions; only when it finds a problem does a second job
    fetch an example for the message.
    """
    from pyspark.sql import functions as F

    key_columns = [F.col(f"`{k}`") for k in keys]
    null = " OR ".join(f"`{k}` IS NULL" for k in keys)
    per_key = df.groupBy(*key_columns).agg(F.count(F.lit(1)).alias("_arctic_n"))
    summary = per_key.agg(F.max("_arctic_n").alias("most"), F.max(F.expr(null).cast("int")).alias("nulls"))
    most, nulls = summary.collect()[0]
    if not most or (most <= 1 and not nulls):
        return
    row = per_key.where(f"_arctic_n > 1 OR {null}").limit(1).collect()[0]
    shown = ", ".join(f"{k}={'NULL' if row[k] is None else repr(row[k])}" for k in keys)
    if any(row[k] is None for k in keys):
        raise PrimaryKeyViolationError(f"{what} writes a null primary key ({shown})")
    raise PrimaryKeyViolationError(f"{what} writes primary key ({shown}) {row['_arctic_n']} times in one statement")


def _changes_frame(
    table: ArcticTable, upserts: DataFrame | None, deletes: DataFrame | None, changes: DataFrame | None
) -> DataFrame:
    from pyspark.sql import functions as F

    schema = table.schema
    frames = [] if changes is None else [writer.align(changes, schema, all_nullable=True)]
    if upserts is not None:
        frames.append(writer.align(upserts, schema, all_nullable=True).withColumn(layout.OP_COLUMN,
                                                                                  F.lit(layout.UPSERT)))
    if deletes is not None:
        keyed = set(table.primary_key)
        full = deletes.select(*[F.col(f"`{f.name}`") if f.name in keyed else F.lit(None).alias(f.name)
                                for f in schema.fields])
        frames.append(writer.align(full, schema, all_nullable=True).withColumn(layout.OP_COLUMN,
                                                                               F.lit(layout.DELETE)))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def write_changes(
    table: ArcticTable,
    *,
    upserts: DataFrame | None = None,
    deletes: DataFrame | None = None,
    changes: DataFrame | None = None,
    operation: str,
    read_version: int | None = None,
) -> int | None:
    """Check, write and commit one change-store transaction; return its number (None if empty).

    ``upserts`` hold whole rows, ``deletes`` the keys to delete, ``changes`` rows of both kinds
    told apart by an ``arctic_op`` column.
    """
    from pyspark import StorageLevel

    with leases.writing(table, operation):
        changes = _changes_frame(table, upserts, deletes, changes)
        # A statement that read the table (read_version) would compute that read twice, once for the
        # key check and once for the write: keep its result. A plain source is cheaper to read again.
        if read_version is not None:
            changes = changes.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            check_keys(changes, table.primary_key, f"{operation.upper()} into {table.identifier}")
            paths = writer.write_files(changes, table, store=Store.CHANGE)
        finally:
            changes.unpersist()
        if not paths:
            return None
        validate = None
        if read_version is not None:
            def validate(change_store: Table) -> None:
                table.base.refresh()
                commits = versions.data_commits(table.base, change_store)
                if commits and commits[-1].version > read_version:
                    raise StaleRead()
        return commit.commit_change(table, paths, operation, validate=validate)


def overwrite_rows(table: ArcticTable, rows: DataFrame, operation: str) -> None:
    """Replace the partitions ``rows`` fall in (the whole table if unpartitioned) with ``rows``: one
    Spark job checks the keys and writes sorted, node-aligned base files (bulk_writer.py)."""
    with leases.writing(table, operation):
        paths = bulk_writer.write_base(rows, table, f"{operation.upper()} into {table.identifier}")
        commit_overwrite(table, paths, operation)


def commit_overwrite(table: ArcticTable, paths: list[str], operation: str) -> None:
    """Commit base files that replace the partitions they fall in (the whole table if unpartitioned):
    one version, stamped with a reserved transaction number on a keyed table."""
    new_files = commit.data_files(table.base, paths)
    spec, schema = table.spec, table.schema
    affected = {partition_path(spec, schema, f.partition) for f in new_files}
    if not spec.fields:
        affected = {""}
    if not affected:
        return
    txn = commit.reserve_transaction(table, operation) if table.is_keyed else None

    def build(store: Table) -> commit.BaseChange:
        current = store.current_snapshot()
        old = [f.data_file for f in live_entries(store, current, Store.BASE) if f.partition in affected]
        marks = versions.watermarks_of(current)
        summary = {versions.OPERATION: operation}
        if txn is not None:
            marks.update({p: txn for p in affected})
            summary[versions.TXN] = str(txn)
        return commit.BaseChange(delete=old, add=new_files, watermarks=marks, summary=summary)

    commit.commit_base(table, build, paths)


def append_rows(table: ArcticTable, rows: DataFrame, operation: str) -> None:
    """Append rows to a table without a primary key."""
    with leases.writing(table, operation):
        paths = writer.write_files(writer.align(rows, table.schema), table, store=Store.BASE)
        if paths:
            commit_append(table, paths, operation)


def commit_append(table: ArcticTable, paths: list[str], operation: str, summary: dict[str, str] | None = None,
                  validate: Callable[[Table], None] | None = None) -> None:
    """Commit base files of a table without a primary key as one appending version.

    ``validate`` sees the fresh base store before every attempt and may refuse the commit."""
    new_files = commit.data_files(table.base, paths)

    def build(store: Table) -> commit.BaseChange:
        if validate is not None:
            validate(store)
        return commit.BaseChange(add=new_files, summary={**(summary or {}), versions.OPERATION: operation})

    commit.commit_base(table, build, paths)


def rewrite_table(table: ArcticTable, build_rows, operation: str) -> None:  # noqa: ANN001
    """Copy-on-write for tables without a key: replace every file with ``build_rows(version)``."""

    def once(version: int) -> None:
        snapshot = table.base.current_snapshot()
        read_id = snapshot.snapshot_id if snapshot else None
        paths = writer.write_files(writer.align(build_rows(version), table.schema), table, store=Store.BASE)
        new_files = commit.data_files(table.base, paths)

        def build(store: Table) -> commit.BaseChange:
            current = store.current_snapshot()
            if (current.snapshot_id if current else None) != read_id:
                raise StaleRead()
            old = [f.data_file for f in live_entries(store, current, Store.BASE)]
            return commit.BaseChange(delete=old, add=new_files, summary={versions.OPERATION: operation})

        commit.commit_base(table, build, paths)

    with leases.writing(table, operation):
        retrying(table, operation, once)


def retrying(table: ArcticTable, operation: str, attempt_once) -> None:  # noqa: ANN001
    for attempt in range(ATTEMPTS):
        table.base.refresh()
        if table.change is not None:
            table.change.refresh()
        try:
            attempt_once(latest_version(table))
            return
        except StaleRead:
            log.info("%s on %s read a stale version; running it again (%d)", operation, table.identifier,
                     attempt + 1)
    raise CommitConflictError(f"{operation.upper()} on {table.identifier} kept conflicting with other writers")
