"""``CREATE TABLE t2 [SHALLOW|DEEP] CLONE t [VERSION|TIMESTAMP AS OF v]`` (Delta's syntax).

A **shallow** clone is metadata only: the catalog makes it (table/catalog.py ``shallow_clone``), and
its files stay its source's (docs/design.md, "Who owns which files"). A **deep** clone copies the
rows of the version into files of its own, in one Spark job as CREATE TABLE ... AS SELECT does, and
then owns everything it reads: it keeps the source's columns, key, partitioning and properties.
Both start their history at the version cloned, as Delta's clones do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arctic_sql.errors import NoSuchTableError, TableAlreadyExistsError
from arctic_sql.parser import parse_one, statements, to_spark_sql
from arctic_sql.statements import runner, time_travel
from arctic_sql.table.format import versions
from arctic_sql.table.format.versions import Operation
from arctic_sql.table.reading.time_travel import checked_version
from arctic_sql.table.writing import base_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext
    from arctic_sql.table.model.identifiers import TableIdentifier
    from arctic_sql.table.model.table import ArcticTable


def clone(ctx: StatementContext, expression: statements.CloneTable, text: str) -> DataFrame:
    identifier = ctx.identifier(expression.this)
    source_node = expression.args["source"]
    source = ctx.arctic_table(source_node)
    if source is None:
        raise NoSuchTableError(f"Cannot clone {source_node.sql(dialect='spark')}: no such table")
    if ctx.catalog.table_exists(identifier):
        if expression.args.get("exists"):
            return ctx.ok()
        raise TableAlreadyExistsError(f"Table {identifier} already exists")
    node = expression.args.get("version")
    version = (
        time_travel.version_as_of(ctx, source, node, runner.evaluator(ctx)) if node is not None else None
    )
    if expression.args.get("shallow"):
        ctx.catalog.shallow_clone(source, identifier, version)
    else:
        _deep_clone(ctx, source, identifier, version)
    return ctx.ok()


def _deep_clone(
    ctx: StatementContext, source: ArcticTable, identifier: TableIdentifier, version: int | None
) -> None:
    """The rows of ``version`` (default: the newest) of ``source`` in a new table of the same shape,
    staged and published as a CTAS is (a failure leaves no table)."""
    history = versions.history(source.base, source.change)
    version = checked_version(source, history, history.latest if version is None else version)
    table = ctx.catalog.create_table(
        identifier, source.schema, source.spec, source.user_properties(), staged=True
    )
    try:
        if version > 0:
            name = f"`{source.identifier.database}`.`{source.identifier.name}`"
            query = parse_one(f"SELECT * FROM {name} VERSION AS OF {version}")
            rows = runner.run_spark(ctx, query, to_spark_sql(query))
            base_rows.overwrite_rows(table, rows, operation=Operation.CREATE_AS_SELECT)
    except BaseException:
        ctx.catalog.discard_staged(table)
        raise
    ctx.catalog.publish(table)
