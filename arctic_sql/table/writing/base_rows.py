"""Writing rows to a table's base store: an overwrite of partitions, an append, or a copy-on-write
rewrite (no SQL text: rows arrive as Spark DataFrames). Change-store transactions of upserts and
deletes are change_rows.py's.

Writers that read the table first (DELETE, UPDATE, MERGE) pass the version they read; the commit
then fails with ``StaleRead`` if another data commit landed after it, and ``retrying`` runs the
writer again on the new state (a few times, then CommitConflictError). This keeps concurrent writers
from resurrecting or losing rows.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from pyiceberg.table import Table

from arctic_sql.errors import CommitConflictError
from arctic_sql.table.format import versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.format.partitioning import partition_path
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import pairs
from arctic_sql.table.reading.scan import latest_version, live_entries, live_files
from arctic_sql.table.records import leases
from arctic_sql.table.writing import bulk_base_files, commit, spark_files

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

ATTEMPTS = 5
RESERVATION_POLL_S = 0.05


class StaleRead(Exception):
    """A commit landed after the version a statement read; the statement must run again."""


def overwrite_rows(
    table: ArcticTable,
    rows: DataFrame,
    operation: str,
    named: Callable[[str], bool] | None = None,
    summary: dict[str, str] | None = None,
) -> None:
    """Replace the partitions ``rows`` fall in (the whole table if unpartitioned) with ``rows``: one
    Spark job checks the keys and writes sorted, node-aligned base files (bulk_base_files.py).
    ``named``: partitions replaced even when no row falls in them (``PARTITION (r = 'us')``).
    ``summary``: entries the commit's snapshot summary records with the rows."""
    with leases.writing(table, operation):
        paths = bulk_base_files.write_base(rows, table, f"{operation.upper()} into {table.identifier}")
        commit_overwrite(table, paths, operation, named, summary)


def commit_overwrite(
    table: ArcticTable,
    paths: list[str],
    operation: str,
    named: Callable[[str], bool] | None = None,
    extra: dict[str, str] | None = None,
) -> None:
    """Commit base files that replace the partitions they fall in (the whole table if unpartitioned),
    and those ``named`` accepts: one version, stamped with a reserved transaction number on a keyed table."""
    new_files = commit.data_files(table.base, paths)
    spec, schema = table.spec, table.schema
    affected = {partition_path(spec, schema, f.partition) for f in new_files}
    if not spec.fields:
        affected = {""}
    if not affected and named is None:
        return

    def build(store: Table, txn: int | None) -> commit.BaseChange:
        current = store.current_snapshot()
        live = live_entries(store, current, Store.BASE)
        marks = versions.watermarks_of(current)
        replaced = set(affected)
        if named is not None:
            # commit_reserved refreshed the change store: every change below txn is in it
            changed = (
                {f.partition for f in live_files(table.change, table.change.current_snapshot(), Store.CHANGE)}
                if table.change is not None
                else set()
            )
            replaced |= {p for p in {f.partition for f in live} | changed | set(marks) if named(p)}
        old = [f.data_file for f in live if f.partition in replaced]
        summary = {**(extra or {}), versions.OPERATION: operation}
        if txn is not None:
            marks.update({p: txn for p in replaced})
            summary[versions.TXN] = str(txn)
        return commit.BaseChange(delete=old, add=new_files, watermarks=marks, summary=summary)

    if table.is_keyed:
        commit.commit_reserved(table, operation, build, paths)
    else:
        commit.commit_base(table, lambda store: build(store, None), paths)


def append_rows(table: ArcticTable, rows: DataFrame, operation: str) -> None:
    """Append rows to a table without a primary key."""
    with leases.writing(table, operation):
        what = f"{operation.upper()} into {table.identifier}"
        paths = bulk_base_files.write_base_files(
            spark_files.align(rows, table.schema, what=what), table, what
        )
        if paths:
            commit_append(table, paths, operation)


def commit_append(
    table: ArcticTable,
    paths: list[str],
    operation: str,
    summary: dict[str, str] | None = None,
    validate: Callable[[Table], None] | None = None,
) -> None:
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
        what = f"{operation.upper()} into {table.identifier}"
        paths = bulk_base_files.write_base_files(
            spark_files.align(build_rows(version), table.schema, what=what), table, what
        )
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


def _settle(table: ArcticTable) -> None:
    """Reload the stores, first waiting (up to commit.PENDING_RESERVATION_MS) while an overwrite's
    reservation above the latest version has not landed its base commit: a statement run again
    before it lands would only be stale again."""
    deadline = time.monotonic() + commit.PENDING_RESERVATION_MS / 1000
    while True:
        pairs.reload(table)
        if table.change is None:
            return
        pending = commit.reservation_pending(table.base, table.change, latest_version(table))
        if not pending or time.monotonic() > deadline:
            return
        time.sleep(RESERVATION_POLL_S)  # polling the catalog for the overwrite's commit


def retrying(table: ArcticTable, operation: str, attempt_once) -> None:  # noqa: ANN001
    """Run ``attempt_once(version read)`` until its commit finds no newer data commit than the
    version it read. ``table`` was loaded by the statement just now: the first attempt reads it as
    it is (a commit landing since is what the validation catches); later ones reload it."""
    for attempt in range(ATTEMPTS):
        if attempt:
            _settle(table)
        try:
            attempt_once(latest_version(table))
            return
        except StaleRead:
            log.info(
                "%s on %s read a stale version; running it again (%d)",
                operation,
                table.identifier,
                attempt + 1,
            )
    raise CommitConflictError(
        f"{operation.upper()} on {table.identifier} kept conflicting with other writers"
    )
