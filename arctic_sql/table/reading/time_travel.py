"""Which version a time-travel or incremental read names, checked against the retained history.

The SQL clauses (``VERSION|TIMESTAMP AS OF``, ``VERSION|TIMESTAMP BETWEEN``) and the DataFrame options
(``versionAsOf``, ``timestampAsOf``, ``startingVersion``, ...) resolve through these functions, so both
give the same versions and the same one-line errors. Values arrive already evaluated: version
numbers, and instants in microseconds since the epoch.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.table.reading.changes import Range, version_at

if TYPE_CHECKING:
    from arctic_sql.table.format.versions import History
    from arctic_sql.table.model.table import ArcticTable


def utc(micros: int) -> str:
    moment = datetime.datetime.fromtimestamp(micros / 1_000_000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds")


def checked_version(table: ArcticTable, history: History, version: int) -> int:
    """``version`` when it is retained (0 on a table with no commit yet), else VersionNotFoundError."""
    if version == 0 and not history.commits:
        return 0
    if not any(c.version == version for c in history.commits):
        state = "has expired" if 0 < version < history.oldest else "does not exist"
        raise VersionNotFoundError(
            f"Version {version} of {table.identifier} {state} (available: {history.describe()}; "
            f"every version is listed in {table.identifier}.history)"
        )
    return version


def version_as_of_timestamp(table: ArcticTable, history: History, micros: int) -> int:
    """The newest version committed at or before ``micros`` (after the newest commit: the newest)."""
    version = version_at(history, micros)
    if version is None:
        raise VersionNotFoundError(
            f"Timestamp {utc(micros)} is before the oldest retained commit of {table.identifier} "
            f"(available: {history.describe()})"
        )
    return version


def range_of_versions(table: ArcticTable, history: History, start: int, end: int, where: str) -> Range:
    """``(start, end]`` when its changes are all retained; ``where`` names the clause or option."""
    if start > end:
        raise InvalidArgumentError(f"{where}: the start version {start} is after the end version {end}")
    if end > history.latest or start < 0:
        raise VersionNotFoundError(
            f"{where}: versions {start} to {end} are outside the table's history (available: {history.describe()})"
        )
    if start < history.first_start:
        raise VersionNotFoundError(
            f"{where}: changes after version {start} have expired; start at version {history.first_start} "
            f"or later (available: {history.describe()})"
        )
    return Range(start, end)


def start_after(table: ArcticTable, history: History, micros: int, what: str) -> int:
    """The exclusive start for changes committed at or after ``micros``: the newest version
    committed before it (0 when none and the history is complete). ``what`` names the bound."""
    before = version_at(history, micros - 1)
    if before is None and not history.complete:
        raise VersionNotFoundError(
            f"{what} {utc(micros)} of {table.identifier} is before the oldest retained commit, "
            f"whose changes have expired (available: {history.describe()})"
        )
    return before or 0


def range_of_timestamps(history: History, first: int, last: int, where: str) -> Range:
    """``(v1, v2]`` for the versions committed at or before the instants ``first`` and ``last``."""
    if first > last:
        raise InvalidArgumentError(f"{where}: the start {utc(first)} is after the end {utc(last)}")
    bounds = []
    for micros in (first, last):
        version = version_at(history, micros)
        if version is None and not history.complete:
            raise VersionNotFoundError(
                f"{where}: {utc(micros)} is before the oldest retained commit, whose changes have "
                f"expired (available: {history.describe()})"
            )
        bounds.append(version or 0)
    return Range(bounds[0], bounds[1])
