"""Clauses CREATE TABLE and ALTER TABLE share: property values and column definitions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from arctic_sql.statements.context import StatementContext


def literal_value(node: exp.Expression) -> str:
    """A property key or value as the user wrote it: ``'a'``, ``a`` and ``1`` without their quoting."""
    return node.name if isinstance(node, (exp.Literal, exp.Identifier, exp.Var, exp.Column)) else node.sql()


def spark_struct(ctx: StatementContext, column_defs: list[exp.ColumnDef]) -> StructType:
    """The Spark schema of column definitions, using Spark's own type parser."""
    from pyspark.sql.types import _parse_datatype_string

    ddl = ", ".join(f"`{c.name}` {c.args['kind'].sql('spark')}" for c in column_defs)
    try:
        return _parse_datatype_string(ddl)  # type: ignore[return-value]
    except Exception as e:
        raise InvalidArgumentError(f"Invalid column definitions: {ddl}") from e
