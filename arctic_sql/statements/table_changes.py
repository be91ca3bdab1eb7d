"""``SELECT * FROM table_changes('db.t', start[, end])``: Delta's (Databricks') change data feed in SQL.

Every change of every version from ``start`` to ``end``, both inclusive as in Delta (``end``
defaults to the newest version): ``_change_type`` ``insert``, ``update_preimage``,
``update_postimage`` or ``delete``, with ``_change_version`` and ``_commit_timestamp``; what
``changeFeedMode=full`` gives the arctic format (table/reading/full_changes.py). ``start`` and
``end`` take a version number, a tag's name (``'q3'``) or ``get_latest_version(...)``.
``VERSION BETWEEN`` stays the net change per key over ``(v1, v2]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.statements.time_travel import version_value
from arctic_sql.table.format import versions
from arctic_sql.table.reading import time_travel as tt
from arctic_sql.table.reading.full_changes import full_changes_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext

TABLE_CHANGES = "table_changes"


def is_table_changes(node: exp.Table) -> bool:
    """Whether a table reference is a ``table_changes(...)`` call."""
    return isinstance(node.this, exp.Anonymous) and node.this.name.lower() == TABLE_CHANGES


def dataframe(ctx: StatementContext, call: exp.Anonymous) -> DataFrame:
    """The full change feed a ``table_changes(name, start[, end])`` call names."""
    arguments = call.expressions
    if not 2 <= len(arguments) <= 3:
        raise InvalidArgumentError(
            f"table_changes() takes a table name, a start version and an optional end version, "
            f"got {len(arguments)} arguments"
        )
    name = arguments[0]
    if not (isinstance(name, exp.Literal) and name.is_string):
        raise InvalidArgumentError(f"table_changes() needs the table name as a string, got {name.sql()}")
    table = ctx.table(name.this)
    history = versions.history(table.base, table.change)
    where = f"table_changes('{table.identifier}', ...)"
    start = version_value(ctx, table, arguments[1], where)
    end = version_value(ctx, table, arguments[2], where) if len(arguments) == 3 else history.latest
    if start > end:
        raise InvalidArgumentError(f"{where}: the start version {start} is after the end version {end}")
    # Delta's start is inclusive: the changes after ``start - 1`` (version 0 is the empty table).
    span = tt.range_of_versions(table, history, max(start - 1, 0), end, where)
    return full_changes_frame(ctx.spark, table, span, history)
