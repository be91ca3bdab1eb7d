"""Rollback: a past version's rows made the current state, as a new commit (history before and after
stays; DESIGN "Maintenance").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow.fs as pafs
from pyiceberg.table import Table

from arctic_sql.errors import VersionNotFoundError
from arctic_sql.table.files import storage
from arctic_sql.table.format import versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.format.partitioning import partition_path
from arctic_sql.table.maintenance.expiration import refresh_stores
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading.changes import version_at
from arctic_sql.table.reading.merge_on_read import merged_dataframe
from arctic_sql.table.reading.scan import live_entries, live_files, plan_read
from arctic_sql.table.records import leases
from arctic_sql.table.writing import bulk_base_files, commit, spark_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class RollbackResult:
    previous_version: int
    restored_version: int
    current_version: int

    def row(self) -> tuple[int, int, int]:
        return (self.previous_version, self.restored_version, self.current_version)


ROLLBACK_OUTPUT = "previous_version long, restored_version long, current_version long"
ROLLBACK = versions.Operation.ROLLBACK
ROLLBACK_TO = "arctic.rollback-to"


def rollback_to_version(spark: SparkSession, table: ArcticTable, version: int) -> RollbackResult:
    """Make ``version``'s rows the current state, as a new commit: history before and after stays.

    The new commit replaces every base file and, on a primary-key table, moves every partition's
    watermark to a new transaction, so older change data no longer applies. When the version's
    rows are base files alone (a table without a key, or a version read right after optimizing),
    those files are committed again as they are; otherwise the version's merged rows are written
    once by a Spark job, as INSERT OVERWRITE would.
    """
    refresh_stores(table)
    history = versions.history(table.base, table.change)
    if not any(c.version == version for c in history.commits):
        raise VersionNotFoundError(
            f"Cannot roll {table.identifier} back to version {version}: it does not exist or has expired "
            f"(available: {history.describe()})"
        )
    previous = history.latest
    if version == previous:
        return RollbackResult(previous, version, previous)
    with leases.writing(table, ROLLBACK):
        plan = plan_read(table, version)
        written: list[str] = []
        if plan.change_files:
            rows = spark_files.align(merged_dataframe(spark, table, plan), table.schema)
            written = bulk_base_files.write_base_files(rows, table, f"rollback of {table.identifier}")
            new_files = commit.data_files(table.base, written)
        else:
            new_files = [f.data_file for f in plan.base_files]
            new_files += list({d.file_path: d for f in plan.base_files for d in f.deletes}.values())
        spec, schema = table.spec, table.schema

        def build(store: Table, txn: int | None) -> commit.BaseChange:
            current = store.current_snapshot()
            live = live_entries(store, current, Store.BASE)  # delete files too
            live_paths = {f.path for f in live}
            keep = {f.file_path for f in new_files}
            summary = {versions.OPERATION: ROLLBACK, ROLLBACK_TO: str(version)}
            marks = None
            if txn is not None:
                assert table.change is not None
                changed = live_files(table.change, table.change.current_snapshot(), Store.CHANGE)
                partitions = (
                    set(versions.watermarks_of(current))
                    | {f.partition for f in live}
                    | {f.partition for f in changed}
                    | {partition_path(spec, schema, f.partition) for f in new_files}
                )
                marks = {p: txn for p in partitions}
                summary[versions.TXN] = str(txn)
            added = [f for f in new_files if f.file_path not in live_paths]
            _check_still_there(table, version, added)
            return commit.BaseChange(
                delete=[f.data_file for f in live if f.path not in keep],
                add=added,
                watermarks=marks,
                summary=summary,
            )

        if table.change is not None:
            _, txn = commit.commit_reserved(table, ROLLBACK, build, written)
            return RollbackResult(previous, version, txn)
        snapshot = commit.commit_base(table, lambda store: build(store, None), written)
        return RollbackResult(previous, version, versions.sequence_of(snapshot))


def _check_still_there(table: ArcticTable, version: int, files: list) -> None:  # noqa: ANN001 - DataFiles
    """Refuse to commit again files that expiration removed while the rollback ran (one batched stat)."""
    for f, info in zip(files, storage.file_infos([f.file_path for f in files]), strict=True):
        if info.type != pafs.FileType.File:
            raise VersionNotFoundError(
                f"Cannot roll {table.identifier} back to version {version}: it expired while "
                f"the rollback ran ({f.file_path} is gone); nothing was committed"
            )


def rollback_to_timestamp(spark: SparkSession, table: ArcticTable, timestamp_ms: int) -> RollbackResult:
    """Roll back to the newest version committed at or before ``timestamp_ms``."""
    history = versions.history(table.base, table.change)
    version = version_at(history, timestamp_ms * 1000)
    if version is None:
        raise VersionNotFoundError(
            f"Cannot roll {table.identifier} back to {timestamp_ms} ms: no retained version was committed "
            f"by then (available: {history.describe()})"
        )
    return rollback_to_version(spark, table, version)
