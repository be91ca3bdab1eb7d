"""History maintenance procedures: expiration, change-data TTL, orphan removal, rollback, purge.

>>> session.sql("CALL system.expire_snapshots(table => 'db.t', retain_last => 5)")  # doctest: +SKIP
>>> session.sql("CALL system.remove_orphan_files('db.t', dry_run => true)")  # doctest: +SKIP
>>> session.sql("CALL system.rollback_to_version('db.t', get_latest_version('db.t', 2))")  # doctest: +SKIP
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from arctic_sql.procedures import Parameter, procedure

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.maintenance import expiration, orphan_removal, rollback
from arctic_sql.table.reading import tags
from arctic_sql.table.records import maintenance_runs
from arctic_sql.table.records.maintenance_runs import Kind

if TYPE_CHECKING:
    from arctic_sql.statements.context import StatementContext


TRIGGER = "manual"  # as CALL system.optimize records its processes


def _ms(moment: datetime.datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


@procedure(
    "expire_snapshots",
    (Parameter("table"), Parameter("older_than", "timestamp", None), Parameter("retain_last", "long", None)),
    expiration.EXPIRE_OUTPUT,
)
def expire_snapshots(ctx: StatementContext, table: str, older_than: datetime.datetime | None,
                     retain_last: int | None) -> list[tuple]:
    """Expire versions older than ``older_than`` (default: now - ``snapshot.keep.duration``) beyond the
    newest ``retain_last`` (default: ``snapshot.keep.min-count``); delete files no kept version needs."""
    arctic_table = ctx.table(table)
    result = maintenance_runs.recorded(  # shown by the management service as a maintenance run
        arctic_table, Kind.EXPIRE_SNAPSHOTS, TRIGGER,
        lambda: expiration.expire_snapshots(arctic_table, _ms(older_than), retain_last))
    return [result.row()]


@procedure("purge", (Parameter("table"),), expiration.EXPIRE_OUTPUT)
def purge(ctx: StatementContext, table: str) -> list[tuple]:
    """Drop all history before the current version (MaxCompute's purge)."""
    return [expiration.purge(ctx.table(table)).row()]


@procedure(
    "expire_change_data",
    (Parameter("table"), Parameter("older_than", "timestamp", None)),
    "removed_change_files_count long",
)
def expire_change_data(ctx: StatementContext, table: str, older_than: datetime.datetime | None) -> list[tuple]:
    """Drop merged change files older than ``older_than`` (default: now - ``change.data.ttl.minutes``)."""
    return [(expiration.expire_change_data(ctx.table(table), _ms(older_than)),)]


@procedure(
    "remove_orphan_files",
    (Parameter("table"), Parameter("older_than", "timestamp", None), Parameter("dry_run", "boolean", False),
     Parameter("force", "boolean", False)),
    "orphan_file_location string",
)
def remove_orphan_files(ctx: StatementContext, table: str, older_than: datetime.datetime | None,
                        dry_run: bool, force: bool) -> list[tuple]:
    """Delete files no retained snapshot references, older than ``older_than`` (default: now -
    ``clean-orphan-file.min-existing-time-minutes``, at least an hour); ``dry_run`` only lists them.
    A more recent ``older_than`` needs ``force => true``; files of writes in progress are never removed."""
    arctic_table = ctx.table(table)

    def run() -> list[str]:
        return orphan_removal.remove_orphan_files(arctic_table, _ms(older_than), bool(dry_run), bool(force))

    # A dry run changes nothing and is not a maintenance run; a real one is recorded with what it removed.
    found = run() if dry_run else maintenance_runs.recorded(arctic_table, Kind.REMOVE_ORPHAN_FILES, TRIGGER, run)
    return [(p,) for p in found]


@procedure("rollback_to_version", (Parameter("table"), Parameter("version", "any")), rollback.ROLLBACK_OUTPUT)
def rollback_to_version(ctx: StatementContext, table: str, version: object) -> list[tuple]:
    """Make a version's rows current again, as a new commit; ``version``: its number or a tag's name."""
    arctic_table = ctx.table(table)
    if isinstance(version, str) and tags.NAME.fullmatch(version.strip()):
        number = tags.version_of(arctic_table, version.strip())
    else:
        try:
            number = int(str(version).strip()) if not isinstance(version, (bool, float)) else None
        except ValueError:
            number = None
    if number is None:
        raise InvalidArgumentError(f"system.rollback_to_version: parameter 'version' must be a version number or "
                                   f"a tag's name, got {version!r}")
    return [rollback.rollback_to_version(ctx.spark, arctic_table, number).row()]


@procedure(
    "rollback_to_timestamp",
    (Parameter("table"), Parameter("timestamp", "timestamp")),
    rollback.ROLLBACK_OUTPUT,
)
def rollback_to_timestamp(ctx: StatementContext, table: str, timestamp: datetime.datetime) -> list[tuple]:
    """Make the rows of the newest version committed at or before ``timestamp`` current again."""
    ms = _ms(timestamp)
    assert ms is not None
    return [rollback.rollback_to_timestamp(ctx.spark, ctx.table(table), ms).row()]
