"""History maintenance procedures: expiration, change-data TTL, orphan removal, rollback, purge.

Each binds its arguments and calls the action in ``arctic_sql/table/maintenance/actions.py`` (the one
the Python API, the management service and the optimizer service call); the action's typed result is
the output row.

>>> session.sql("CALL system.expire_snapshots(table => 'db.t', retain_last => 5)")  # doctest: +SKIP
>>> session.sql("CALL system.remove_orphan_files('db.t', dry_run => true)")  # doctest: +SKIP
>>> session.sql("CALL system.rollback_to_version('db.t', get_latest_version('db.t', 2))")  # doctest: +SKIP
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.procedures import Parameter, procedure
from arctic_sql.table.maintenance import actions
from arctic_sql.table.maintenance.actions import ExpireChangeDataResult, ExpireSnapshotsResult, OrphanFile
from arctic_sql.table.maintenance.rollback import RollbackResult
from arctic_sql.table.reading import tags

if TYPE_CHECKING:
    from arctic_sql.statements.context import StatementContext


@procedure(
    "expire_snapshots",
    (Parameter("table"), Parameter("older_than", "timestamp", None), Parameter("retain_last", "long", None)),
    ExpireSnapshotsResult,
)
def expire_snapshots(
    ctx: StatementContext, table: str, older_than: datetime.datetime | None, retain_last: int | None
) -> list[ExpireSnapshotsResult]:
    """Expire versions older than ``older_than`` (default: now - ``snapshot.keep.duration``) beyond the
    newest ``retain_last`` (default: ``snapshot.keep.min-count``); delete files no kept version needs."""
    return [actions.expire_snapshots(ctx.table(table), older_than=older_than, retain_last=retain_last)]


@procedure("purge", (Parameter("table"),), ExpireSnapshotsResult)
def purge(ctx: StatementContext, table: str) -> list[ExpireSnapshotsResult]:
    """Drop all history before the current version (MaxCompute's purge)."""
    return [actions.purge(ctx.table(table))]


@procedure(
    "expire_change_data",
    (Parameter("table"), Parameter("older_than", "timestamp", None)),
    ExpireChangeDataResult,
)
def expire_change_data(
    ctx: StatementContext, table: str, older_than: datetime.datetime | None
) -> list[ExpireChangeDataResult]:
    """Drop merged change files older than ``older_than`` (default: now - ``change.data.ttl.minutes``)."""
    return [actions.expire_change_data(ctx.table(table), older_than=older_than)]


@procedure(
    "remove_orphan_files",
    (
        Parameter("table"),
        Parameter("older_than", "timestamp", None),
        Parameter("dry_run", "boolean", False),
        Parameter("force", "boolean", False),
    ),
    OrphanFile,
)
def remove_orphan_files(
    ctx: StatementContext, table: str, older_than: datetime.datetime | None, dry_run: bool, force: bool
) -> list[OrphanFile]:
    """Delete files no retained snapshot references, older than ``older_than`` (default: now -
    ``clean-orphan-file.min-existing-time-minutes``, at least an hour); ``dry_run`` only lists them.
    A more recent ``older_than`` needs ``force => true``; files of writes in progress are never removed."""
    return actions.remove_orphan_files(
        ctx.table(table), older_than=older_than, dry_run=bool(dry_run), force=bool(force)
    )


@procedure("rollback_to_version", (Parameter("table"), Parameter("version", "any")), RollbackResult)
def rollback_to_version(ctx: StatementContext, table: str, version: object) -> list[RollbackResult]:
    """Make a version's rows current again, as a new commit; ``version``: its number or a tag's name."""
    target: int | str | None
    if isinstance(version, str) and tags.NAME.fullmatch(version.strip()):
        target = version.strip()
    else:
        try:  # a number, or a string of one ('3')
            target = int(str(version).strip()) if not isinstance(version, (bool, float)) else None
        except ValueError:
            target = None
    if target is None:
        raise InvalidArgumentError(
            f"system.rollback_to_version: parameter 'version' must be a version number or "
            f"a tag's name, got {version!r}"
        )
    return [actions.rollback(ctx.spark, ctx.table(table), to_version=target)]


@procedure("rollback_to_timestamp", (Parameter("table"), Parameter("timestamp", "timestamp")), RollbackResult)
def rollback_to_timestamp(
    ctx: StatementContext, table: str, timestamp: datetime.datetime
) -> list[RollbackResult]:
    """Make the rows of the newest version committed at or before ``timestamp`` current again."""
    return [actions.rollback(ctx.spark, ctx.table(table), to_timestamp=timestamp)]
