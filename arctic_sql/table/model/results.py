"""Typed results of table actions, and the CALL output they become.

An action (expire snapshots, remove orphan files, optimize, rollback, ...) returns frozen dataclasses
whose fields are exactly its procedure's output columns, so the Python API, ``CALL``, the run records
and the management service speak one vocabulary. A procedure's output schema and rows are derived
from the dataclass here, never written a second time:

>>> output_schema(rollback.RollbackResult)  # doctest: +SKIP
'previous_version long, restored_version long, current_version long'
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

_SPARK_TYPES = {int: "long", str: "string", bool: "boolean"}


def _spark_type(owner: type, name: str, hint: Any) -> str:
    """The Spark SQL type of one field's Python type (``int | None`` is a nullable ``long``)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if hint not in _SPARK_TYPES:
        raise TypeError(f"{owner.__name__}.{name}: {hint!r} has no Spark type here")
    return _SPARK_TYPES[hint]


def output_schema(result: type) -> str:
    """The Spark DDL of a result dataclass: one column per field, in field order."""
    hints = typing.get_type_hints(result)
    return ", ".join(
        f"{f.name} {_spark_type(result, f.name, hints[f.name])}" for f in dataclasses.fields(result)
    )


def output_row(result: object) -> tuple[Any, ...]:
    """One result as a row of its output schema."""
    return tuple(getattr(result, f.name) for f in dataclasses.fields(result))  # type: ignore[arg-type]
