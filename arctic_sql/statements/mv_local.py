"""An aggregate view's delta summed in this process with Arrow, for a change set the driver holds.

A refresh of an ``aggregate`` view adds the full change feed's signed contributions to the view's
hidden state (mv_analysis.state_query). When the feed was computed in the driver
(preimages.read_local), running that GROUP BY as a Spark job over a local relation was the last
Spark job of a small refresh (docs/benchmarks.md, "Materialized views"); here it is an Arrow
group-by instead, with the state query's semantics exactly:

- group columns of integer, string or boolean type (Arrow's hash grouping is Spark's for them, NULL
  a group of its own); the group key is the JSON ``to_json`` gives (mv_analysis.group_key);
- ``count(*)`` and ``count(c)`` of a plain column (any type: only NULL is looked at), ``sum(c)`` and
  ``avg(c)`` of a plain integer column: ``sign * c`` in Spark's type (INT for the narrower ones,
  BIGINT for BIGINT), summed into BIGINT; in ANSI mode a product or a group's sum that does not fit
  raises, as Spark's does, otherwise both wrap;
- a WHERE of comparisons between integer, string or boolean columns and literals, AND, OR, NOT and
  IS [NOT] NULL, with SQL's three-valued logic (Arrow's Kleene operators).

Anything else keeps the Spark job: floating and decimal sums (Arrow's summation order is not
Spark's, and decimal widening rules differ), expressions as arguments, other predicates, and group
strings holding control characters (Jackson escapes them as ``\\u001F``, Python's json as
``\\u001f``).
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from arctic_sql.errors import ExecutionError
from arctic_sql.statements.mv_analysis import GROUP_KEY, ROWS, Kind
from arctic_sql.table.reading.changes import CHANGE_TYPE
from arctic_sql.table.reading.full_changes import DELETE, UPDATE_PREIMAGE

if TYPE_CHECKING:
    from collections.abc import Callable

    from arctic_sql.statements.mv_analysis import Analysis

_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_LOW = 2**32


class _Sum(StrEnum):
    ROWS = "rows"
    COUNT = "count"
    SUM = "sum"


@dataclass(frozen=True)
class State:
    """One state column: what it sums (``column``: the source column read, None for ``rows``) and the
    output it serves (named in errors)."""

    name: str
    what: _Sum
    column: str | None
    output: str


@dataclass(frozen=True)
class LocalDelta:
    """How a view's delta is summed here: its group columns (source column, output), its filter and
    its state columns, all in the feed's column names."""

    groups: tuple[tuple[str, str], ...]
    where: pc.Expression | None
    states: tuple[State, ...]


def plan(analysis: Analysis, schema: pa.Schema) -> LocalDelta | None:
    """How ``analysis``'s delta is summed over feed rows of ``schema`` (the source's columns), or
    None when some function, argument, type or predicate is not done exactly here."""
    columns = {f.name.lower(): f for f in schema}
    groups = []
    for source, output in analysis.groups:
        field = columns.get(source.lower())
        if field is None or not _groupable(field.type):
            return None
        groups.append((field.name, output))
    where = None
    if analysis.where is not None:
        where = _predicate(sqlglot.parse_one(analysis.where, read="spark"), columns)
        if where is None:
            return None
    states = [State(ROWS, _Sum.ROWS, None, "count(*)")]
    for a in analysis.aggregates:
        if a.kind is Kind.COUNT_STAR:
            continue
        field = _plain_column(a.argument, columns)
        if field is None:
            return None
        if a.kind in (Kind.SUM, Kind.AVG):
            if not pa.types.is_integer(field.type) or pa.types.is_unsigned_integer(field.type):
                return None
            states.append(State(a.sum_column, _Sum.SUM, field.name, a.output))
        states.append(State(a.count_column, _Sum.COUNT, field.name, a.output))
    return LocalDelta(tuple(groups), where, tuple(states))


def delta(rows: pa.Table, local: LocalDelta, *, checked: bool, view: str) -> pa.Table | None:
    """The state query's result over the feed ``rows`` (signed: +1 for inserts and post-images, -1
    for deletes and pre-images): the shown group columns, the group key, then the state columns
    (BIGINT). None when a group value cannot be keyed here (a control character in a string).
    ``checked``: Spark's ANSI mode (an overflow raises a one-line error naming ``view``)."""
    if local.where is not None:
        rows = rows.filter(local.where)
    for source, _ in local.groups:
        column = rows.column(source)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            if pc.any(pc.match_substring_regex(column, "[\\x00-\\x1f]")).as_py():
                return None
    negative = pc.is_in(rows.column(CHANGE_TYPE), value_set=pa.array([UPDATE_PREIMAGE, DELETE]))
    sign = pc.if_else(negative, pa.scalar(-1, pa.int64()), pa.scalar(1, pa.int64()))
    names = [f"g{i}" for i in range(len(local.groups))]
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        n: rows.column(source) for n, (source, _) in zip(names, local.groups, strict=True)
    }
    sums: list[str] = []
    for i, state in enumerate(local.states):
        if state.what is _Sum.ROWS:
            columns[f"s{i}"] = sign
        elif state.what is _Sum.COUNT:
            present = pc.is_valid(rows.column(state.column))
            columns[f"s{i}"] = pc.if_else(present, sign, pa.scalar(0, pa.int64()))
        else:
            product = _product(sign, rows.column(state.column), checked=checked, view=view, state=state)
            columns[f"s{i}"] = product
            if checked:  # the group's exact sum, from halves no int64 sum of them can overflow
                columns[f"h{i}"] = pc.shift_right(product, 32)
                columns[f"l{i}"] = pc.bit_wise_and(product, pa.scalar(_LOW - 1, pa.int64()))
        sums.append(f"s{i}")
    extra = [n for n in columns if n[0] in "hl"]
    table = pa.table(columns)
    grouped = table.group_by(names, use_threads=False).aggregate([(n, "sum") for n in [*sums, *extra]])
    if checked:
        for i, state in enumerate(local.states):
            if state.what is _Sum.SUM:
                _check(grouped.column(f"h{i}_sum"), grouped.column(f"l{i}_sum"), view, state)
    values = [grouped.column(n).to_pylist() for n in names]
    keys = [  # to_json's text: no spaces, non-ASCII as it is, NULL kept
        json.dumps({str(i): v for i, v in enumerate(group)}, separators=(",", ":"), ensure_ascii=False)
        for group in zip(*values, strict=True)
    ]
    out = [grouped.column(n) for n in names]
    out.append(pa.array(keys, pa.string()))
    out.extend(grouped.column(f"{s}_sum") for s in sums)
    shown = [output for _, output in local.groups]
    return pa.Table.from_arrays(out, names=[*shown, GROUP_KEY, *(s.name for s in local.states)])


def overflow(view: str, state_output: str, detail: str) -> ExecutionError:
    """The one-line error of a sum that overflows BIGINT in ANSI mode."""
    return ExecutionError(
        f"REFRESH MATERIALIZED VIEW {view}: [ARITHMETIC_OVERFLOW] the sum behind column {state_output} "
        f"overflows BIGINT ({detail}); spark.sql.ansi.enabled is true, so nothing was written"
    )


def _product(
    sign: pa.Array, values: pa.ChunkedArray, *, checked: bool, view: str, state: State
) -> pa.Array | pa.ChunkedArray:
    """``sign * values`` as Spark computes ``(sign) * (c)``: in INT for integer types up to INT,
    in BIGINT for BIGINT, then widened to BIGINT for the sum."""
    wide = values.type == pa.int64()
    kind = pa.int64() if wide else pa.int32()
    multiply = pc.multiply_checked if checked else pc.multiply
    try:
        product = multiply(sign.cast(kind), values.cast(kind))
    except pa.ArrowInvalid as e:
        raise overflow(view, state.output, f"the sign times a value of {state.column}: {e}") from None
    return product if wide else product.cast(pa.int64())


def _check(high: pa.ChunkedArray, low: pa.ChunkedArray, view: str, state: State) -> None:
    for h, lo in zip(high.to_pylist(), low.to_pylist(), strict=True):
        if h is not None and not _INT_MIN <= h * _LOW + lo <= _INT_MAX:
            raise overflow(view, state.output, f"a group's change of {state.column} is {h * _LOW + lo}")


def _groupable(kind: pa.DataType) -> bool:
    return (
        (pa.types.is_integer(kind) and not pa.types.is_unsigned_integer(kind))
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_boolean(kind)
    )


def _plain_column(argument: str | None, columns: dict[str, pa.Field]) -> pa.Field | None:
    if argument is None:
        return None
    node = sqlglot.parse_one(argument, read="spark")
    return columns.get(node.name.lower()) if isinstance(node, exp.Column) else None


_COMPARISONS: dict[type[exp.Expr], Callable[[Any, Any], Any]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
}


def _predicate(node: exp.Expr, columns: dict[str, pa.Field]) -> pc.Expression | None:
    """``node`` (a WHERE) as an Arrow expression with SQL's semantics, or None where it has none here."""
    if isinstance(node, exp.Paren):
        return _predicate(node.this, columns)
    if isinstance(node, (exp.And, exp.Or)):
        a, b = _predicate(node.this, columns), _predicate(node.expression, columns)
        if a is None or b is None:
            return None
        return a & b if isinstance(node, exp.And) else a | b  # Kleene and/or: SQL's NULL logic
    if isinstance(node, exp.Not):
        inner = _predicate(node.this, columns)
        return None if inner is None else ~inner
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        operand = _operand(node.this, columns)
        return None if operand is None else operand[0].is_null()
    if isinstance(node, exp.Column):
        operand = _operand(node, columns)
        return operand[0] if operand is not None and operand[1] == "bool" else None
    compare = _COMPARISONS.get(type(node))
    if compare is None:
        return None
    left, right = _operand(node.this, columns), _operand(node.expression, columns)
    if left is None or right is None or left[1] != right[1]:
        return None  # Spark would cast one side; only like types compare here
    result: pc.Expression = compare(left[0], right[0])
    return result


def _operand(node: exp.Expr, columns: dict[str, pa.Field]) -> tuple[pc.Expression, str] | None:
    """A column or literal as an Arrow expression and its type family (int, str, bool)."""
    if isinstance(node, exp.Paren):
        return _operand(node.this, columns)
    if isinstance(node, exp.Column):
        field = columns.get(node.name.lower())
        if field is None:
            return None
        family = _family(field.type)
        return (pc.field(field.name), family) if family is not None else None
    if isinstance(node, exp.Boolean):
        return pc.scalar(bool(node.this)), "bool"
    if isinstance(node, exp.Literal):
        if node.is_string:
            return pc.scalar(node.this), "str"
        return (pc.scalar(int(node.this)), "int") if node.this.isdigit() else None
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and node.this.this.isdigit():
        return pc.scalar(-int(node.this.this)), "int"
    return None


def _family(kind: pa.DataType) -> str | None:
    if pa.types.is_integer(kind) and not pa.types.is_unsigned_integer(kind):
        return "int"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "str"
    return "bool" if pa.types.is_boolean(kind) else None


def summed_here(
    delta: pa.Table, current: pa.Table, shown: list[str], analysis: Analysis, *, checked: bool, view: str
) -> pa.Table | None:
    """The touched groups' state, ``delta``'s plus ``current``'s (the view's rows of those groups,
    unique by group key), as the refresh's Spark join computes it (``coalesce(o.c, 0) +
    coalesce(d.c, 0)``): the groups of ``delta`` with their shown columns. Only for integer and
    floating state columns of one type on both sides, where Arrow's addition is Spark's (``checked``:
    integer overflow raises the one-line error of :func:`overflow`, as Spark's ANSI mode raises);
    None otherwise (Spark joins them then)."""
    state = analysis.state_columns
    types = [delta.schema.field(c).type for c in state]
    if any(not (pa.types.is_integer(t) or pa.types.is_floating(t)) for t in types):
        return None
    if any(current.schema.field(c).type != t for c, t in zip(state, types, strict=True)):
        return None
    outputs = {ROWS: "count(*)"}
    for a in analysis.aggregates:
        outputs.update({a.sum_column: a.output, a.count_column: a.output})
    at = pc.index_in(delta.column(GROUP_KEY), value_set=current.column(GROUP_KEY).combine_chunks())
    columns = [delta.column(c) for c in shown]
    for c, t in zip(state, types, strict=True):
        old = current.column(c).combine_chunks().take(at).fill_null(pa.scalar(0, t))
        add = pc.add_checked if checked and pa.types.is_integer(t) else pc.add
        try:
            columns.append(add(old, delta.column(c).fill_null(pa.scalar(0, t))))
        except pa.ArrowInvalid as e:
            raise overflow(view, outputs[c], f"the view's state plus the change: {e}") from None
    return pa.Table.from_arrays(columns, names=[*shown, *state]).combine_chunks()
