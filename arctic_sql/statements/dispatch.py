"""Which handler runs a parsed statement: the one registered for its node type, else Spark.

A handler is ``handler(ctx, expression, text) -> DataFrame | None``; None hands the statement to
Spark after all (a CREATE of a plain Spark table, an INSERT into one, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from arctic_sql import procedures
from arctic_sql.errors import (
    ArcticError,
    InvalidArgumentError,
    NoSuchDatabaseError,
    NoSuchTableError,
    UnsupportedOperationError,
)
from arctic_sql.optimizer.process import OUTPUT_SCHEMA, optimize
from arctic_sql.parser import statements
from arctic_sql.spark import translate
from arctic_sql.statements import clones, ddl, dml, materialized_views, runner, show, truncate
from arctic_sql.statements.metadata_tables import metadata_table
from arctic_sql.table.model.results import output_row

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext

# A handler takes the statement class it is registered for (a subclass of exp.Expression).
Handler = Callable[["StatementContext", Any, str], "DataFrame | None"]


def execute(ctx: StatementContext, expression: exp.Expression, text: str) -> DataFrame:
    """Run one statement; Spark's errors become arctic errors here, once."""
    try:
        handler = HANDLERS.get(type(expression))
        result = handler(ctx, expression, text) if handler is not None else None
        return result if result is not None else runner.run_spark(ctx, expression, text)
    except ArcticError:
        raise
    except Exception as e:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        if isinstance(e, (PySparkException, Py4JError)):
            raise translate(e) from e
        raise


def _use(ctx: StatementContext, expression: exp.Use, text: str) -> DataFrame:
    name = expression.this.name if expression.this is not None else ""
    if not ctx.catalog.database_exists(name):
        raise NoSuchDatabaseError(f"Database '{name}' does not exist")
    ctx.current_database = name.lower()
    if ctx.spark.catalog.databaseExists(name):
        ctx.spark.catalog.setCurrentDatabase(name)
    return ctx.ok()


def _describe_history(ctx: StatementContext, expression: statements.DescribeHistory, text: str) -> DataFrame:
    """``DESCRIBE HISTORY db.t``: the same rows as ``SELECT * FROM db.t.history``."""

    table = ctx.arctic_table(expression.this)
    if table is None:
        raise NoSuchTableError(f"Table or view not found: {expression.this.sql()}")
    return metadata_table(ctx, table, "history")


def _call(ctx: StatementContext, expression: statements.Call, text: str) -> DataFrame:

    return procedures.call(ctx, expression)


def _compact(ctx: StatementContext, expression: statements.CompactTable, text: str) -> DataFrame:
    """``ALTER TABLE t COMPACT MINOR|MAJOR|FULL`` (MaxCompute): ``CALL system.optimize`` in that mode."""

    table = ctx.arctic_table(expression.this)
    if table is None:
        raise NoSuchTableError(f"Table {expression.this.sql(dialect='spark')} does not exist")
    results = optimize(ctx.spark, table, str(expression.args["kind"]).lower())
    return ctx.result([output_row(r) for r in results], OUTPUT_SCHEMA)


def _table_command(ctx: StatementContext, expression: exp.Expression, text: str) -> DataFrame | None:
    """CACHE, UNCACHE, REFRESH and ANALYZE TABLE naming an arctic table or view (Spark's otherwise).

    Every statement already reads an arctic table's newest version, so REFRESH and UNCACHE have
    nothing to do; caching or analysing the table itself would pin one version under its name.
    """
    if isinstance(expression, exp.Cache) and expression.expression is not None:
        return None  # CACHE TABLE name AS query: Spark caches the query; its arctic tables are read
    nodes = expression.args.get("tables") or [expression.this]
    arctic = [n for n in nodes if isinstance(n, exp.Table) and _is_arctic(ctx, n)]
    if not arctic:
        return None
    if isinstance(expression, (exp.Refresh, exp.Uncache)):
        return ctx.ok()
    name = ".".join(p.name for p in arctic[0].parts)
    if isinstance(expression, exp.Cache):
        raise UnsupportedOperationError(
            f"CACHE TABLE {name}: an arctic table changes with every commit; cache a "
            f"query of it instead: CACHE TABLE name AS SELECT * FROM {name}"
        )
    raise UnsupportedOperationError(
        f"ANALYZE TABLE {name}: arctic tables are planned from their own metadata "
        "(file sizes, row counts and column bounds), which every commit keeps"
    )


def _create(ctx: StatementContext, expression: exp.Create, text: str) -> DataFrame | None:
    properties = expression.args.get("properties")
    if properties is not None and any(
        isinstance(p, exp.MaterializedProperty) for p in properties.expressions
    ):
        return materialized_views.create(ctx, expression)
    return ddl.create(ctx, expression, text)


def _drop(ctx: StatementContext, expression: exp.Drop, text: str) -> DataFrame | None:
    if not expression.args.get("materialized"):
        return ddl.drop(ctx, expression, text)
    targets = expression.args.get("tables") or [expression.this]
    if len(targets) != 1:
        raise InvalidArgumentError("DROP takes one name at a time")
    return materialized_views.drop(ctx, ctx.identifier(targets[0]), bool(expression.args.get("exists")))


def _refresh(ctx: StatementContext, expression: exp.Refresh, text: str) -> DataFrame | None:
    if (expression.text("kind") or "").upper() == "MATERIALIZED VIEW":
        return materialized_views.refresh(ctx, expression, text)
    return _table_command(ctx, expression, text)


def _is_arctic(ctx: StatementContext, node: exp.Table) -> bool:
    try:
        identifier = ctx.identifier(node)
    except ArcticError:
        return False
    return ctx.catalog.table_exists(identifier) or ctx.catalog.load_view(identifier) is not None


HANDLERS: dict[type, Handler] = {
    exp.Use: _use,
    exp.Create: _create,
    exp.Drop: _drop,
    exp.Alter: ddl.alter,
    exp.Describe: ddl.describe,
    statements.ShowTables: ddl.show_tables,
    statements.ShowDatabases: ddl.show_databases,
    statements.UnsetTableProperties: ddl.unset_properties,
    statements.Explain: ddl.explain,
    exp.Insert: dml.insert,
    exp.Delete: dml.delete,
    exp.Update: dml.update,
    exp.Merge: dml.merge,
    statements.SchemaEvolvingMerge: dml.merge,
    statements.SchemaEvolvingInsert: dml.insert,
    statements.Call: _call,
    statements.DescribeHistory: _describe_history,
    statements.ShowTableProperties: show.show_table_properties,
    statements.ShowColumns: show.show_columns,
    statements.ShowPartitions: show.show_partitions,
    statements.ShowCreateTable: show.show_create_table,
    exp.TruncateTable: truncate.truncate,
    statements.CompactTable: _compact,
    statements.TableOrder: ddl.order,
    statements.TagStatement: ddl.tag,
    statements.CloneTable: clones.clone,
    exp.Cache: _table_command,
    exp.Uncache: _table_command,
    exp.Refresh: _refresh,
    statements.ShowMaterializedViews: materialized_views.show,
    statements.DescribeMaterializedView: materialized_views.describe,
    exp.Analyze: _table_command,
}
