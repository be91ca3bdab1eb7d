"""INSERT, INSERT OVERWRITE, DELETE, UPDATE and MERGE on arctic tables.

On a primary-key table, INSERT/UPDATE/DELETE/MERGE each become one change-store transaction of
upsert and delete rows (at most one per key); INSERT OVERWRITE and CREATE TABLE AS SELECT write the
base store. On a table without a key, INSERT appends and DELETE/UPDATE rewrite the table's files
(copy-on-write).

Statements that read the table (DELETE, UPDATE, MERGE) read one version ``v`` and commit only if no
other data commit landed after ``v``; otherwise they run again on the new state (a few times, then
fail with CommitConflictError). This keeps concurrent writers from resurrecting or losing rows.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyiceberg.table import Table
from sqlglot import exp

from arctic_sql.table import commit, leases, writer
from arctic_sql.table.catalog import ArcticTable
from arctic_sql.errors import (
    CommitConflictError,
    InvalidArgumentError,
    NoSuchColumnError,
    PrimaryKeyViolationError,
    UnsupportedOperationError,
)
from arctic_sql.table.format import layout, versions
from arctic_sql.statements.merge_plan import MergePlan
from arctic_sql.statements.time_travel import at_version
from arctic_sql.parser import to_spark_sql
from arctic_sql.table.scan import latest_version, live_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext

log = logging.getLogger(__name__)

STATEMENT_ATTEMPTS = 5


class _StaleRead(Exception):
    """A commit landed after the version a statement read; the statement must run again."""


# helpers -----------------------------------------------------------------------------------------
def _target(ctx: StatementContext, node: exp.Expression) -> tuple[ArcticTable | None, exp.Table]:
    table_node = node.this if isinstance(node, exp.Schema) else node
    assert isinstance(table_node, exp.Table)
    return ctx.arctic_table(table_node), table_node


def _column(table: ArcticTable, name: str) -> str:
    for field in table.schema.fields:
        if field.name.lower() == name.lower():
            return field.name
    raise NoSuchColumnError(f"Column '{name}' does not exist in {table.identifier}")


def check_keys(df: DataFrame, keys: list[str], what: str) -> None:
    """Raise if a row of ``df`` has a null key or two rows share a key.

    One aggregation job answers both questions; only when it finds a problem does a second job
    fetch an example for the message.
    """
    from pyspark.sql import functions as F

    key_columns = [F.col(f"`{k}`") for k in keys]
    null = " OR ".join(f"`{k}` IS NULL" for k in keys)
    per_key = df.groupBy(*key_columns).agg(F.count(F.lit(1)).alias("_arctic_n"))
    summary = per_key.agg(F.max("_arctic_n").alias("most"), F.max(F.expr(null).cast("int")).alias("nulls"))
    most, nulls = summary.collect()[0]
    if not most or (most <= 1 and not nulls):
        return
    row = per_key.where(f"_arctic_n > 1 OR {null}").limit(1).collect()[0]
    shown = ", ".join(f"{k}={'NULL' if row[k] is None else repr(row[k])}" for k in keys)
    if any(row[k] is None for k in keys):
        raise PrimaryKeyViolationError(f"{what} writes a null primary key ({shown})")
    raise PrimaryKeyViolationError(f"{what} writes primary key ({shown}) {row['_arctic_n']} times in one statement")


def conform(table: ArcticTable, source: DataFrame, columns: list[str] | None,
            static: dict[str, exp.Expression] | None = None) -> DataFrame:
    """The source rows as the table's columns, in order, matched by position or by the column list."""
    from pyspark.sql import functions as F

    names = [f.name for f in table.schema.fields]
    static = {_column(table, k): v for k, v in (static or {}).items()}
    targets = [_column(table, c) for c in columns] if columns else [n for n in names if n not in static]
    if len(set(targets)) != len(targets):
        raise InvalidArgumentError(f"INSERT into {table.identifier} names a column twice")
    if len(source.columns) != len(targets):
        raise InvalidArgumentError(
            f"INSERT into {table.identifier} has {len(source.columns)} values per row but "
            f"{len(targets)} target columns"
        )
    renamed = source.toDF(*[f"_arctic_in_{i}" for i in range(len(targets))])
    by_target = {t: F.col(f"_arctic_in_{i}") for i, t in enumerate(targets)}
    for name, value in static.items():
        by_target[name] = F.expr(to_spark_sql(value))
    required = {table.schema.find_column_name(i) for i in table.schema.identifier_field_ids}
    required |= {f.name for f in table.schema.fields if f.required}
    missing = [n for n in required if n not in by_target]
    if missing:
        raise InvalidArgumentError(f"INSERT into {table.identifier} gives no value for column '{missing[0]}'")
    return renamed.select(*[(by_target.get(n, F.lit(None))).alias(n) for n in names])


def _changes_frame(
    table: ArcticTable, upserts: DataFrame | None, deletes: DataFrame | None, changes: DataFrame | None
) -> DataFrame:
    from pyspark.sql import functions as F

    schema = table.schema
    frames = [] if changes is None else [writer.align(changes, schema, all_nullable=True)]
    if upserts is not None:
        frames.append(writer.align(upserts, schema, all_nullable=True).withColumn(layout.OP_COLUMN,
                                                                                  F.lit(layout.UPSERT)))
    if deletes is not None:
        keyed = set(table.primary_key)
        full = deletes.select(*[F.col(f"`{f.name}`") if f.name in keyed else F.lit(None).alias(f.name)
                                for f in schema.fields])
        frames.append(writer.align(full, schema, all_nullable=True).withColumn(layout.OP_COLUMN,
                                                                               F.lit(layout.DELETE)))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def write_changes(
    ctx: StatementContext,
    table: ArcticTable,
    *,
    upserts: DataFrame | None = None,
    deletes: DataFrame | None = None,
    changes: DataFrame | None = None,
    operation: str,
    read_version: int | None = None,
) -> int | None:
    """Check, write and commit one change-store transaction; return its number (None if empty).

    ``upserts`` hold whole rows, ``deletes`` the keys to delete, ``changes`` rows of both kinds
    told apart by an ``arctic_op`` column.
    """
    from pyspark import StorageLevel

    with leases.writing(table, operation):
        changes = _changes_frame(table, upserts, deletes, changes)
        # A statement that read the table (read_version) would compute that read twice, once for the
        # key check and once for the write: keep its result. A plain source is cheaper to read again.
        if read_version is not None:
            changes = changes.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            check_keys(changes, table.primary_key, f"{operation.upper()} into {table.identifier}")
            paths = writer.write_files(changes, table, store="change")
        finally:
            changes.unpersist()
        if not paths:
            return None
        validate = None
        if read_version is not None:
            def validate(change_store: Table) -> None:
                table.base.refresh()
                commits = versions.data_commits(table.base, change_store)
                if commits and commits[-1].version > read_version:
                    raise _StaleRead()
        return commit.commit_change(table, paths, operation, validate=validate)


def overwrite_rows(ctx: StatementContext, table: ArcticTable, rows: DataFrame, operation: str) -> None:
    """Replace the partitions ``rows`` fall in (the whole table if unpartitioned) with ``rows``."""
    with leases.writing(table, operation):
        data = writer.align(rows, table.schema)
        if table.primary_key:
            check_keys(data, table.primary_key, f"{operation.upper()} into {table.identifier}")
        paths = writer.write_files(data, table, store="base")
        new_files = commit.data_files(table.base, paths)
        spec, schema = table.spec, table.schema
        from arctic_sql.table.format.partitioning import partition_path

        affected = {partition_path(spec, schema, f.partition) for f in new_files}
        if not spec.fields:
            affected = {""}
        if not affected:
            return
        txn = commit.reserve_transaction(table, operation) if table.is_keyed else None

        def build(store: Table) -> commit.BaseChange:
            current = store.current_snapshot()
            old = [f.data_file for f in live_files(store, current, "base") if f.partition in affected]
            marks = versions.watermarks_of(current)
            summary = {versions.OPERATION: operation}
            if txn is not None:
                marks.update({p: txn for p in affected})
                summary[versions.TXN] = str(txn)
            return commit.BaseChange(delete=old, add=new_files, watermarks=marks, summary=summary)

        commit.commit_base(table, build, paths)


def append_rows(ctx: StatementContext, table: ArcticTable, rows: DataFrame, operation: str) -> None:
    """Append rows to a table without a primary key."""
    with leases.writing(table, operation):
        paths = writer.write_files(writer.align(rows, table.schema), table, store="base")
        if not paths:
            return
        new_files = commit.data_files(table.base, paths)
        commit.commit_base(
            table, lambda store: commit.BaseChange(add=new_files, summary={versions.OPERATION: operation}), paths
        )


def rewrite_table(ctx: StatementContext, table: ArcticTable, build_rows, operation: str) -> None:  # noqa: ANN001
    """Copy-on-write for tables without a key: replace every file with ``build_rows(version)``."""

    def once(version: int) -> None:
        snapshot = table.base.current_snapshot()
        read_id = snapshot.snapshot_id if snapshot else None
        paths = writer.write_files(writer.align(build_rows(version), table.schema), table, store="base")
        new_files = commit.data_files(table.base, paths)

        def build(store: Table) -> commit.BaseChange:
            current = store.current_snapshot()
            if (current.snapshot_id if current else None) != read_id:
                raise _StaleRead()
            old = [f.data_file for f in live_files(store, current, "base")]
            return commit.BaseChange(delete=old, add=new_files, summary={versions.OPERATION: operation})

        commit.commit_base(table, build, paths)

    with leases.writing(table, operation):
        _retrying(table, operation, once)


def _retrying(table: ArcticTable, operation: str, attempt_once) -> None:  # noqa: ANN001
    for attempt in range(STATEMENT_ATTEMPTS):
        table.base.refresh()
        if table.change is not None:
            table.change.refresh()
        try:
            attempt_once(latest_version(table))
            return
        except _StaleRead:
            log.info("%s on %s read a stale version; running it again (%d)", operation, table.identifier,
                     attempt + 1)
    raise CommitConflictError(f"{operation.upper()} on {table.identifier} kept conflicting with other writers")


# statements --------------------------------------------------------------------------------------
def insert(ctx: StatementContext, expression: exp.Insert, text: str) -> DataFrame | None:
    table, table_node = _target(ctx, expression.this)
    if table is None:
        return None
    columns = [c.name for c in expression.this.expressions] if isinstance(expression.this, exp.Schema) else None
    static = {}
    partition = table_node.args.get("partition")
    if partition is not None:
        for item in partition.expressions:
            if not isinstance(item, exp.EQ):
                raise UnsupportedOperationError("INSERT ... PARTITION needs column = value for every column given")
            static[item.this.name] = item.expression
    query_node = expression.expression
    source = ctx.run_spark(query_node, to_spark_sql(query_node))
    rows = conform(table, source, columns, static)
    if expression.args.get("overwrite"):
        overwrite_rows(ctx, table, rows, "overwrite")
    elif table.is_keyed:
        write_changes(ctx, table, upserts=rows, deletes=None, operation="insert")
    else:
        append_rows(ctx, table, rows, "insert")
    return ctx.ok()


def _select_from_target(ctx: StatementContext, table_node: exp.Table, version: int, projections, where):
    select = exp.select(*projections).from_(at_version(table_node, version))
    if where is not None:
        select = select.where(where)
    return ctx.run_spark(select, to_spark_sql(select))


def delete(ctx: StatementContext, expression: exp.Delete, text: str) -> DataFrame | None:
    table, table_node = _target(ctx, expression.this)
    if table is None:
        return None
    where = expression.args.get("where")
    condition = where.this if where is not None else None
    if table.is_keyed:
        keys = [exp.column(k, quoted=True) for k in table.primary_key]

        def once(version: int) -> None:
            doomed = _select_from_target(ctx, table_node, version, keys, condition)
            write_changes(ctx, table, upserts=None, deletes=doomed, operation="delete", read_version=version)

        _retrying(table, "delete", once)
    else:
        keep = exp.not_(exp.func("coalesce", condition, exp.false())) if condition is not None else exp.false()
        rewrite_table(ctx, table,
                      lambda v: _select_from_target(ctx, table_node, v, [exp.Star()], keep), "delete")
    return ctx.ok()


def update(ctx: StatementContext, expression: exp.Update, text: str) -> DataFrame | None:
    table, table_node = _target(ctx, expression.this)
    if table is None:
        return None
    assignments: dict[str, exp.Expression] = {}
    for item in expression.expressions:
        name = _column(table, item.this.name)
        if name in table.primary_key:
            raise InvalidArgumentError(f"UPDATE cannot change primary key column '{name}' of {table.identifier}")
        assignments[name] = item.expression
    where = expression.args.get("where")
    condition = where.this if where is not None else None
    if table.is_keyed:
        projections = [exp.alias_(assignments.get(f.name, exp.column(f.name, quoted=True)), f.name, quoted=True)
                       for f in table.schema.fields]

        def once(version: int) -> None:
            rows = _select_from_target(ctx, table_node, version, projections, condition)
            write_changes(ctx, table, upserts=rows, deletes=None, operation="update", read_version=version)

        _retrying(table, "update", once)
    else:
        hit = exp.func("coalesce", condition, exp.false()) if condition is not None else exp.true()
        projections = [
            exp.alias_(exp.If(this=hit, true=value, false=exp.column(name, quoted=True)), name, quoted=True)
            for name, value in ((f.name, assignments.get(f.name, exp.column(f.name, quoted=True)))
                                for f in table.schema.fields)
        ]
        rewrite_table(ctx, table,
                      lambda v: _select_from_target(ctx, table_node, v, projections, None), "update")
    return ctx.ok()


def merge(ctx: StatementContext, expression: exp.Merge, text: str) -> DataFrame | None:
    table, table_node = _target(ctx, expression.this)
    if table is None:
        return None
    if not table.is_keyed:
        raise UnsupportedOperationError(f"MERGE INTO needs a table with a primary key; {table.identifier} has none")
    plan = MergePlan.of(expression, table)

    def once(version: int) -> None:
        changes, blind = plan.changes(ctx, table_node, version)
        write_changes(ctx, table, changes=changes, operation="merge", read_version=None if blind else version)

    _retrying(table, "merge", once)
    return ctx.ok()
