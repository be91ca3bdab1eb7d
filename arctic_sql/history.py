"""Table history for readers: time travel, incremental reads and the ``get_latest_*`` functions.

- ``VERSION AS OF v`` / ``FOR SYSTEM_VERSION AS OF v`` name a retained version;
  ``TIMESTAMP AS OF ts`` / ``FOR SYSTEM_TIME AS OF ts`` the newest version committed at or before
  ``ts`` (as in Iceberg: a timestamp after the newest commit reads the newest version).
- ``VERSION BETWEEN v1 AND v2`` / ``TIMESTAMP BETWEEN t1 AND t2`` read what changed in
  ``(v1, v2]``: start exclusive, end inclusive. On a primary-key table that is, per key changed in
  the range, its last change (``_change_type`` 'upsert' with the row, or 'delete' with the key) and
  ``_change_version``; on a table without a key, the rows appended (``_change_type`` 'insert').
  Only change data is read (the files each data commit added), never base files that optimizing
  wrote, so an incremental read is as cheap as the changes it returns. A range that crosses an
  INSERT OVERWRITE (or a rollback, or a copy-on-write DELETE/UPDATE of a table without a key) is
  an error: those replace rows without recording per-key changes. CREATE TABLE AS SELECT is the
  exception: its rows are all new, so they read as upserts (inserts) at its version.
- ``get_latest_version('db.t'[, n])`` and ``get_latest_timestamp('db.t'[, n])``: the n-th newest
  retained commit. They are replaced by literals before Spark sees a statement, so they work in
  every clause, in plain expressions and in CALL arguments.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from arctic_sql.catalog import ArcticTable, TableIdentifier
from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.format import versions
from arctic_sql.scan import FileEntry, ReadPlan, live_files

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot
    from pyspark.sql import DataFrame

    from arctic_sql.session import Session

LATEST_VERSION = "get_latest_version"
LATEST_TIMESTAMP = "get_latest_timestamp"
CHANGE_TYPE = "_change_type"
CHANGE_VERSION = "_change_version"
UPSERT, DELETE, INSERT = "upsert", "delete", "insert"
# Commits whose rows are all new: an incremental read may cross them.
_INITIAL_LOADS = frozenset({"create-as-select"})
_APPENDS = frozenset({"insert", "append", *_INITIAL_LOADS})


@dataclass(frozen=True)
class Range:
    """An incremental read's range of versions: ``(start, end]``."""

    start: int
    end: int


def _utc(micros: int) -> str:
    moment = datetime.datetime.fromtimestamp(micros / 1_000_000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds")


# get_latest_version / get_latest_timestamp --------------------------------------------------------
def nth_latest(session: Session, name: str, n: int) -> versions.Commit | None:
    """The n-th newest retained commit of table ``name`` (n = 1: the newest); None for an empty table."""
    table = session.catalog.load_table(TableIdentifier.parse(name, session.current_database))
    if n < 1:
        raise InvalidArgumentError(f"The commit number n of {table.identifier} must be 1 or more, got {n}")
    history = versions.history(table.base, table.change)
    if not history.commits:
        return None
    if n > len(history.commits):
        raise VersionNotFoundError(
            f"{table.identifier} has {len(history.commits)} retained versions, not {n} ({history.describe()})"
        )
    return history.commits[-n]


def _function_arguments(session: Session, call: exp.Anonymous) -> tuple[str, int]:
    what = call.name.lower()
    arguments = call.expressions
    if not 1 <= len(arguments) <= 2:
        raise InvalidArgumentError(f"{what}() takes a table name and an optional n, got {len(arguments)} arguments")
    values = [_constant(session, a, what) for a in arguments]
    if not isinstance(values[0], str):
        raise InvalidArgumentError(f"{what}() needs the table name as a string, e.g. {what}('db.t')")
    n = values[1] if len(values) == 2 else 1
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidArgumentError(f"{what}(): n must be a whole number, got {arguments[1].sql()}")
    return values[0], n


def _constant(session: Session, value: exp.Expression, what: str) -> object:
    if isinstance(value, exp.Literal):
        return value.this if value.is_string else int(value.this) if value.is_int else value.this
    from arctic_sql.parser import to_spark_sql

    rows = session.sql(f"SELECT {to_spark_sql(value)}").collect()
    return rows[0][0]


def _latest_version(session: Session, call: exp.Anonymous) -> int:
    commit = nth_latest(session, *_function_arguments(session, call))
    return commit.version if commit is not None else 0


def _latest_timestamp_ms(session: Session, call: exp.Anonymous) -> int:
    name, n = _function_arguments(session, call)
    commit = nth_latest(session, name, n)
    if commit is None:
        raise VersionNotFoundError(f"{name} has no commits yet: {LATEST_TIMESTAMP} has no value")
    return commit.committed_at_ms


def _is_call(node: exp.Expression, name: str) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() == name


def replace_functions(session: Session, expression: exp.Expression) -> exp.Expression:
    """``expression`` with every ``get_latest_version``/``get_latest_timestamp`` call replaced by its
    value (a copy), or ``expression`` itself when it has none."""
    calls = [n for n in expression.find_all(exp.Anonymous) if n.name.lower() in (LATEST_VERSION, LATEST_TIMESTAMP)]
    if not calls:
        return expression
    copy = expression.copy()
    for node in list(copy.find_all(exp.Anonymous)):
        if _is_call(node, LATEST_VERSION):
            node.replace(exp.Literal.number(_latest_version(session, node)))
        elif _is_call(node, LATEST_TIMESTAMP):
            node.replace(_timestamp_literal(_latest_timestamp_ms(session, node)))
    return copy


def _timestamp_literal(ms: int) -> exp.Expression:
    return exp.Anonymous(this="timestamp_millis", expressions=[exp.Literal.number(ms)])


# evaluating AS OF / BETWEEN values ---------------------------------------------------------------
def _version_value(session: Session, value: exp.Expression, where: str) -> int:
    if _is_call(value, LATEST_VERSION):
        return _latest_version(session, value)
    raw: object
    if isinstance(value, exp.Literal):
        raw = value.this
    else:
        from arctic_sql.parser import to_spark_sql

        raw = session.sql(f"SELECT try_cast(({to_spark_sql(value)}) AS BIGINT)").collect()[0][0]
    try:
        if raw is not None and not isinstance(raw, bool):
            return int(str(raw).strip())
    except ValueError:
        pass
    raise InvalidArgumentError(f"{where} needs a version number, got {value.sql()}")


def _timestamp_micros(session: Session, value: exp.Expression, where: str) -> int:
    """The instant ``value`` names, in microseconds since the epoch (strings in the session time zone)."""
    if _is_call(value, LATEST_TIMESTAMP):
        return _latest_timestamp_ms(session, value) * 1000
    if _is_call(value, "timestamp_millis") and isinstance(value.expressions[0], exp.Literal):
        return int(value.expressions[0].this) * 1000
    from arctic_sql.parser import to_spark_sql

    micros = session.sql(f"SELECT unix_micros(try_cast(({to_spark_sql(value)}) AS TIMESTAMP))").collect()[0][0]
    if micros is None:
        raise InvalidArgumentError(f"{where} needs a timestamp, got {value.sql()}")
    return int(micros)


def version_at(history: versions.History, micros: int) -> int | None:
    """The newest version committed at or before ``micros``; None when every retained commit is later."""
    at = [c.version for c in history.commits if c.committed_at_ms * 1000 <= micros]
    return max(at) if at else None


def _clause(node: exp.Version, table: ArcticTable) -> str:
    return f"{node.name.upper()} {node.text('kind').upper()} on {table.identifier}"


def version_as_of(session: Session, table: ArcticTable, node: exp.Version) -> int:
    """The version a ``VERSION|TIMESTAMP AS OF`` clause names, or VersionNotFoundError."""
    where = _clause(node, table)
    history = versions.history(table.base, table.change)
    value = node.args["expression"]
    if node.name.upper() == "TIMESTAMP":
        micros = _timestamp_micros(session, value, where)
        version = version_at(history, micros)
        if version is None:
            raise VersionNotFoundError(
                f"Timestamp {_utc(micros)} is before the oldest retained commit of {table.identifier} "
                f"(available: {history.describe()})"
            )
        return version
    version = _version_value(session, value, where)
    if version == 0 and not history.commits:
        return 0
    if not any(c.version == version for c in history.commits):
        state = "has expired" if 0 < version < history.oldest else "does not exist"
        raise VersionNotFoundError(
            f"Version {version} of {table.identifier} {state} (available: {history.describe()}; "
            f"every version is listed in {table.identifier}.history)"
        )
    return version


def version_range(session: Session, table: ArcticTable, node: exp.Version) -> Range:
    """The ``(start, end]`` a ``VERSION|TIMESTAMP BETWEEN`` clause names, checked against the history."""
    where = _clause(node, table)
    history = versions.history(table.base, table.change)
    low, high = node.args["expression"].expressions
    if node.name.upper() == "TIMESTAMP":
        t1, t2 = _timestamp_micros(session, low, where), _timestamp_micros(session, high, where)
        if t1 > t2:
            raise InvalidArgumentError(f"{where}: the start {_utc(t1)} is after the end {_utc(t2)}")
        bounds = []
        for micros in (t1, t2):
            version = version_at(history, micros)
            if version is None and not history.complete:
                raise VersionNotFoundError(
                    f"{where}: {_utc(micros)} is before the oldest retained commit, whose changes have "
                    f"expired (available: {history.describe()})"
                )
            bounds.append(version or 0)
        return Range(bounds[0], bounds[1])
    start, end = _version_value(session, low, where), _version_value(session, high, where)
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


# incremental reads -----------------------------------------------------------------------------
def _added_files(store: Table, snapshot: Snapshot, store_name: str, version: int) -> list[FileEntry]:
    """The files one data commit added, tagged with its version. A fast append's files carry the
    snapshot's own sequence number; every file it did not add carries an older one."""
    return [
        dataclasses.replace(f, sequence_number=version)
        for f in live_files(store, snapshot, store_name)
        if f.sequence_number == snapshot.sequence_number
    ]


def _crossing_error(table: ArcticTable, span: Range, commit: versions.Commit) -> VersionNotFoundError:
    return VersionNotFoundError(
        f"Incremental read of {table.identifier} over ({span.start}, {span.end}] crosses the "
        f"{commit.operation.upper()} at version {commit.version}, which replaced rows without per-key "
        f"changes; read ({commit.version}, {span.end}] for the changes after it, or VERSION AS OF "
        f"{commit.version} for the rows it wrote"
    )


def change_files(table: ArcticTable, span: Range) -> tuple[FileEntry, ...]:
    """The files holding the changes of the data commits in ``span``, each tagged with its version."""
    files: list[FileEntry] = []
    for commit in versions.data_commits(table.base, table.change):
        if not span.start < commit.version <= span.end:
            continue
        if commit.store == "change":
            assert table.change is not None
            snap = table.change.snapshot_by_id(commit.snapshot_id)
            files.extend(_added_files(table.change, snap, "change", commit.version))
        elif commit.operation in (_INITIAL_LOADS if table.is_keyed else _APPENDS):
            snap = table.base.snapshot_by_id(commit.snapshot_id)
            files.extend(_added_files(table.base, snap, "base", commit.version))
        else:
            raise _crossing_error(table, span, commit)
    return tuple(files)


def changes_between(session: Session, table: ArcticTable, span: Range) -> DataFrame:
    """The incremental read of ``span``: the table's columns, ``_change_type`` and ``_change_version``."""
    from pyspark.sql import functions as F

    from arctic_sql.reader import IS_DELETE, TXN, latest_changes, read_files

    files = change_files(table, span)
    columns = [F.col(f"`{f.name}`") for f in table.schema.fields]
    if table.is_keyed:
        plan = ReadPlan(span.end, table.schema, (), files, {}, None)
        if not files:
            empty = read_files(session.spark, table.schema, (), all_nullable=True)
            return empty.select(*columns, F.lit(UPSERT).alias(CHANGE_TYPE), F.lit(0).cast("long").alias(CHANGE_VERSION))
        latest = latest_changes(session.spark, table, plan)
        kind = F.when(F.col(IS_DELETE), F.lit(DELETE)).otherwise(F.lit(UPSERT))
        return latest.select(*columns, kind.alias(CHANGE_TYPE), F.col(TXN).alias(CHANGE_VERSION))
    return _appended_rows(session, table, files).select(*columns, F.lit(INSERT).alias(CHANGE_TYPE),
                                                        F.col(TXN).alias(CHANGE_VERSION))


def _appended_rows(session: Session, table: ArcticTable, files: tuple[FileEntry, ...]) -> DataFrame:
    """Rows of the appended files, each with the version that appended it (``_arctic_txn``)."""
    from pyspark.sql import functions as F

    from arctic_sql import storage
    from arctic_sql.reader import FILE, TXN, read_files

    rows = read_files(session.spark, table.schema, files)
    if not files:
        return rows.withColumn(TXN, F.lit(0).cast("long"))
    tags = session.spark.createDataFrame([(storage.spark_path(f.path), f.sequence_number) for f in files],
                                         f"{FILE} string, {TXN} long")
    return rows.withColumn(FILE, F.col("_metadata.file_path")).join(F.broadcast(tags), on=FILE).drop(FILE)
