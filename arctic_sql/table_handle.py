"""The Python API for a table's actions: what ``Session.table("db.t")`` returns.

A :class:`TableHandle` is the :class:`ArcticTable` it always was (stores, schema, properties) plus the
actions, shaped as pyiceberg's ``table.maintenance`` and Delta's ``DeltaTable``: keyword-only
arguments, moments as timezone-aware ``datetime`` or a ``timedelta`` back from now, and typed results
whose fields are the matching ``CALL`` procedure's output columns. It calls the same actions as the
procedures, the management service and the optimizer service, so a run is recorded the same way.

>>> t = s.table("db.t")  # doctest: +SKIP
>>> t.maintenance.expire_snapshots(older_than=timedelta(days=7), retain_last=5).expired_snapshots_count
>>> t.optimize(mode="full")
>>> t.rollback(to_version=3)
>>> t.history().show()
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from arctic_sql.optimizer import process
from arctic_sql.procedures.optimize import partition_filter
from arctic_sql.statements.metadata_tables import metadata_table
from arctic_sql.table.maintenance import actions, hive_sync
from arctic_sql.table.model.table import ArcticTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext
    from arctic_sql.table.maintenance.actions import (
        ExpireChangeDataResult,
        ExpireSnapshotsResult,
        Moment,
        OrphanFile,
    )
    from arctic_sql.table.maintenance.hive_sync import HiveSyncResult
    from arctic_sql.table.maintenance.rollback import RollbackResult
    from arctic_sql.table.writing.branch_writes import FastForwardResult


class TableHandle(ArcticTable):
    """One arctic table with its actions; cheap, like :class:`ArcticTable` (reload to see commits)."""

    def __init__(self, table: ArcticTable, context: StatementContext) -> None:
        # Every attribute of the table as loaded (its stores, anything cached), whatever ArcticTable holds.
        self.__dict__.update(table.__dict__)
        self._context = context

    @property
    def maintenance(self) -> Maintenance:
        """Expiration, change-data TTL, orphan removal and purge of history."""
        return Maintenance(self)

    def optimize(
        self, *, mode: str = process.AUTO, where: str | None = None, dry_run: bool = False
    ) -> list[process.PartitionResult]:
        """Optimize now, as ``CALL system.optimize``: ``mode`` is minor, major, full or auto (what the
        triggers say); ``where`` a predicate on partition columns; one result per partition planned."""
        return process.optimize(self._context.spark, self, mode, partition_filter(self, where), bool(dry_run))

    def rollback(
        self, *, to_version: int | str | None = None, to_timestamp: datetime.datetime | None = None
    ) -> RollbackResult:
        """Make a past version's rows current again, as a new commit (``to_version``: a number or a tag)."""
        return actions.rollback(self._context.spark, self, to_version=to_version, to_timestamp=to_timestamp)

    def fast_forward(self, *, to: str, branch: str = "main") -> FastForwardResult:
        """Move ``branch`` (default main) to branch ``to``'s head, as ``CALL system.fast_forward``."""
        return actions.fast_forward(self, to=to, branch=branch)

    def hive_sync(self, *, version: int | None = None) -> HiveSyncResult:
        """Bring the table's Hive view to ``version`` (default: the latest), as ``CALL system.hive_sync``."""
        return hive_sync.sync(self._context.spark, self, version=version)

    def history(self) -> DataFrame:
        """The table's versions, as ``SELECT * FROM db.t.history``."""
        return metadata_table(self._context, self, "history")

    def snapshots(self) -> DataFrame:
        """Both stores' snapshots, as ``SELECT * FROM db.t.snapshots``."""
        return metadata_table(self._context, self, "snapshots")

    def __repr__(self) -> str:
        return f"TableHandle({self.identifier}, keyed={self.is_keyed})"


class Maintenance:
    """``table.maintenance``: the history-keeping actions of one table."""

    def __init__(self, table: TableHandle) -> None:
        self._table = table

    def expire_snapshots(
        self, *, older_than: Moment | None = None, retain_last: int | None = None
    ) -> ExpireSnapshotsResult:
        """Expire versions older than ``older_than`` beyond the newest ``retain_last`` (defaults: the
        table's ``snapshot.keep.*`` properties); recorded as a maintenance run."""
        return actions.expire_snapshots(self._table, older_than=older_than, retain_last=retain_last)

    def remove_orphan_files(
        self, *, older_than: Moment | None = None, dry_run: bool = False, force: bool = False
    ) -> list[OrphanFile]:
        """Delete (``dry_run``: only list) files no snapshot references, older than ``older_than``
        (default and minimum without ``force``: the safety window); a real run is recorded."""
        return actions.remove_orphan_files(self._table, older_than=older_than, dry_run=dry_run, force=force)

    def expire_change_data(self, *, older_than: Moment | None = None) -> ExpireChangeDataResult:
        """Drop merged change files older than ``older_than`` (default: ``change.data.ttl.minutes``)."""
        return actions.expire_change_data(self._table, older_than=older_than)

    def purge(self) -> ExpireSnapshotsResult:
        """Drop all history before the current version."""
        return actions.purge(self._table)
