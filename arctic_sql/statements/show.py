"""The SHOW family on arctic tables: TBLPROPERTIES, COLUMNS, PARTITIONS, CREATE TABLE.

Each handler returns rows shaped as Spark's for the same statement, or None to let the session pass
the statement to Spark when the table is not arctic's.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, cast
from urllib.parse import unquote

from pyiceberg import transforms as tf
from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.parser import statements
from arctic_sql.statements import views
from arctic_sql.table.model import properties as props
from arctic_sql.table.model.schemas import to_spark_type
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading.scan import plan_read

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext


def show_table_properties(
    ctx: StatementContext, expression: statements.ShowTableProperties, text: str
) -> DataFrame | None:
    """``SHOW TBLPROPERTIES t [('key')]``: (key, value) rows of the properties the user set."""
    table = ctx.arctic_table(expression.this)
    if table is None:
        return None
    shown = table.user_properties()
    key_node = expression.args.get("key")
    if key_node is None:
        rows = sorted(shown.items())
    else:
        key = props.canonical_key(key_node.name)
        # Spark answers a missing key with a row, not an error.
        value = shown.get(key, f"Table {table.identifier} does not have property: {key_node.name}")
        rows = [(key_node.name, value)]
    return ctx.result(rows, "key string, value string")


def show_columns(ctx: StatementContext, expression: statements.ShowColumns, text: str) -> DataFrame | None:
    """``SHOW COLUMNS IN t [IN db]``: one ``col_name`` row per column."""
    node = expression.this
    database = expression.args.get("database")
    if database is not None:
        if node.args.get("db") is not None and node.text("db").lower() != database.name.lower():
            raise InvalidArgumentError(
                f"SHOW COLUMNS names two databases: {node.text('db')} (in {node.sql()}) and {database.name}"
            )
        node = exp.Table(this=node.this.copy(), db=database.copy())
    table = ctx.arctic_table(node)
    if table is None:
        return None
    return ctx.result([(f.name,) for f in table.schema.fields], "col_name string")


def show_partitions(
    ctx: StatementContext, expression: statements.ShowPartitions, text: str
) -> DataFrame | None:
    """``SHOW PARTITIONS t [PARTITION (k = v)]``: one ``region=eu/...`` row per partition holding data.

    Read from file metadata: a partition is listed while it has base files or change files.
    """

    table = ctx.arctic_table(expression.this)
    if table is None:
        return None
    if not table.spec.fields:
        raise InvalidArgumentError(
            f"SHOW PARTITIONS is not allowed on {table.identifier}: it is not partitioned"
        )
    plan = plan_read(table)
    found = {f.partition for f in [*plan.base_files, *plan.change_files] if f.record_count > 0}
    wanted = partition_filter(table, expression.args.get("partition"))
    rows = [(p,) for p in sorted(found) if matches(p, wanted)]
    return ctx.result(rows, "partition string")


def partition_filter(table: ArcticTable, partition: exp.Expression | None) -> dict[str, str]:
    """``PARTITION (k = v, ...)`` as {partition field name: value as text}; names checked."""
    if partition is None:
        return {}
    names = {f.name.lower(): f.name for f in table.spec.fields}
    wanted: dict[str, str] = {}
    for pair in partition.expressions:
        if not isinstance(pair, exp.EQ) or not isinstance(pair.expression, (exp.Literal, exp.Boolean)):
            raise InvalidArgumentError(f"PARTITION takes name = value pairs, not {pair.sql(dialect='spark')}")
        name = pair.this.name
        if name.lower() not in names:
            raise InvalidArgumentError(
                f"'{name}' is not a partition column of {table.identifier} (partition columns: "
                f"{', '.join(f.name for f in table.spec.fields)})"
            )
        value = pair.expression
        wanted[names[name.lower()]] = value.sql().lower() if isinstance(value, exp.Boolean) else value.name
    return wanted


def matches(partition_path: str, wanted: dict[str, str]) -> bool:
    """Whether a partition path (``region=eu/day=2024-01-01``) has every wanted value."""
    if not wanted:
        return True
    values = dict(part.split("=", 1) for part in partition_path.split("/") if "=" in part)
    return all(unquote(values.get(name, "")) == value for name, value in wanted.items())


# SHOW CREATE TABLE -----------------------------------------------------------------------------
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_TIME_TRANSFORMS = {
    tf.YearTransform: "years",
    tf.MonthTransform: "months",
    tf.DayTransform: "days",
    tf.HourTransform: "hours",
}


def show_create_table(
    ctx: StatementContext, expression: statements.ShowCreateTable, text: str
) -> DataFrame | None:
    """``SHOW CREATE TABLE t``: one ``createtab_stmt`` row that recreates the table when run."""
    table = ctx.arctic_table(expression.this)
    if table is None:
        identifier = ctx.identifier(expression.this)
        view = ctx.catalog.load_view(identifier)
        if view is None:
            return None
        return ctx.result([(views.create_statement(identifier, view),)], "createtab_stmt string")
    return ctx.result([(create_statement(table),)], "createtab_stmt string")


def create_statement(table: ArcticTable) -> str:
    """A CREATE TABLE statement for ``table``: columns, primary key, partitioning and properties."""
    schema = table.schema
    lines = []
    for field in schema.fields:
        spark_type = to_spark_type(field.field_type).simpleString()
        column = (
            f"  {_quote(field.name)} {spark_type.upper() if field.field_type.is_primitive else spark_type}"
        )
        if field.required:
            column += " NOT NULL"
        if field.doc:
            column += f" COMMENT {_string(field.doc)}"
        lines.append(column)
    if table.primary_key:
        lines.append(f"  PRIMARY KEY ({', '.join(_quote(k) for k in table.primary_key)})")
    name = ".".join(_quote(part) for part in (table.identifier.database, table.identifier.name))
    statement = f"CREATE TABLE {name} (\n" + ",\n".join(lines) + ")\nUSING arctic"
    if table.spec.fields:
        terms = [
            # A partition's source column is in the schema.
            _partition_term(f.transform, _quote(cast(str, schema.find_column_name(f.source_id))))
            for f in table.spec.fields
        ]
        statement += f"\nPARTITIONED BY ({', '.join(terms)})"
    shown = table.user_properties()
    if shown:
        pairs = ",\n".join(f"  {_string(k)} = {_string(v)}" for k, v in sorted(shown.items()))
        statement += f"\nTBLPROPERTIES (\n{pairs})"
    return statement


def _partition_term(transform: tf.Transform, column: str) -> str:
    if isinstance(transform, tf.IdentityTransform):
        return column
    if isinstance(transform, tf.BucketTransform):
        return f"bucket({transform.num_buckets}, {column})"
    if isinstance(transform, tf.TruncateTransform):
        return f"truncate({transform.width}, {column})"
    for kind, name in _TIME_TRANSFORMS.items():
        if isinstance(transform, kind):
            return f"{name}({column})"
    raise InvalidArgumentError(f"SHOW CREATE TABLE cannot print partition transform {transform}")


def _quote(name: str) -> str:
    return name if _PLAIN_NAME.match(name) else "`" + name.replace("`", "``") + "`"


def _string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
