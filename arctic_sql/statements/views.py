"""Views over arctic tables: ``CREATE [OR REPLACE] VIEW``, ``ALTER VIEW`` and ``DROP VIEW``.

Spark cannot keep such a view itself: a statement reads an arctic table through a temporary view of
its merged rows, and Spark refuses a persistent view over a temporary one. A view whose query names
an arctic table (or another such view) is therefore kept in the arctic catalog as its query's text
(catalog.ViewDefinition), and a statement that names the view reads that query in its place, resolved
afresh each time, so it sees the tables as they are now, as a Spark view does. A view over Spark's
tables alone stays Spark's. Reading a view is the query runner's (runner.read_view).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError, TableAlreadyExistsError, UnsupportedOperationError
from arctic_sql.parser import to_spark_sql
from arctic_sql.statements import runner
from arctic_sql.statements.metadata_tables import METADATA_TABLES
from arctic_sql.table.catalog import ViewDefinition
from arctic_sql.table.model.identifiers import TableIdentifier

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext


def create(ctx: StatementContext, expression: exp.Create) -> DataFrame | None:
    """``CREATE [OR REPLACE] VIEW [IF NOT EXISTS] v [(columns)] AS query`` over arctic tables; None
    (Spark's own view) when the query names none."""
    target, columns = expression.this, ()
    if isinstance(target, exp.Schema):
        columns = tuple(c.name for c in target.expressions)
        target = target.this
    query = expression.expression
    if not isinstance(target, exp.Table) or query is None:
        return None
    identifier = ctx.identifier(target)
    exists = ctx.catalog.load_view(identifier) is not None
    if not exists and not _names_arctic(ctx, query):
        return None
    if exists and expression.args.get("exists"):
        return ctx.ok()
    replace = bool(expression.args.get("replace"))
    if ctx.spark.catalog.databaseExists(identifier.database) and ctx.spark.catalog.tableExists(
        str(identifier)
    ):
        if not replace or ctx.spark.catalog.getTable(str(identifier)).tableType != "VIEW":
            raise TableAlreadyExistsError(
                f"Cannot create view {identifier}: Spark has a table or view of that name"
            )
    view = ViewDefinition(to_spark_sql(qualified(ctx, query)), columns)
    # Refused now, as Spark refuses it, rather than at its first read: a query that does not analyse,
    # the wrong number of column names, a view that would read itself.
    runner.read_view(ctx, identifier, view)
    ctx.catalog.create_view(identifier, view, replace=replace)
    if replace:  # the Spark view it replaces, if any
        ctx.spark.sql(f"DROP VIEW IF EXISTS {_quoted(identifier)}")
    return ctx.ok()


def alter(ctx: StatementContext, expression: exp.Alter) -> DataFrame | None:
    """``ALTER VIEW v AS query`` of an arctic view (a new query, checked as CREATE checks it); None for
    Spark's views. Other ALTER VIEW forms are refused."""
    identifier = ctx.identifier(expression.this)
    if ctx.catalog.load_view(identifier) is None:
        return None
    actions = expression.args.get("actions") or []
    if len(actions) != 1 or not isinstance(actions[0], exp.Query):
        raise UnsupportedOperationError(
            f"ALTER VIEW {identifier} takes only AS query here; use CREATE OR REPLACE VIEW or DROP VIEW"
        )
    replace = exp.Create(this=expression.this.copy(), kind="VIEW", replace=True, expression=actions[0].copy())
    return create(ctx, replace)


def create_statement(identifier: TableIdentifier, view: ViewDefinition) -> str:
    """What SHOW CREATE TABLE gives for a view: the statement that makes it again."""
    names = ", ".join(to_spark_sql(exp.to_identifier(c, quoted=True)) for c in view.columns)
    columns = f" ({names})" if names else ""
    return f"CREATE VIEW {_quoted(identifier)}{columns} AS {view.sql}"


def drop(ctx: StatementContext, identifier: TableIdentifier, if_exists: bool) -> DataFrame | None:
    """``DROP VIEW``: None when the name is not an arctic view (Spark drops its own, or reports it missing)."""
    if ctx.catalog.drop_view(identifier):
        return ctx.ok()
    if ctx.catalog.table_exists(identifier):
        raise InvalidArgumentError(f"{identifier} is a table, not a view: use DROP TABLE")
    return ctx.ok() if if_exists and not ctx.spark.catalog.tableExists(str(identifier)) else None


def schema_rows(
    ctx: StatementContext, identifier: TableIdentifier, view: ViewDefinition
) -> list[tuple[str, str, None]]:
    """DESCRIBE of a view: its columns and their Spark types."""
    return [
        (f.name, f.dataType.simpleString(), None)
        for f in runner.read_view(ctx, identifier, view).schema.fields
    ]


def information(ctx: StatementContext, identifier: TableIdentifier, view: ViewDefinition) -> str:
    """SHOW TABLE EXTENDED's text for a view, as Spark writes it (dbt-spark reads ``Type: VIEW``)."""
    lines = [
        "Catalog: spark_catalog",
        f"Database: {identifier.database}",
        f"Table: {identifier.name}",
        "Type: VIEW",
        f"View Text: {view.sql}",
        "Schema: root",
    ]
    lines += [
        f" |-- {f.name}: {f.dataType.simpleString()} (nullable = {str(f.nullable).lower()})"
        for f in runner.read_view(ctx, identifier, view).schema.fields
    ]
    return "\n".join(lines) + "\n"


def _quoted(identifier: TableIdentifier) -> str:
    return to_spark_sql(exp.table_(identifier.name, db=identifier.database, quoted=True))


def qualified(ctx: StatementContext, query: exp.Expression) -> exp.Expression:
    """``query`` with its unqualified table names given the current database, as Spark does for a
    view: whoever reads it later reads the tables its creator meant."""
    query = query.copy()
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    for node in query.find_all(exp.Table):
        if (
            node.name
            and not node.args.get("db")
            and node.name.lower() not in ctes
            and not isinstance(node.this, exp.Func)
        ):
            node.set("db", exp.to_identifier(ctx.current_database))
    return query


def _names_arctic(ctx: StatementContext, query: exp.Expression) -> bool:
    """Whether ``query`` names an arctic table or view (a CTE's name is not a table)."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    for node in query.find_all(exp.Table):
        parts = [p.name for p in node.parts]
        if not node.name or (len(parts) == 1 and parts[0].lower() in ctes):
            continue
        try:
            identifier = TableIdentifier.parse(".".join(parts), ctx.current_database)
            if ctx.catalog.table_exists(identifier) or ctx.catalog.load_view(identifier) is not None:
                return True
        except InvalidArgumentError:
            pass  # four parts: perhaps a metadata table
        if (
            len(parts) >= 2
            and parts[-1].lower() in METADATA_TABLES
            and ctx.catalog.table_exists(TableIdentifier.parse(".".join(parts[-3:-1]), ctx.current_database))
        ):
            return True  # a metadata table (db.t.snapshots)
    return False
