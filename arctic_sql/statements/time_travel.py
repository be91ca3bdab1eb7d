"""Time travel, incremental reads and the ``get_latest_*`` functions in SQL.

- ``VERSION AS OF v`` / ``FOR SYSTEM_VERSION AS OF v`` name a retained version (``v`` a number,
  or a tag's name as a string: ``VERSION AS OF 'q3'``);
  ``TIMESTAMP AS OF ts`` / ``FOR SYSTEM_TIME AS OF ts`` the newest version committed at or before
  ``ts`` (as in Iceberg: a timestamp after the newest commit reads the newest version).
- ``VERSION BETWEEN v1 AND v2`` / ``TIMESTAMP BETWEEN t1 AND t2`` read what changed in
  ``(v1, v2]``: start exclusive, end inclusive (MaxCompute's). What that read returns is
  ``table.changes``; this module turns the clauses into a checked ``Range``.
- ``get_latest_version('db.t'[, n])`` and ``get_latest_timestamp('db.t'[, n])``: the n-th newest
  retained commit. They are replaced by literals before Spark sees a statement, so they work in
  every clause, in plain expressions and in CALL arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.parser import to_spark_sql
from arctic_sql.table.format import versions
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import tags
from arctic_sql.table.reading import time_travel as tt
from arctic_sql.table.reading.changes import Range

if TYPE_CHECKING:
    from arctic_sql.statements.context import Evaluate, StatementContext

LATEST_VERSION = "get_latest_version"
LATEST_TIMESTAMP = "get_latest_timestamp"


# get_latest_version / get_latest_timestamp --------------------------------------------------------
def nth_latest(ctx: StatementContext, name: str, n: int) -> versions.Commit | None:
    """The n-th newest retained commit of table ``name`` (n = 1: the newest); None for an empty table."""
    table = ctx.catalog.load_table(TableIdentifier.parse(name, ctx.current_database))
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


def _function_arguments(call: exp.Anonymous, evaluate: Evaluate) -> tuple[str, int]:
    what = call.name.lower()
    arguments = call.expressions
    if not 1 <= len(arguments) <= 2:
        raise InvalidArgumentError(
            f"{what}() takes a table name and an optional n, got {len(arguments)} arguments"
        )
    values = [_constant(a, evaluate) for a in arguments]
    if not isinstance(values[0], str):
        raise InvalidArgumentError(f"{what}() needs the table name as a string, e.g. {what}('db.t')")
    n = values[1] if len(values) == 2 else 1
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidArgumentError(f"{what}(): n must be a whole number, got {arguments[1].sql()}")
    return values[0], n


def _constant(value: exp.Expression, evaluate: Evaluate) -> object:
    if isinstance(value, exp.Literal):
        return value.this if value.is_string else int(value.this) if value.is_int else value.this

    return evaluate(to_spark_sql(value))


def _latest_version(ctx: StatementContext, call: exp.Anonymous, evaluate: Evaluate) -> int:
    commit = nth_latest(ctx, *_function_arguments(call, evaluate))
    return commit.version if commit is not None else 0


def _latest_timestamp_ms(ctx: StatementContext, call: exp.Anonymous, evaluate: Evaluate) -> int:
    name, n = _function_arguments(call, evaluate)
    commit = nth_latest(ctx, name, n)
    if commit is None:
        raise VersionNotFoundError(f"{name} has no commits yet: {LATEST_TIMESTAMP} has no value")
    return commit.committed_at_ms


def _is_call(node: exp.Expression, name: str) -> TypeGuard[exp.Anonymous]:
    return isinstance(node, exp.Anonymous) and node.name.lower() == name


def replace_functions(
    ctx: StatementContext, expression: exp.Expression, evaluate: Evaluate
) -> exp.Expression:
    """``expression`` with every ``get_latest_version``/``get_latest_timestamp`` call replaced by its
    value (a copy), or ``expression`` itself when it has none. ``evaluate``: the value of an argument
    that is an expression (runner.evaluator), as for every function here that takes it."""
    calls = [
        n for n in expression.find_all(exp.Anonymous) if n.name.lower() in (LATEST_VERSION, LATEST_TIMESTAMP)
    ]
    if not calls:
        return expression
    copy = expression.copy()
    for node in list(copy.find_all(exp.Anonymous)):
        if _is_call(node, LATEST_VERSION):
            node.replace(exp.Literal.number(_latest_version(ctx, node, evaluate)))
        elif _is_call(node, LATEST_TIMESTAMP):
            node.replace(_timestamp_literal(_latest_timestamp_ms(ctx, node, evaluate)))
    return copy


def _timestamp_literal(ms: int) -> exp.Expression:
    return exp.Anonymous(this="timestamp_millis", expressions=[exp.Literal.number(ms)])


def at_version(table_node: exp.Table, version: int) -> exp.Table:
    """A copy of a table reference that reads ``version`` (``VERSION AS OF``; 0: the empty table as is)."""
    node = table_node.copy()
    if version > 0:
        node.set("version", exp.Version(this="VERSION", kind="AS OF", expression=exp.Literal.number(version)))
    return node


# evaluating AS OF / BETWEEN values ---------------------------------------------------------------
def version_value(
    ctx: StatementContext, table: ArcticTable, value: exp.Expression, where: str, evaluate: Evaluate
) -> int:
    """The version ``value`` names: a number, a tag's name (a string that is not a number), or
    ``get_latest_version(...)``."""
    if _is_call(value, LATEST_VERSION):
        return _latest_version(ctx, value, evaluate)
    if isinstance(value, exp.Literal) and value.is_string and tags.NAME.fullmatch(value.this.strip()):
        return tags.version_of(table, value.this.strip())
    raw: object
    if isinstance(value, exp.Literal):
        raw = value.this
    else:
        raw = evaluate(f"try_cast(({to_spark_sql(value)}) AS BIGINT)")
    try:
        if raw is not None and not isinstance(raw, bool):
            return int(str(raw).strip())
    except ValueError:
        pass
    raise InvalidArgumentError(f"{where} needs a version number or a tag's name, got {value.sql()}")


def timestamp_micros(ctx: StatementContext, value: exp.Expression, where: str, evaluate: Evaluate) -> int:
    """The instant ``value`` names, in microseconds since the epoch (strings in the session time zone)."""
    if _is_call(value, LATEST_TIMESTAMP):
        return _latest_timestamp_ms(ctx, value, evaluate) * 1000
    if _is_call(value, "timestamp_millis") and isinstance(value.expressions[0], exp.Literal):
        return int(value.expressions[0].this) * 1000

    micros = evaluate(f"unix_micros(try_cast(({to_spark_sql(value)}) AS TIMESTAMP))")
    if micros is None:
        raise InvalidArgumentError(f"{where} needs a timestamp, got {value.sql()}")
    return int(micros)


def _clause(node: exp.Version, table: ArcticTable) -> str:
    return f"{node.name.upper()} {node.text('kind').upper()} on {table.identifier}"


def version_as_of(ctx: StatementContext, table: ArcticTable, node: exp.Version, evaluate: Evaluate) -> int:
    """The version a ``VERSION|TIMESTAMP AS OF`` clause names, or VersionNotFoundError."""
    where = _clause(node, table)
    history = versions.history(table.base, table.change)
    value = node.args["expression"]
    if node.name.upper() == "TIMESTAMP":
        return tt.version_as_of_timestamp(table, history, timestamp_micros(ctx, value, where, evaluate))
    return tt.checked_version(table, history, version_value(ctx, table, value, where, evaluate))


def version_range(ctx: StatementContext, table: ArcticTable, node: exp.Version, evaluate: Evaluate) -> Range:
    """The ``(start, end]`` a ``VERSION|TIMESTAMP BETWEEN`` clause names, checked against the history."""
    where = _clause(node, table)
    history = versions.history(table.base, table.change)
    low, high = node.args["expression"].expressions
    if node.name.upper() == "TIMESTAMP":
        return tt.range_of_timestamps(
            history,
            timestamp_micros(ctx, low, where, evaluate),
            timestamp_micros(ctx, high, where, evaluate),
            where,
        )
    return tt.range_of_versions(
        table,
        history,
        version_value(ctx, table, low, where, evaluate),
        version_value(ctx, table, high, where, evaluate),
        where,
    )
