"""INSERT, INSERT OVERWRITE, DELETE, UPDATE and MERGE on arctic tables.

On a primary-key table, INSERT/UPDATE/DELETE/MERGE each become one change-store transaction of
upsert and delete rows (at most one per key); INSERT OVERWRITE and CREATE TABLE AS SELECT write the
base store. On a table without a key, INSERT appends and DELETE/UPDATE rewrite the table's files
(copy-on-write).

Statements that read the table (DELETE, UPDATE, MERGE) read one version ``v`` and commit only if no
other data commit landed after ``v``; otherwise they run again on the new state (table/writing/base_rows.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError, NoSuchColumnError, UnsupportedOperationError
from arctic_sql.parser import to_spark_sql
from arctic_sql.parser.statements import SchemaEvolvingInsert, SchemaEvolvingMerge
from arctic_sql.statements import runner
from arctic_sql.statements.merge_plan import MergePlan
from arctic_sql.statements.show import matches, partition_filter
from arctic_sql.statements.time_travel import at_version
from arctic_sql.table.format.versions import Operation
from arctic_sql.table.model.merge_engine import Engine
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.writing import base_rows, change_rows, schema_evolution

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext


# helpers -----------------------------------------------------------------------------------------
def _target(ctx: StatementContext, node: exp.Expression) -> tuple[ArcticTable | None, exp.Table]:
    table_node = node.this if isinstance(node, exp.Schema) else node
    assert isinstance(table_node, exp.Table)
    return ctx.arctic_table(table_node, writes=True), table_node


def _column(table: ArcticTable, name: str) -> str:
    for field in table.schema.fields:
        if field.name.lower() == name.lower():
            return field.name
    raise NoSuchColumnError(f"Column '{name}' does not exist in {table.identifier}")


def conform(
    table: ArcticTable,
    source: DataFrame,
    columns: list[str] | None,
    static: dict[str, exp.Expression] | None = None,
) -> DataFrame:
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


# statements --------------------------------------------------------------------------------------
def insert(ctx: StatementContext, expression: exp.Insert, text: str) -> DataFrame | None:
    table, table_node = _target(ctx, expression.this)
    if table is None:
        return None
    columns = (
        [c.name for c in expression.this.expressions] if isinstance(expression.this, exp.Schema) else None
    )
    static = {}
    partition = table_node.args.get("partition")
    if partition is not None:
        partition_columns = {
            (table.schema.find_column_name(f.source_id) or "").lower() for f in table.spec.fields
        }
        for item in partition.expressions:
            name = (
                item.this.name if isinstance(item, exp.EQ) else item.name
            )  # PARTITION (region): from the query
            if name.lower() not in partition_columns:
                raise InvalidArgumentError(
                    f"INSERT ... PARTITION ({name}): {name} is not a partition column of {table.identifier}"
                )
            if isinstance(item, exp.EQ):
                static[name] = item.expression
    if expression.args.get("where") is not None:
        raise UnsupportedOperationError(
            f"INSERT INTO ... REPLACE WHERE is not supported on {table.identifier}: "
            "DELETE the rows, then INSERT, or use MERGE INTO"
        )
    query_node = with_ctes(expression, expression.expression)
    source = runner.run_spark(ctx, query_node, to_spark_sql(query_node))
    if expression.args.get("by_name"):
        columns = source.columns
    if isinstance(expression, SchemaEvolvingInsert) or table.settings.write_schema_auto_merge:
        if _evolve_for_insert(table, source, columns, static):
            table, table_node = _target(ctx, expression.this)
            assert table is not None  # the table it was a moment ago, evolved
    rows = conform(table, source, columns, static)
    if expression.args.get("overwrite"):
        base_rows.overwrite_rows(table, rows, Operation.OVERWRITE, _named_partition(table, partition))
    elif table.is_keyed:
        change_rows.write_changes(table, upserts=rows, deletes=None, operation=Operation.INSERT)
    else:
        base_rows.append_rows(table, rows, Operation.INSERT)
    return ctx.ok()


def _evolve_for_insert(
    table: ArcticTable, source: DataFrame, columns: list[str] | None, static: dict[str, exp.Expression]
) -> bool:
    """INSERT WITH SCHEMA EVOLUTION, as Spark's: by position, the query's columns past the table's
    become new columns under their own names; by name or a column list, names the table lacks do;
    types the query carries wider widen the table. The INSERT is checked first (conform: no job),
    so one refused changes nothing. Whether the table changed."""
    from pyspark.sql.types import StructField, StructType

    fields = source.schema.fields
    if columns is not None:
        if len(columns) != len(fields):
            raise InvalidArgumentError(
                f"INSERT into {table.identifier} has {len(fields)} values per row but "
                f"{len(columns)} target columns"
            )
        named = [StructField(name, f.dataType) for name, f in zip(columns, fields, strict=True)]
    else:
        given = {_column(table, k) for k in static}
        targets = [f.name for f in table.schema.fields if f.name not in given]
        named = [
            StructField(targets[i] if i < len(targets) else f.name, f.dataType) for i, f in enumerate(fields)
        ]
    added, widened = schema_evolution.incoming(table, StructType(named))
    if not added and not widened:
        return False
    new = {name.lower() for name, _ in added}
    known = [i for i, f in enumerate(named) if f.name.lower() not in new]
    positional = source.toDF(*[f"_arctic_in_{i}" for i in range(len(fields))])  # names may repeat
    conform(
        table,
        positional.select(*[f"_arctic_in_{i}" for i in known]),
        None if columns is None else [columns[i] for i in known],
        static,
    )
    schema_evolution.add_and_widen(table, added, widened)
    return True


def _named_partition(table: ArcticTable, partition: exp.Expression | None) -> Callable[[str], bool] | None:
    """The partition ``PARTITION (k = v, ...)`` names in full, which INSERT OVERWRITE replaces even
    when the query gives it no row (as Spark does); None when it names none or only some columns."""
    if partition is None or not all(isinstance(i, exp.EQ) for i in partition.expressions):
        return None
    if {i.this.name.lower() for i in partition.expressions} != {f.name.lower() for f in table.spec.fields}:
        return None
    wanted = partition_filter(table, partition)
    return lambda path: matches(path, wanted)


def with_ctes(statement: exp.Expression, query: exp.Expression) -> exp.Expression:
    """``query`` under the CTEs of ``WITH c AS (...) INSERT/UPDATE/DELETE/MERGE ...``, which the
    statement's parts may name (the query's own CTEs follow, and may name them too)."""
    ctes = statement.args.get("with_")
    if ctes is None:
        return query
    if not isinstance(query, exp.Select | exp.SetOperation):
        # VALUES (not a Query to sqlglot's types) has subquery() too.
        query = exp.select(exp.Star()).from_(query.copy().subquery("_arctic_values"))  # type: ignore[attr-defined]
    query = query.copy()
    ctes = ctes.copy()
    own = query.args.get("with_")
    if own is not None:
        ctes.set("expressions", [*ctes.expressions, *own.expressions])
    query.set("with_", ctes)
    return query


def _select_from_target(
    ctx: StatementContext, statement: exp.Expression, table_node: exp.Table, version: int, projections, where
):  # noqa: ANN001
    select = exp.select(*projections).from_(at_version(table_node, version))
    if where is not None:
        select = select.where(where)
    query = with_ctes(statement, select)
    return runner.run_spark(ctx, query, to_spark_sql(query))


def _condition(expression: exp.Expression) -> exp.Expression | None:
    where = expression.args.get("where")
    return where.this if where is not None else None


def deleted_keys(
    ctx: StatementContext, expression: exp.Delete, table: ArcticTable, table_node: exp.Table, version: int
) -> DataFrame:
    """The keys a DELETE on a keyed table removes: its WHERE over the version it read. A WHERE that
    pins the key (``k = v``, ``k IN (...)``, AND-ed with anything) is a point lookup
    (statements/runner.py): only those keys' tree nodes and the files whose bounds hold them are read."""
    keys = [exp.column(k, quoted=True) for k in table.primary_key]
    return _select_from_target(ctx, expression, table_node, version, keys, _condition(expression))


def updated_rows(
    ctx: StatementContext,
    expression: exp.Update,
    table: ArcticTable,
    table_node: exp.Table,
    version: int,
    assignments: dict[str, exp.Expression],
) -> DataFrame:
    """The whole new rows an UPDATE on a keyed table writes, read as :func:`deleted_keys` reads."""
    projections = [
        exp.alias_(assignments.get(f.name, exp.column(f.name, quoted=True)), f.name, quoted=True)
        for f in table.schema.fields
    ]
    return _select_from_target(ctx, expression, table_node, version, projections, _condition(expression))


def delete(ctx: StatementContext, expression: exp.Delete, text: str) -> DataFrame | None:
    table, table_node = _target(ctx, expression.this)
    if table is None:
        return None
    condition = _condition(expression)
    if table.is_keyed:

        def once(version: int) -> None:
            doomed = deleted_keys(ctx, expression, table, table_node, version)
            change_rows.write_changes(
                table, upserts=None, deletes=doomed, operation=Operation.DELETE, read_version=version
            )

        base_rows.retrying(table, Operation.DELETE, once)
    else:
        keep = (
            exp.not_(exp.func("coalesce", condition, exp.false())) if condition is not None else exp.false()
        )
        base_rows.rewrite_table(
            table,
            lambda v: _select_from_target(ctx, expression, table_node, v, [exp.Star()], keep),
            Operation.DELETE,
        )
    return ctx.ok()


def refuse_update_of_a_folding_table(table: ArcticTable, what: str) -> None:
    """An update writes the key's whole new row: a first-row table would drop it and an aggregation
    table would fold it in as one more input (a sum would add the old value to itself), so both are
    refused, as Paimon refuses them."""
    engine = table.merge_engine.engine
    if engine is Engine.FIRST_ROW:
        raise UnsupportedOperationError(
            f"{what} of {table.identifier}: a first-row table keeps each key's first row"
        )
    if engine is Engine.AGGREGATION:
        raise UnsupportedOperationError(
            f"{what} of {table.identifier}: an aggregation table folds every row written into the stored one; "
            "INSERT what to add"
        )


def update(ctx: StatementContext, expression: exp.Update, text: str) -> DataFrame | None:
    table, table_node = _target(ctx, expression.this)
    if table is None:
        return None
    assignments: dict[str, exp.Expression] = {}
    for item in expression.expressions:
        name = _column(table, item.this.name)
        if name in assignments:
            raise InvalidArgumentError(f"UPDATE of {table.identifier} sets column '{name}' twice")
        if name in table.primary_key:
            raise InvalidArgumentError(
                f"UPDATE cannot change primary key column '{name}' of {table.identifier}"
            )
        assignments[name] = item.expression
    if table.is_keyed:
        refuse_update_of_a_folding_table(table, "UPDATE")

        def once(version: int) -> None:
            rows = updated_rows(ctx, expression, table, table_node, version, assignments)
            change_rows.write_changes(
                table, upserts=rows, deletes=None, operation=Operation.UPDATE, read_version=version
            )

        base_rows.retrying(table, Operation.UPDATE, once)
    else:
        condition = _condition(expression)
        hit = exp.func("coalesce", condition, exp.false()) if condition is not None else exp.true()
        projections = [
            exp.alias_(exp.If(this=hit, true=value, false=exp.column(name, quoted=True)), name, quoted=True)
            for name, value in (
                (f.name, assignments.get(f.name, exp.column(f.name, quoted=True)))
                for f in table.schema.fields
            )
        ]
        base_rows.rewrite_table(
            table,
            lambda v: _select_from_target(ctx, expression, table_node, v, projections, None),
            Operation.UPDATE,
        )
    return ctx.ok()


def merge(ctx: StatementContext, expression: exp.Merge, text: str) -> DataFrame | None:
    table, table_node = _target(ctx, expression.this)
    if table is None:
        return None
    if not table.is_keyed:
        raise UnsupportedOperationError(
            f"MERGE INTO needs a table with a primary key; {table.identifier} has none"
        )
    if expression.args.get("with_") is not None:  # USING may name a CTE: read the source under them
        using = expression.args["using"]
        source = exp.Subquery(
            this=with_ctes(expression, exp.select(exp.Star()).from_(using.copy())),
            alias=exp.TableAlias(this=exp.to_identifier(using.alias_or_name)),
        )
        expression = expression.copy()
        expression.set("using", source)
        expression.set("with_", None)
    whens = expression.args["whens"].expressions
    if any(w.args.get("matched") and isinstance(w.args.get("then"), exp.Update) for w in whens):
        refuse_update_of_a_folding_table(table, "MERGE ... WHEN MATCHED THEN UPDATE")
    plan = MergePlan.of(expression, table)
    if isinstance(expression, SchemaEvolvingMerge) or table.settings.write_schema_auto_merge:
        source_schema = plan.source_schema(ctx)
        if source_schema is not None:
            added, widened = schema_evolution.incoming(table, source_schema)
            schema_evolution.add_and_widen(table, added, widened)
            if added or widened:  # the plan's columns are the table's: plan again on the new schema
                table, table_node = _target(ctx, expression.this)
                assert table is not None  # the table it was a moment ago, evolved
                plan = MergePlan.of(expression, table)
            given = {f.name.lower() for f in source_schema.fields}
            plan = replace(plan, missing=frozenset(c for c in plan.columns if c.lower() not in given))

    plan = plan.carrying(ctx, table.merge_engine.sequence)
    blind = plan.blind_changes(ctx)

    def once(version: int) -> None:
        nonlocal blind
        if blind is not None:
            try:
                change_rows.write_changes(table, changes=blind, operation=Operation.MERGE)
                return
            except change_rows.Refused:  # a row's outcome depends on the target: read it
                blind = None
        keys = plan.source_keys(ctx)
        changes = plan.changes_by_lookup(ctx, table, version, keys)
        small = changes is not None
        if changes is None:
            changes = plan.joined_changes(ctx, table_node, version, keys)
        change_rows.write_changes(
            table, changes=changes, operation=Operation.MERGE, read_version=version, small=small
        )

    base_rows.retrying(table, Operation.MERGE, once)
    return ctx.ok()
