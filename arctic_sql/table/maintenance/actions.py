"""The maintenance actions, as every entry point calls them: the Python API (``s.table("db.t").maintenance``),
the CALL procedures, the management service and the optimizer service.

Each action takes keyword-only arguments, moments as timezone-aware ``datetime`` (a naive one is
refused: it names no instant) or as a ``timedelta`` back from now, and returns a typed result whose
fields are exactly its procedure's output columns (``model/results.py`` derives the columns). An
expiration or a real orphan cleaning records itself as a maintenance run here, once, with the
``trigger`` of its caller; a refused call (:class:`InvalidArgumentError`) changes and records nothing.

>>> expire_snapshots(table, older_than=datetime.now(UTC) - timedelta(days=7), retain_last=5)  # doctest: +SKIP
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.maintenance import expiration, orphan_removal
from arctic_sql.table.maintenance import rollback as rollback_module
from arctic_sql.table.maintenance.rollback import RollbackResult
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import tags
from arctic_sql.table.records import maintenance_runs
from arctic_sql.table.records.maintenance_runs import Kind
from arctic_sql.table.writing import branch_writes
from arctic_sql.table.writing.branch_writes import FastForwardResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MANUAL = "manual"  # the trigger of a run asked for by a user (CALL or the Python API), as optimize records it

Moment = datetime.datetime | datetime.timedelta
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True)
class ExpireSnapshotsResult:
    """What an expiration removed: the row of ``CALL system.expire_snapshots`` (and of ``purge``)."""

    deleted_data_files_count: int
    deleted_change_files_count: int
    deleted_manifest_files_count: int
    deleted_metadata_files_count: int  # manifest lists and table metadata files
    expired_snapshots_count: int
    removed_change_files_count: int  # merged change files the change-data TTL dropped first
    oldest_version: int

    @classmethod
    def of(cls, result: expiration.ExpireResult) -> ExpireSnapshotsResult:
        return cls(*result.row())


@dataclass(frozen=True)
class ExpireChangeDataResult:
    """The row of ``CALL system.expire_change_data``."""

    removed_change_files_count: int


@dataclass(frozen=True)
class OrphanFile:
    """One row of ``CALL system.remove_orphan_files``: a file removed (or, in a dry run, found)."""

    orphan_file_location: str


def epoch_ms(value: Moment | None, name: str) -> int | None:
    """``value`` as epoch milliseconds: an aware ``datetime`` as is, a ``timedelta`` as that long before now."""
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        if value < datetime.timedelta(0):
            raise InvalidArgumentError(f"{name} must be a duration of zero or more, got {value}")
        return expiration.now_ms() - value // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise InvalidArgumentError(
                f"{name} must be a timezone-aware datetime (datetime.now(datetime.UTC) - ...),"
                f" got the naive {value.isoformat()}"
            )
        return (value - EPOCH) // datetime.timedelta(milliseconds=1)  # in integers: no float rounding
    raise InvalidArgumentError(f"{name} must be a datetime or a timedelta, got {value!r}")


def _count(value: int | None, name: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InvalidArgumentError(f"{name} must be a whole number, got {value!r}")
    return value


def expire_snapshots(
    table: ArcticTable,
    *,
    older_than: Moment | None = None,
    retain_last: int | None = None,
    trigger: str = MANUAL,
) -> ExpireSnapshotsResult:
    """Expire versions older than ``older_than`` (default: now - ``snapshot.keep.duration``) beyond the
    newest ``retain_last`` (default: ``snapshot.keep.min-count``), after the change-data TTL; delete the
    files no kept version needs. Recorded as a maintenance run."""
    older_than_ms, keep = epoch_ms(older_than, "older_than"), _count(retain_last, "retain_last")
    return maintenance_runs.recorded(
        table,
        Kind.EXPIRE_SNAPSHOTS,
        trigger,
        lambda: ExpireSnapshotsResult.of(expiration.expire_snapshots(table, older_than_ms, keep)),
    )


def purge(table: ArcticTable) -> ExpireSnapshotsResult:
    """Drop all history before the current version (MaxCompute's purge)."""
    return ExpireSnapshotsResult.of(expiration.purge(table))


def expire_change_data(table: ArcticTable, *, older_than: Moment | None = None) -> ExpireChangeDataResult:
    """Drop merged change files older than ``older_than`` (default: now - ``change.data.ttl.minutes``)."""
    return ExpireChangeDataResult(expiration.expire_change_data(table, epoch_ms(older_than, "older_than")))


def remove_orphan_files(
    table: ArcticTable,
    *,
    older_than: Moment | None = None,
    dry_run: bool = False,
    force: bool = False,
    trigger: str = MANUAL,
) -> list[OrphanFile]:
    """Delete files no retained snapshot references, older than ``older_than`` (default: now - the
    safety window, ``clean-orphan-file.min-existing-time-minutes``, at least an hour); ``dry_run`` only
    lists them. A more recent ``older_than`` needs ``force``; files of writes in progress always stay.
    A real run is recorded; a dry run changes nothing and is not."""
    older_than_ms = epoch_ms(older_than, "older_than")

    def run() -> list[str]:
        return orphan_removal.remove_orphan_files(table, older_than_ms, bool(dry_run), bool(force))

    found = run() if dry_run else maintenance_runs.recorded(table, Kind.REMOVE_ORPHAN_FILES, trigger, run)
    return [OrphanFile(location) for location in found]


def rollback(
    spark: SparkSession,
    table: ArcticTable,
    *,
    to_version: int | str | None = None,
    to_timestamp: datetime.datetime | None = None,
) -> RollbackResult:
    """Make a past version's rows current again, as a new commit: ``to_version`` (its number or a tag's
    name) or the newest version committed at or before ``to_timestamp``; exactly one of them."""
    if (to_version is None) == (to_timestamp is None):
        raise InvalidArgumentError("rollback needs exactly one of to_version and to_timestamp")
    if to_timestamp is not None:
        if not isinstance(to_timestamp, datetime.datetime):
            raise InvalidArgumentError(f"to_timestamp must be a datetime, got {to_timestamp!r}")
        at_ms = epoch_ms(to_timestamp, "to_timestamp")
        assert at_ms is not None
        return rollback_module.rollback_to_timestamp(spark, table, at_ms)
    if isinstance(to_version, str) and tags.NAME.fullmatch(to_version.strip()):
        return rollback_module.rollback_to_version(spark, table, tags.version_of(table, to_version.strip()))
    if isinstance(to_version, bool) or not isinstance(to_version, int):
        raise InvalidArgumentError(f"to_version must be a version number or a tag's name, got {to_version!r}")
    return rollback_module.rollback_to_version(spark, table, to_version)


def fast_forward(table: ArcticTable, *, to: str, branch: str = "main") -> FastForwardResult:
    """Move ``branch`` (default ``main``) to the head of branch ``to`` in both stores: a publish of
    ``to``'s commits, refused when ``branch`` has commits ``to`` lacks (nothing is merged)."""
    return branch_writes.fast_forward(table, branch, to)
