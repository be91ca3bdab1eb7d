"""``spark.readStream.format("arctic").option("readChangeFeed", "true").load("db.t")``: a table's changes.

Offsets are table versions, as JSON: ``{"version": v, "table": id}`` means every change up to ``v``
of the table with that id was read (checkpoints written before the id was kept have none).
``{"version": -1}`` is the start of a stream that first reads the table's rows: its first
micro-batch is the newest version's rows as upserts (inserts on a table without a key), and every
later micro-batch the changes of the versions in ``(start, end]``: per key, its last change there,
with ``_change_type``, ``_change_version`` and ``_commit_timestamp`` (``changeFeedMode=full``: every
change of every version, with pre-images, as the batch change feed gives them). Optimizing commits are not
versions, so they produce nothing (they only move data).

``startingVersion`` (inclusive: a version or a tag's name) or ``startingTimestamp`` start from changes only;
``startingVersion="latest"`` after the newest version. As in Delta they count only for a new
checkpoint: a restarted query goes on from its checkpointed offset.

Rate limits take whole versions, at least one per micro-batch: ``maxVersionsPerTrigger``,
``maxFilesPerTrigger``, ``maxRowsPerTrigger``, ``maxBytesPerTrigger`` (files, rows and file bytes the
versions added; a soft limit, as in Delta). Spark passes the
reader's default read limit to ``latestOffset`` (also under ``Trigger.AvailableNow``, which freezes the
newest version in ``prepareForTriggerAvailableNow``); when it passes ``ReadAllAvailable`` instead,
everything available is read, as Spark asks.

A version that replaced rows without per-key changes (INSERT OVERWRITE, rollback) fails the stream
with a one-line error naming it, unless ``skipOverwrites=true`` (its effect is then not streamed).
Spark runs this reader in one long-lived Python process on the driver; ``read`` runs in the tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from arctic_sql.datasource import partitions
from arctic_sql.datasource.batch_read import change_partitions, first_change, resolve_tags
from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.table.files import storage
from arctic_sql.table.format import versions
from arctic_sql.table.reading import full_changes
from arctic_sql.table.reading import time_travel as tt
from arctic_sql.table.reading.changes import Range, carries_changes, commit_files
from arctic_sql.table.reading.scan import plan_read
from arctic_sql.table.records import consumers

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql.datasource import InputPartition
    from pyspark.sql.types import StructType

    from arctic_sql.datasource.read_options import ReadOptions
    from arctic_sql.datasource.source import CatalogSpec
    from arctic_sql.table.model.table import ArcticTable

SNAPSHOT = -1  # the offset before a stream's first batch of the table's rows
EMPTY = 0  # the version of a table before its first data commit: no rows
VERSION = "version"
TABLE = "table"  # the table's id (its base store's uuid): a checkpoint belongs to one table
NO_LIMIT = 2**31 - 1


class ArcticStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A table's change stream; offsets ``{"version": v, "table": id}``."""

    def __init__(self, spec: CatalogSpec, table_name: str, options: ReadOptions, schema: StructType) -> None:
        self.spec, self.table_name, self.options, self.schema = spec, table_name, options, schema
        self.target: int | None = None  # the newest version an availableNow run reads up to
        self._recorded: tuple[int, int] | None = None  # the consumer's last record: (version, at ms)
        self._initial: dict | None = None

    def _table(self) -> tuple[ArcticTable, versions.History]:
        table = self.spec.load_table(self.table_name)
        return table, versions.history(table.base, table.change)

    def initialOffset(self) -> dict:
        """Where a new checkpoint starts: a consumer's recorded progress, else the starting options.
        Spark asks again when it runs the first batch, after ``latestOffset`` recorded the consumer:
        the answer is the first one."""
        if self._initial is None:
            self._initial = self._initial_offset()
        return self._initial

    def _initial_offset(self) -> dict:
        table, history = self._table()
        if self.options.consumer_id is not None:
            known = consumers.find(table, self.options.consumer_id)
            if known is not None:
                _check_retained(table, history, known.version)
                consumers.record(table, known.consumer_id, known.version)  # live again: holds history back
                return _offset(table, known.version)
        offset = self._start(table, history)
        if offset[VERSION] != SNAPSHOT:  # a start from the table's rows is fixed by its first batch
            self._record(table, offset[VERSION])
        return offset

    def _start(self, table: ArcticTable, history: versions.History) -> dict:
        options = resolve_tags(table, self.options)
        if options.starting_latest:
            return _offset(table, history.latest)
        if options.starting_version is not None:
            # resolve_tags turned a tag's name into its version
            assert isinstance(options.starting_version, int)
            start = first_change(table, history, options.starting_version, "startingVersion")
            if start > history.latest:
                raise VersionNotFoundError(
                    f"startingVersion {options.starting_version} of {table.identifier} does not exist yet "
                    f'(newest version {history.latest}); use startingVersion "latest" to wait for new versions'
                )
            return _offset(table, start)
        if options.starting_timestamp is not None:
            return _offset(
                table, tt.start_after(table, history, options.starting_timestamp, "startingTimestamp")
            )
        return _offset(table, SNAPSHOT)

    def prepareForTriggerAvailableNow(self) -> None:
        _, history = self._table()
        self.target = history.latest

    def getDefaultReadLimit(self) -> ReadLimit:
        """A limit object when any rate option is set (Spark passes it back to ``latestOffset``,
        which applies the options): only ``ReadAllAvailable`` may mean "ignore them"."""
        if self.options.has_rate_limit:
            return ReadMaxFiles(self.options.max_files or NO_LIMIT)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        table, history = self._table()
        self._check_same(table, start)
        newest = history.latest if self.target is None else min(self.target, history.latest)
        begin = int(start[VERSION])
        if begin == SNAPSHOT:
            # The table's rows at ``newest``: one batch, whatever the limits. A consumer holds that
            # version from now on, so the batch can be replayed after a crash and the changes after it read.
            self._record(table, newest)
            return _offset(table, newest)
        _check_retained(table, history, begin)
        # Spark asks only once every batch up to ``begin`` was written (it runs one batch at a time,
        # and replays a fixed batch without asking): the consumer moves to ``begin``, which keeps
        # what the next batch reads even if it is replayed. This is also how the last batch of an
        # availableNow run gets recorded: Spark asks once more before it stops.
        self._record(table, begin)
        pending = [c for c in history.commits if begin < c.version <= newest]
        if not pending:
            return start
        return _offset(table, self._admit(table, pending, limit)[-1].version)

    def _record(self, table: ArcticTable, version: int) -> None:
        """Record the consumer at ``version``: when it moved, or to stay live while the stream idles
        (Spark asks for new data every few milliseconds; a record costs a write)."""
        if self.options.consumer_id is None:
            return
        now = consumers.now_ms()
        refresh_ms = table.settings.consumer_expiration_time * 60_000 // 4
        if (
            self._recorded is not None
            and self._recorded[0] == version
            and now - self._recorded[1] < refresh_ms
        ):
            return
        consumers.record(table, self.options.consumer_id, version)
        self._recorded = (version, now)

    def _check_same(self, table: ArcticTable, offset: dict) -> None:
        """Fail the stream, as Delta does, when the table is not the one its checkpoint read (dropped
        and created again: its versions start over) or its columns changed since the query started
        (rows would come out with a renamed column NULL, an added one missing). A restarted query
        reads every version in the table's columns as they are then."""
        from arctic_sql.datasource import read_options

        checkpointed = offset.get(TABLE)
        if checkpointed is not None and checkpointed != _table_id(table):
            raise InvalidArgumentError(
                f"The checkpoint of this stream read another table named {table.identifier} (id {checkpointed}; "
                f"now {_table_id(table)}): the table was dropped and created again; start the query from a "
                "new checkpoint"
            )
        now = read_options.output_schema(table, self.options)
        if _columns(now) != _columns(self.schema):
            raise InvalidArgumentError(
                f"The columns of {table.identifier} changed while the stream ran ({_shown(self.schema)} -> "
                f"{_shown(now)}); restart the query to read on in the new columns"
            )

    def _admit(
        self, table: ArcticTable, pending: list[versions.Commit], limit: ReadLimit
    ) -> list[versions.Commit]:
        """The versions of the next micro-batch: whole versions, at least one, within the rate
        limits; never past a version that replaced rows (its own batch fails, or skips it)."""
        options = self.options
        full = options.change_feed_mode == full_changes.FULL
        admitted: list[versions.Commit] = []
        files = rows = size = 0
        limited = not isinstance(limit, ReadAllAvailable)
        counted = (
            options.max_files is not None or options.max_rows is not None or options.max_bytes is not None
        )
        for commit in pending:
            if not carries_changes(table, commit):
                if admitted and (not options.skip_overwrites or full):
                    break  # stream what came before it first
                if not options.skip_overwrites:
                    raise _overwrite_error(table, commit)
                admitted.append(commit)
                if full:  # alone: the next batch's pre-images start from its rows
                    break
                continue
            if limited and counted:
                added = commit_files(table, commit)
                files += len(added)
                rows += sum(f.record_count for f in added)
                size += sum(f.file_size for f in added)
            over = limited and (
                (options.max_versions is not None and len(admitted) + 1 > options.max_versions)
                or (options.max_files is not None and files > options.max_files)
                or (options.max_rows is not None and rows > options.max_rows)
                or (options.max_bytes is not None and size > options.max_bytes)
            )
            if over and admitted:
                break
            admitted.append(commit)
        return admitted

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, finish = int(start[VERSION]), int(end[VERSION])
        if begin == finish:
            return []
        table, history = self._table()
        self._check_same(table, start)
        if begin == SNAPSHOT:
            if finish == EMPTY:
                # The table had no version when the batch was fixed: its rows were none. Later
                # versions are changes after 0, which the next batches read (a replay after a crash,
                # or a first commit landing between planning and reading, must not ask for version 0).
                return []
            return snapshot_partitions(table, history, finish, self.options.change_feed_mode)
        _check_retained(table, history, begin)
        return change_partitions(
            table,
            history,
            Range(begin, finish),
            skip_overwrites=self.options.skip_overwrites,
            mode=self.options.change_feed_mode,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        storage.configure(self.spec.storage())  # a task: this process may never have opened the catalog
        return partitions.read(partition, self.schema)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark calls this when it fixes the next batch (one batch late, and never for
        the last batch of an availableNow run), and ``latestOffset`` has recorded the consumer then."""


def _offset(table: ArcticTable, version: int) -> dict:
    return {VERSION: version, TABLE: _table_id(table)}


def _table_id(table: ArcticTable) -> str:
    return str(table.base.metadata.table_uuid)


def _columns(schema: StructType) -> list[tuple[str, str]]:
    return [(f.name.lower(), f.dataType.simpleString()) for f in schema.fields]


def _shown(schema: StructType) -> str:
    return ", ".join(
        f"{f.name} {f.dataType.simpleString()}" for f in schema.fields if not f.name.startswith("_")
    )


def snapshot_partitions(
    table: ArcticTable, history: versions.History, version: int, mode: str = full_changes.LATEST
) -> list[InputPartition]:
    """A stream's first batch: the rows of ``version``, each an upsert of that version (an insert on a
    table without a key, and in the full mode, as Delta's stream starts)."""
    plan = plan_read(table, version)
    committed = _committed_at(history, version)
    kind = partitions.UPSERT if table.is_keyed and mode == full_changes.LATEST else partitions.INSERT
    return partitions.merge_partitions(
        table, plan.base_files, plan.change_files, tagged=partitions.ChangeColumns(kind, version, committed)
    )


def _committed_at(history: versions.History, version: int) -> int:
    return next((c.committed_at_ms for c in history.commits if c.version == version), 0)


def _check_retained(table: ArcticTable, history: versions.History, start: int) -> None:
    """A stream whose next change has expired under it fails, naming the oldest retained version."""
    if start < history.first_start:
        raise VersionNotFoundError(
            f"The stream of {table.identifier} needs the changes after version {start}, which have expired: "
            f"only the changes after version {history.first_start} are retained; restart the query from a new "
            f"checkpoint (available: {history.describe()})"
        )


def _overwrite_error(table: ArcticTable, commit: versions.Commit) -> VersionNotFoundError:
    return VersionNotFoundError(
        f"The stream of {table.identifier} reached version {commit.version} ({commit.operation.upper()}), "
        f"that replaced rows without per-key changes: set skipOverwrites=true to skip such versions, or "
        f"restart from a new checkpoint to read the table's rows again"
    )
