"""``spark.read.format("arctic").load("db.t")``: a version of a table, or its change feed, as a DataFrame.

- Without options: the current rows (equal to ``SELECT * FROM db.t``); ``versionAsOf`` /
  ``timestampAsOf``: the rows of that version (SQL's ``VERSION|TIMESTAMP AS OF``). Every version
  option takes a tag's name as well as a number.
- ``readChangeFeed=true`` with ``startingVersion`` (inclusive, as in Delta) or ``startingTimestamp``,
  and optionally ``endingVersion`` / ``endingTimestamp`` (inclusive; default the newest version):
  per key changed, its last change, with ``_change_type``, ``_change_version`` and
  ``_commit_timestamp``; with ``changeFeedMode=full`` every change of every version, as Delta's
  change data feed (table/reading/full_changes.py). SQL's ``VERSION BETWEEN v1 AND v2`` keeps ``(v1, v2]``: startingVersion
  ``s`` is ``BETWEEN s-1``.

Spark hands ``pushFilters`` the query's simple filters; they prune partitions, files, tree nodes
and row groups (``filters``), and all go back to Spark, which applies them to the merged rows.
Partitions are balanced node groups merged in Arrow (``partitions``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pyiceberg.expressions import AlwaysTrue
from pyspark.sql.datasource import DataSourceReader

from arctic_sql.datasource import filters as pushed
from arctic_sql.datasource import partitions
from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.table.files import storage
from arctic_sql.table.format import versions
from arctic_sql.table.reading import full_changes, tags
from arctic_sql.table.reading import time_travel as tt
from arctic_sql.table.reading.changes import Range, change_files, version_at
from arctic_sql.table.reading.scan import plan_read

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql.datasource import Filter, InputPartition
    from pyspark.sql.types import StructType

    from arctic_sql.datasource.read_options import ReadOptions
    from arctic_sql.datasource.source import CatalogSpec
    from arctic_sql.table.model.table import ArcticTable


class ArcticBatchReader(DataSourceReader):
    """Plans in ``partitions()`` (on the driver, in a Python worker); ``read()`` runs in the tasks."""

    def __init__(self, spec: CatalogSpec, table_name: str, options: ReadOptions, schema: StructType) -> None:
        self.spec, self.table_name, self.options, self.schema = spec, table_name, options, schema
        self.pushed: list[Filter] = []

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Keep the filters for pruning; hand every one back for Spark to apply to the rows."""
        for f in filters:
            self.pushed.append(f)
            yield f

    def partitions(self) -> list[InputPartition]:
        table = self.spec.load_table(self.table_name)
        history = versions.history(table.base, table.change)
        if self.options.read_change_feed:
            span = change_feed_range(table, history, self.options)
            return change_partitions(table, history, span, mode=self.options.change_feed_mode)
        version = version_as_of(table, history, self.options)
        schema = table.schema
        base_filter = pushed.row_filter(self.pushed, schema)
        change_filter = (
            pushed.row_filter(self.pushed, schema, set(table.primary_key)) if table.is_keyed else AlwaysTrue()
        )
        plan = plan_read(table, version, base_filter, change_filter, pushed.key_hashes(self.pushed, table))
        return partitions.merge_partitions(
            table, plan.base_files, plan.change_files, base_filter, change_filter
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        storage.configure(self.spec.storage())  # a task: this process may never have opened the catalog
        return partitions.read(partition, self.schema)


def version_as_of(table: ArcticTable, history: versions.History, options: ReadOptions) -> int | None:
    """The version ``versionAsOf``/``timestampAsOf`` name (checked as SQL's AS OF), None: the newest."""
    if options.tag is not None:
        return tt.checked_version(table, history, tags.version_of(table, options.tag))
    if options.version_as_of is not None:
        return tt.checked_version(table, history, options.version_as_of)
    if options.timestamp_as_of is not None:
        return tt.version_as_of_timestamp(table, history, options.timestamp_as_of)
    return None


def resolve_tags(table: ArcticTable, options: ReadOptions) -> ReadOptions:
    """``options`` with a tag's name in startingVersion/endingVersion replaced by its version."""
    named: dict[str, Any] = {}
    for field, option in (("starting_version", "startingVersion"), ("ending_version", "endingVersion")):
        value = getattr(options, field)
        if isinstance(value, str):
            try:
                named[field] = tags.version_of(table, value)
            except VersionNotFoundError as e:
                raise VersionNotFoundError(f"{option} '{value}': {e}") from None
    return dataclasses.replace(options, **named) if named else options


def first_change(table: ArcticTable, history: versions.History, starting_version: int, what: str) -> int:
    """The exclusive start ``starting_version - 1``, or the one-line error naming the oldest
    retained version when its changes have expired."""
    if starting_version - 1 < history.first_start:
        oldest = history.first_start + 1
        raise VersionNotFoundError(
            f"{what} {starting_version} of {table.identifier} has expired: the smallest {what} still readable "
            f"is {oldest} (available: {history.describe()})"
        )
    return starting_version - 1


def change_feed_range(table: ArcticTable, history: versions.History, options: ReadOptions) -> Range:
    """``(start, end]`` of a batch change feed: startingVersion inclusive, as Delta's;
    startingTimestamp: the changes committed at or after it; the end inclusive (default the newest)."""
    where = f"readChangeFeed of {table.identifier}"
    options = resolve_tags(table, options)
    if options.starting_timestamp is not None:
        start = tt.start_after(table, history, options.starting_timestamp, "startingTimestamp")
    else:
        assert isinstance(options.starting_version, int)  # resolve_tags turned a tag's name into its version
        start = first_change(table, history, options.starting_version, "startingVersion")
    end = history.latest
    if options.ending_version is not None:
        assert isinstance(options.ending_version, int)  # as starting_version
        end = options.ending_version
    elif options.ending_timestamp is not None:
        end = version_at(history, options.ending_timestamp) or 0
    if (
        isinstance(options.starting_version, int) and options.starting_version > end
    ):  # Delta's check, in the user's words
        if options.ending_version is not None:
            raise InvalidArgumentError(
                f"{where}: startingVersion {options.starting_version} is after endingVersion "
                f"{options.ending_version}"
            )
        if options.ending_timestamp is not None:
            raise InvalidArgumentError(
                f"{where}: startingVersion {options.starting_version} is after endingTimestamp "
                f"{tt.utc(options.ending_timestamp)}, which is at version {end} "
                f"(available: {history.describe()})"
            )
        raise VersionNotFoundError(
            f"{where}: startingVersion {options.starting_version} is after the newest "
            f"version, {history.latest} (available: {history.describe()})"
        )
    if start > end:
        kind = VersionNotFoundError if start > history.latest else InvalidArgumentError
        raise kind(
            f"{where}: it starts after version {start}, which is after its end, version {end} "
            f"(available: {history.describe()})"
        )
    return tt.range_of_versions(table, history, start, end, where)


def change_partitions(
    table: ArcticTable,
    history: versions.History,
    span: Range,
    *,
    skip_overwrites: bool = False,
    mode: str = full_changes.LATEST,
) -> list[InputPartition]:
    """The partitions of the changes in ``span``: per key its last change (``latest``), or every
    change per version with pre-images (``full``; on a table without a key every change is an
    insert, which ``latest`` gives)."""
    committed = {c.version: c.committed_at_ms for c in history.commits if span.start < c.version <= span.end}
    if mode == full_changes.FULL and table.is_keyed:
        plan = full_changes.plan_full(table, span, history, skip_overwrites=skip_overwrites)
        return partitions.full_change_partitions(table, plan, committed)
    if table.is_keyed and not table.merge_engine.newest_wins:
        # Its change rows are not the keys' new rows (the engine folds them): the full feed's plan
        # (each group's changes beside the state they start from) gives each key's folded row.
        plan = full_changes.plan_full(table, span, history, skip_overwrites=skip_overwrites)
        return partitions.full_change_partitions(table, plan, committed, latest=True)
    files = change_files(table, span, skip_overwrites=skip_overwrites, history=history)
    return partitions.change_partitions(table, files, committed)
