"""``SELECT * FROM table_changes('db.t', start[, end])``: Delta's (Databricks') change data feed in SQL.

Every change of every version from ``start`` to ``end``, both inclusive as in Delta (``end``
defaults to the newest version): ``_change_type`` ``insert``, ``update_preimage``,
``update_postimage`` or ``delete``, with ``_change_version`` and ``_commit_timestamp``; what
``changeFeedMode=full`` gives the arctic format (table/reading/full_changes.py). ``start`` and
``end`` take a version number, a tag's name (``'q3'``), ``get_latest_version(...)`` or, as in
Delta, a timestamp (``'2026-11-27 10:00:00'``, ``current_timestamp() - INTERVAL 1 HOUR``): the
versions committed at or after a start instant, and at or before an end instant.
``VERSION BETWEEN`` stays the net change per key over ``(v1, v2]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.parser import to_spark_sql
from arctic_sql.statements.time_travel import (
    LATEST_TIMESTAMP,
    LATEST_VERSION,
    timestamp_micros,
    version_value,
)
from arctic_sql.table.format import versions
from arctic_sql.table.reading import tags
from arctic_sql.table.reading import time_travel as tt
from arctic_sql.table.reading.changes import version_at
from arctic_sql.table.reading.preimages import full_changes_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import Evaluate, StatementContext
    from arctic_sql.table.model.table import ArcticTable

TABLE_CHANGES = "table_changes"


def is_table_changes(node: exp.Table) -> bool:
    """Whether a table reference is a ``table_changes(...)`` call."""
    return isinstance(node.this, exp.Anonymous) and node.this.name.lower() == TABLE_CHANGES


def dataframe(ctx: StatementContext, call: exp.Anonymous, evaluate: Evaluate) -> DataFrame:
    """The full change feed a ``table_changes(name, start[, end])`` call names (``evaluate``: the
    value of a bound that is an expression, runner.evaluator)."""
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
    start = _bound(ctx, table, history, arguments[1], where, evaluate, start=True)
    end = (
        _bound(ctx, table, history, arguments[2], where, evaluate, start=False)
        if len(arguments) == 3
        else history.latest
    )
    if start > end:
        if any(_is_instant(a, evaluate) for a in arguments[1:]):
            raise InvalidArgumentError(
                f"{where}: no version was committed between its bounds "
                f"(versions {start} to {end}; available: {history.describe()})"
            )
        raise InvalidArgumentError(f"{where}: the start version {start} is after the end version {end}")
    # Delta's start is inclusive: the changes after ``start - 1`` (version 0 is the empty table).
    span = tt.range_of_versions(table, history, max(start - 1, 0), end, where)
    return full_changes_frame(ctx.spark, table, span, history)


def _bound(
    ctx: StatementContext,
    table: ArcticTable,
    history: versions.History,
    value: exp.Expression,
    where: str,
    evaluate: Evaluate,
    *,
    start: bool,
) -> int:
    """The version a bound names, both inclusive. An instant (Delta's timestamps) bounds by commit
    time: a start is the first version committed at or after it, an end the last at or before it."""
    if not _is_instant(value, evaluate):
        return version_value(ctx, table, value, where, evaluate)
    micros = timestamp_micros(ctx, value, where, evaluate)
    if start:
        return tt.start_after(table, history, micros, f"{where}: the start") + 1
    return version_at(history, micros) or 0


def _is_instant(value: exp.Expression, evaluate: Evaluate) -> bool:
    """Whether a bound is a timestamp rather than a version: a string that is neither a number nor
    a tag's name, ``get_latest_timestamp(...)``, or an expression of a date or timestamp type."""
    if isinstance(value, exp.Literal):
        text = value.this.strip()
        return value.is_string and not text.lstrip("-").isdigit() and not tags.NAME.fullmatch(text)
    if isinstance(value, exp.Anonymous) and value.name.lower() in (LATEST_VERSION, LATEST_TIMESTAMP):
        return value.name.lower() == LATEST_TIMESTAMP
    kind = evaluate(f"typeof({to_spark_sql(value)})")
    return str(kind).startswith(("timestamp", "date", "string"))
