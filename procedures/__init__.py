"""CALL procedures (installed as ``arctic_sql.procedures``).

Each procedure declares its typed parameters and snake_case output columns and then calls into the
core (``arctic_sql``); this package only binds arguments and shapes results. Arguments are named
(``table => 'db.t'``) or positional, positional first, as in Iceberg's Spark procedures:

>>> from arctic_sql.parser import parse_one
>>> call(ctx, parse_one("CALL system.optimize('db.t', mode => 'full')"))  # doctest: +SKIP

A module listed in ``_MODULES`` registers its procedures with :func:`procedure` when imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.statements import runner
from arctic_sql.table.model.results import output_row, output_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.parser.statements import Call
    from arctic_sql.statements.context import StatementContext

_MODULES: tuple[str, ...] = ("optimize", "maintenance", "branches", "hive")
_REQUIRED = object()


@dataclass(frozen=True)
class Parameter:
    """One parameter: its name, its type (``string``, ``long``, ``boolean``, ``timestamp``, ``any``)
    and its default (``Parameter.REQUIRED`` when it has none)."""

    name: str
    type: str = "string"
    default: Any = _REQUIRED

    REQUIRED = _REQUIRED

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


@dataclass(frozen=True)
class Procedure:
    """A CALL procedure: ``run(ctx, **arguments)`` returns the action's typed results (``result``, a
    dataclass whose fields are the output columns); ``output`` is their Spark DDL, derived from it."""

    name: str
    parameters: tuple[Parameter, ...]
    result: type
    run: Callable[..., list[Any]]
    doc: str = ""

    @property
    def output(self) -> str:
        return output_schema(self.result)


_REGISTRY: dict[str, Procedure] = {}


def procedure(name: str, parameters: tuple[Parameter, ...], result: type) -> Callable[[Callable], Callable]:
    """Register the decorated function as ``system.<name>``; it returns instances of ``result``."""

    def register(run: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
        _REGISTRY[name] = Procedure(name, parameters, result, run, (run.__doc__ or "").strip())
        return run

    return register


def registry() -> dict[str, Procedure]:
    """Every registered procedure by name (importing the procedure modules on first use)."""
    for module in _MODULES:
        importlib.import_module(f"{__name__}.{module}")
    return _REGISTRY


def lookup(name: str) -> Procedure:
    """The procedure ``name`` names: ``optimize``, ``system.optimize`` or ``<catalog>.system.optimize``."""
    parts = name.lower().split(".")
    if len(parts) > 1 and parts[-2] != "system" or len(parts) > 3:
        raise InvalidArgumentError(f"Unknown procedure {name}: procedures live in the system namespace")
    procedures = registry()
    if parts[-1] not in procedures:
        raise InvalidArgumentError(
            f"Unknown procedure {name}; available: {', '.join('system.' + p for p in sorted(procedures))}"
        )
    return procedures[parts[-1]]


def call(ctx: StatementContext, statement: Call) -> DataFrame:
    """Run a ``CALL`` statement and return its output rows."""
    proc = lookup(statement.name)
    arguments = bind(ctx, proc, statement.expressions)
    results = proc.run(ctx, **arguments)
    return ctx.result([output_row(r) for r in results], proc.output)


def bind(ctx: StatementContext, proc: Procedure, expressions: list[exp.Expression]) -> dict[str, Any]:
    """Match positional and named arguments to ``proc``'s parameters and convert their values."""
    by_name = {p.name: p for p in proc.parameters}
    values: dict[str, Any] = {}
    named = False
    for position, argument in enumerate(expressions):
        if isinstance(argument, exp.Kwarg):
            named = True
            name = argument.this.name.lower()
            if name not in by_name:
                raise InvalidArgumentError(
                    f"system.{proc.name} has no parameter '{name}'; "
                    f"parameters: {', '.join(p.name for p in proc.parameters)}"
                )
            value = argument.expression
        else:
            if named:
                raise InvalidArgumentError(
                    f"system.{proc.name}: positional arguments must come before named ones"
                )
            if position >= len(proc.parameters):
                raise InvalidArgumentError(
                    f"system.{proc.name} takes at most {len(proc.parameters)} arguments, got {len(expressions)}"
                )
            name, value = proc.parameters[position].name, argument
        if name in values:
            raise InvalidArgumentError(f"system.{proc.name}: parameter '{name}' is given twice")
        values[name] = _convert(ctx, proc, by_name[name], value)
    for p in proc.parameters:
        if p.name not in values:
            if p.required:
                raise InvalidArgumentError(f"system.{proc.name} needs the parameter '{p.name}'")
            values[p.name] = p.default
    return values


def _convert(ctx: StatementContext, proc: Procedure, parameter: Parameter, value: exp.Expression) -> Any:
    """A parameter's Python value. Literals convert directly; any other expression (``current_timestamp()
    - INTERVAL 1 DAY``, ``get_latest_version('db.t')``) is evaluated by one SELECT (``runner.constant``)."""
    raw = _literal(value)
    if raw is _REQUIRED:
        raw = runner.constant(ctx, value.sql(dialect="spark"))
    if raw is None:
        return None
    where = f"system.{proc.name}: parameter '{parameter.name}'"
    if parameter.type == "string":
        if not isinstance(raw, str):
            raise InvalidArgumentError(f"{where} must be a string, got {value.sql(dialect='spark')}")
        return raw
    if parameter.type == "boolean":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        raise InvalidArgumentError(f"{where} must be true or false, got {value.sql(dialect='spark')}")
    if parameter.type == "long":
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise InvalidArgumentError(f"{where} must be a whole number, got {value.sql(dialect='spark')}")
        try:
            return int(raw)
        except ValueError:
            raise InvalidArgumentError(
                f"{where} must be a whole number, got {value.sql(dialect='spark')}"
            ) from None
    if parameter.type == "timestamp":
        return _timestamp(ctx, raw, where, value)
    return raw


def _literal(value: exp.Expression) -> Any:
    """The Python value of a literal argument, or ``_REQUIRED`` when it is not a plain literal."""
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal) and not value.this.is_string:
        inner = _literal(value.this)
        return -inner if isinstance(inner, (int, float)) else _REQUIRED
    if isinstance(value, exp.Literal):
        if value.is_string:
            return value.this
        text = value.this
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return _REQUIRED
    if isinstance(value, exp.Boolean):
        return bool(value.this)
    if isinstance(value, exp.Null):
        return None
    if isinstance(value, exp.Identifier) or (isinstance(value, exp.Column) and not value.table):
        return value.name  # an unquoted word: `mode => full` reads as 'full'
    return _REQUIRED


def _timestamp(ctx: StatementContext, raw: Any, where: str, value: exp.Expression) -> Any:
    """A timezone-aware ``datetime``: from a timestamp value, a string Spark can cast, or epoch millis."""
    import datetime

    if isinstance(raw, datetime.datetime):
        return raw if raw.tzinfo else raw.astimezone()
    if isinstance(raw, int):
        return datetime.datetime.fromtimestamp(raw / 1000, tz=datetime.UTC)
    if isinstance(raw, str):
        parsed = ctx.spark.sql(
            f"SELECT try_cast({exp.Literal.string(raw).sql(dialect='spark')} AS TIMESTAMP)"
        )
        ts = parsed.collect()[0][0]
        if ts is not None:
            return ts if ts.tzinfo else ts.astimezone()
    raise InvalidArgumentError(f"{where} must be a timestamp, got {value.sql(dialect='spark')}")
