"""Spark's pushed filters (``pyspark.sql.datasource.Filter``) as pyiceberg row filters and key hashes.

Pushed filters only prune: partitions and files by pyiceberg's partition and min/max evaluation,
row groups by their statistics, files by tree node for key lookups (as ``statements/pruning.py``
does for SQL). The reader hands every filter back to Spark, which applies them to the rows, so a
conversion must be *inclusive*: it may keep rows that fail the filter, never drop one that passes.

Change files may only be pruned on primary-key columns (a delete row holds only the key, and a newer
upsert that fails a non-key filter must still hide the older base row).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from pyiceberg import expressions as ie
from pyiceberg.expressions.visitors import bind
from pyspark.sql import datasource as ds

from arctic_sql.table.model import predicates
from arctic_sql.table.model.schemas import prunable_columns

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pyiceberg.schema import Schema

    from arctic_sql.table.model.table import ArcticTable

_COMPARISONS = {
    ds.EqualTo: predicates.equal_to,
    ds.GreaterThan: predicates.greater_than,
    ds.GreaterThanOrEqual: predicates.greater_than_or_equal,
    ds.LessThan: predicates.less_than,
    ds.LessThanOrEqual: predicates.less_than_or_equal,
    ds.StringStartsWith: predicates.starts_with,
}


def _column(f: ds.Filter, names: set[str]) -> str | None:
    path: tuple[str, ...] = getattr(f, "attribute", ())
    return path[0] if len(path) == 1 and path[0] in names else None


def _plain(value: object) -> bool:
    """Whether pyiceberg reads ``value`` as Spark meant it. Spark hands timestamps over as naive
    local times, which pyiceberg would read as UTC: those are not pruned by."""
    if isinstance(value, datetime.datetime):
        return value.tzinfo is not None
    return value is not None


def convert(f: ds.Filter, names: set[str]) -> ie.BooleanExpression | None:
    """One pushed filter as a pyiceberg expression, or None when it cannot be pruned by."""
    name = _column(f, names)
    if name is None:
        return None
    kind = _COMPARISONS.get(type(f))
    if kind is not None:
        value = f.value  # type: ignore[attr-defined]
        return kind(name, value) if _plain(value) else None
    if isinstance(f, ds.EqualNullSafe):
        return (
            predicates.is_null(name)
            if f.value is None
            else predicates.equal_to(name, f.value)
            if _plain(f.value)
            else None
        )
    if isinstance(f, ds.In):
        values = [v for v in f.value if v is not None]
        return predicates.is_in(name, set(values)) if values and all(_plain(v) for v in values) else None
    if isinstance(f, ds.IsNull):
        return predicates.is_null(name)
    if isinstance(f, ds.IsNotNull):
        return predicates.not_null(name)
    return None


def row_filter(
    filters: Iterable[ds.Filter], schema: Schema, allowed: set[str] | None = None
) -> ie.BooleanExpression:
    """The AND of the filters pyiceberg can prune by (on ``allowed`` columns only, when given)."""
    names = set(prunable_columns(schema)) if allowed is None else set(allowed) & set(prunable_columns(schema))
    result: ie.BooleanExpression = ie.AlwaysTrue()
    for f in filters:
        converted = convert(f, names)
        if converted is None:
            continue
        try:
            bind(schema, converted, case_sensitive=True)
        except Exception:  # noqa: BLE001, S112 - a literal pyiceberg cannot read as the column type: no pruning
            continue
        result = converted if isinstance(result, ie.AlwaysTrue) else ie.And(result, converted)
    return result


def key_hashes(filters: Sequence[ds.Filter], table: ArcticTable) -> frozenset[int] | None:
    """Spark xxhash64 of each key the filters look up (``=`` or ``IN`` on every key column), to prune
    by tree node; None when they do not pin the key or a key cannot be hashed."""
    from arctic_sql.table.format.keyhash import hash_types, key_combinations, lookup_hashes

    keys = table.primary_key
    if not keys:
        return None
    choices: dict[str, set] = {}
    for f in filters:
        name = _column(f, set(keys))
        if name is None:
            continue
        if isinstance(f, ds.EqualTo):
            values = {f.value}
        elif isinstance(f, ds.In):
            values = set(f.value)
        else:
            continue
        choices[name] = choices[name] & values if name in choices else values
    return lookup_hashes(key_combinations(keys, choices), hash_types(table.key_types, table.key_as_int))
