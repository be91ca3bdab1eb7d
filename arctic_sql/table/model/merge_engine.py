"""How a keyed table merges the rows of one key: its merge engine, as Paimon names them.

``merge-engine`` (fixed at CREATE TABLE) picks the rule every place rows meet applies (merge-on-read,
optimizing, lookups, the change feed): ``deduplicate`` (the newest change wins), ``partial-update``
(a change sets its non-NULL columns), ``first-row`` (the first row stays) or ``aggregation`` (each
column folds with ``fields.<col>.aggregate-function``). ``sequence.field`` orders a key's changes
by those columns before commit order. The fold itself is ``table/reading/engine_fold.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from arctic_sql.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyiceberg.schema import Schema

ENGINE_KEY = "merge-engine"
SEQUENCE_KEY = "sequence.field"
IGNORE_DELETE_KEY = "partial-update.ignore-delete"
FIELDS_PREFIX = "fields."
AGGREGATE_SUFFIX = ".aggregate-function"
DISTINCT_SUFFIX = ".distinct"


class Engine(Enum):
    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    FIRST_ROW = "first-row"
    AGGREGATION = "aggregation"


# Functions whose result from a stored (already folded) row and new rows is the fold of all of them.
AGGREGATES = (
    "sum",
    "min",
    "max",
    "count",
    "last_value",
    "last_non_null_value",
    "first_value",
    "first_non_null_value",
    "bool_and",
    "bool_or",
    "listagg",
    "collect",
)
DEFAULT_AGGREGATE = "last_non_null_value"


@dataclass(frozen=True)
class MergeEngine:
    """A table's merge rule: a value object shipped to Spark tasks with their node merges."""

    engine: Engine = Engine.DEDUPLICATE
    sequence: tuple[str, ...] = ()
    ignore_delete: bool = False
    # (column, function, distinct) for every non-key column of an aggregation table
    aggregates: tuple[tuple[str, str, bool], ...] = ()
    # Whether an applied sequenced delete leaves a tombstone (the key absent, with the delete's
    # sequence) that later changes are held to. Off until every fold's caller stores and reads
    # tombstones: honouring them in merge-on-read but losing them in optimizing would break
    # invariant 2 (issue 31).
    lasting_deletes: bool = False

    @property
    def newest_wins(self) -> bool:
        """Whether the rule is the plain one: the newest change per key by commit order."""
        return self.engine is Engine.DEDUPLICATE and not self.sequence

    def needed(self, columns: Sequence[str]) -> list[str]:
        """``columns`` and what folding them needs besides the key: the sequence columns."""
        return list(dict.fromkeys([*columns, *self.sequence]))

    @classmethod
    def of(cls, properties: Mapping[str, str], schema: Schema) -> MergeEngine:
        """The engine that ``properties`` (stored or about to be) declare for a table of ``schema``;
        InvalidArgumentError naming the problem when they do not fit it."""
        raw = properties.get(ENGINE_KEY, Engine.DEDUPLICATE.value)
        try:
            engine = Engine(raw)
        except ValueError:
            choices = ", ".join(e.value for e in Engine)
            raise InvalidArgumentError(
                f"Invalid value '{raw}' for table property '{ENGINE_KEY}': must be one of {choices}"
            ) from None
        names = [f.name for f in schema.fields]
        keys = {schema.find_field(i).name for i in schema.identifier_field_ids}
        sequence = tuple(s.strip() for s in properties.get(SEQUENCE_KEY, "").split(",") if s.strip())
        for column in sequence:
            if column not in names:
                raise InvalidArgumentError(f"Table property '{SEQUENCE_KEY}' names no column '{column}'")
            if column in keys:
                raise InvalidArgumentError(
                    f"Table property '{SEQUENCE_KEY}' cannot name key column '{column}'"
                )
        if sequence and engine in (Engine.FIRST_ROW, Engine.AGGREGATION):
            raise InvalidArgumentError(
                f"Table property '{SEQUENCE_KEY}' applies to deduplicate and partial-update tables, not {engine.value}"
            )
        ignore = properties.get(IGNORE_DELETE_KEY, "false").strip().lower() == "true"
        if ignore and engine is not Engine.PARTIAL_UPDATE:
            raise InvalidArgumentError(
                f"Table property '{IGNORE_DELETE_KEY}' needs merge-engine partial-update"
            )
        aggregates = _aggregates(properties, engine, names, keys)
        if (engine is not Engine.DEDUPLICATE or sequence) and not keys:
            raise InvalidArgumentError(
                f"Table properties '{ENGINE_KEY}' and '{SEQUENCE_KEY}' need a table with a primary key"
            )
        return cls(engine, sequence, ignore, aggregates)


def _aggregates(
    properties: Mapping[str, str], engine: Engine, names: list[str], keys: set[str]
) -> tuple[tuple[str, str, bool], ...]:
    functions: dict[str, str] = {}
    distinct: dict[str, bool] = {}
    for key, value in properties.items():
        if not is_field_key(key):
            continue
        column, suffix = _field_of(key)
        if column not in names:
            raise InvalidArgumentError(f"Table property '{key}' names no column '{column}'")
        if engine is not Engine.AGGREGATION:
            raise InvalidArgumentError(f"Table property '{key}' needs merge-engine aggregation")
        if column in keys:
            raise InvalidArgumentError(f"Table property '{key}': key column '{column}' is not aggregated")
        if suffix == AGGREGATE_SUFFIX:
            if value not in AGGREGATES:
                raise InvalidArgumentError(
                    f"Invalid value '{value}' for table property '{key}': must be one of {', '.join(AGGREGATES)}"
                )
            functions[column] = value
        else:
            if value.strip().lower() not in ("true", "false"):
                raise InvalidArgumentError(
                    f"Invalid value '{value}' for table property '{key}': expected boolean"
                )
            distinct[column] = value.strip().lower() == "true"
    for column, flag in distinct.items():
        if flag and functions.get(column) != "collect":
            raise InvalidArgumentError(
                f"Table property 'fields.{column}.distinct' needs aggregate-function collect"
            )
    if engine is not Engine.AGGREGATION:
        return ()
    return tuple(
        (n, functions.get(n, DEFAULT_AGGREGATE), distinct.get(n, False)) for n in names if n not in keys
    )


def is_field_key(key: str) -> bool:
    """Whether ``key`` is a per-column engine key: ``fields.<col>.aggregate-function`` or ``.distinct``."""
    return key.startswith(FIELDS_PREFIX) and key.endswith((AGGREGATE_SUFFIX, DISTINCT_SUFFIX))


def _field_of(key: str) -> tuple[str, str]:
    suffix = AGGREGATE_SUFFIX if key.endswith(AGGREGATE_SUFFIX) else DISTINCT_SUFFIX
    return key[len(FIELDS_PREFIX) : -len(suffix)], suffix
