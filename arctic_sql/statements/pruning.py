"""File pruning: a query's WHERE conjuncts on one arctic table become a pyiceberg row filter.

Spark never sees Iceberg partitions or column bounds, since reads hand it plain file lists. So the
planner asks pyiceberg which files can hold matching rows (partition pruning and min/max pruning)
and gives Spark only those. Pruning is only an optimization: the query keeps its WHERE clause, so
every conversion here must be *inclusive* (never drop a file that could hold a matching row), and a
conjunct that cannot be converted is simply left out.

Change files may only be pruned by conjuncts on primary-key columns: a delete row has nulls in its
other columns, and a newer upsert that fails a non-key predicate must still hide its older base row.
"""

from __future__ import annotations

import datetime
import decimal

from pyiceberg import expressions as ie
from pyiceberg import types as it
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
from sqlglot import exp

from arctic_sql.table.format.keyhash import key_combinations
from arctic_sql.table.model import predicates
from arctic_sql.table.model.schemas import prunable_columns

_COMPARISONS = {
    exp.EQ: (predicates.equal_to, predicates.equal_to),
    exp.NEQ: (predicates.not_equal_to, predicates.not_equal_to),
    exp.LT: (predicates.less_than, predicates.greater_than),
    exp.LTE: (predicates.less_than_or_equal, predicates.greater_than_or_equal),
    exp.GT: (predicates.greater_than, predicates.less_than),
    exp.GTE: (predicates.greater_than_or_equal, predicates.less_than_or_equal),
}


def conjuncts(where: exp.Expr | None) -> list[exp.Expr]:
    if where is None:
        return []
    node = where.this if isinstance(where, exp.Where) else where
    return list(node.flatten()) if isinstance(node, exp.And) else [node]


def _literal(node: exp.Expr) -> object:
    node = node.unnest() if isinstance(node, exp.Paren) else node
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        if any(c in text for c in "eE"):
            return float(text)  # 1e3 is a DOUBLE in Spark
        return decimal.Decimal(text) if "." in text else int(text)  # 12.345 is an exact DECIMAL
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = _literal(node.this)
        return -value if isinstance(value, int | float | decimal.Decimal) else _NOT_A_LITERAL
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        if node.to.this in _ZONED:
            return _timestamp(node.this.this, zoned=True)
        if node.to.this == exp.DataType.Type.TIMESTAMPNTZ:
            return _timestamp(node.this.this, zoned=False)
        return node.this.this  # DATE '2024-01-01' and friends: pyiceberg converts strings per column type
    return _NOT_A_LITERAL


_ZONED = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ}


def _timestamp(text: str, zoned: bool) -> object:
    """A Spark timestamp literal in the ISO 8601 form pyiceberg reads: with its offset for TIMESTAMP,
    which is pruned by only when the literal names its zone (else Spark reads it in the session's
    zone), and without one for TIMESTAMP_NTZ."""
    text = text.strip()
    if text.endswith(" UTC"):
        text = text[: -len(" UTC")] + "+00:00"
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        return _NOT_A_LITERAL
    return value.isoformat() if zoned == (value.tzinfo is not None) else _NOT_A_LITERAL


_NOT_A_LITERAL = object()


def _fits(node: exp.Expr, value: object, column_type: it.IcebergType | None) -> bool:
    """Whether ``value`` (of literal ``node``) compares with the column as pyiceberg would bind it:
    exactly, with no rounding and no change of type. Spark compares a STRING column with a DATE by
    casting the column (' 2024-06-01' equals DATE '2024-06-01'), a DECIMAL(10,2) column with 12.345
    in the wider type, an INT with 1.5 as a decimal; pyiceberg would compare strings, round 12.345 to
    12.35, or cut 1.5 to 1, and prune files that hold matches. Such a conjunct is not pruned by."""
    while isinstance(node, exp.Paren | exp.Neg):
        node = node.this
    cast = node.to.this if isinstance(node, exp.Cast) else None
    if isinstance(column_type, it.StringType):
        return isinstance(value, str) and cast is None
    if isinstance(column_type, it.DecimalType):
        if isinstance(value, decimal.Decimal):
            # A letter for NaN and the infinities, which no literal of a column is.
            exponent = value.as_tuple().exponent
            return isinstance(exponent, int) and -exponent <= column_type.scale
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(column_type, it.IntegerType | it.LongType):
        if isinstance(value, str):
            return cast is None and value.strip().lstrip("+-").isdigit()
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(column_type, it.DateType):
        return isinstance(value, str) and cast in (None, exp.DataType.Type.DATE)
    if isinstance(column_type, it.TimestampType | it.TimestamptzType):
        return isinstance(value, str) and cast != exp.DataType.Type.DATE
    if isinstance(column_type, it.BooleanType):
        return isinstance(value, bool)
    return True


class _Converter:
    def __init__(
        self,
        columns: dict[str, str],
        qualifiers: set[str],
        allowed: set[str] | None,
        types: dict[str, it.IcebergType] | None = None,
    ) -> None:
        self.columns = columns  # lower-case name -> table column name
        self.qualifiers = qualifiers  # lower-case names a column may be qualified with
        self.allowed = allowed  # restrict to these table columns (primary key), or None
        self.types = types or {}  # table column name -> its type

    def literal(self, node: exp.Expr, name: str | None) -> object:
        """``node``'s value for comparing with column ``name``, or _NOT_A_LITERAL (see _fits)."""
        value = _literal(node)
        if name is None or value is _NOT_A_LITERAL or not _fits(node, value, self.types.get(name)):
            return _NOT_A_LITERAL
        return value

    def column(self, node: exp.Expr) -> str | None:
        if not isinstance(node, exp.Column):
            return None
        if (node.table or "").lower() not in self.qualifiers:
            return None
        name = self.columns.get(node.name.lower())
        if name is None or (self.allowed is not None and name not in self.allowed):
            return None
        return name

    def convert(self, node: exp.Expr) -> ie.BooleanExpression | None:
        if isinstance(node, exp.Paren):
            return self.convert(node.this)
        if isinstance(node, exp.And):
            left, right = self.convert(node.this), self.convert(node.expression)
            if left is None or right is None:
                return left or right  # dropping one side of AND keeps the filter inclusive
            return ie.And(left, right)
        if isinstance(node, exp.Or):
            left, right = self.convert(node.this), self.convert(node.expression)
            return ie.Or(left, right) if left is not None and right is not None else None
        for kind, (direct, flipped) in _COMPARISONS.items():
            if type(node) is kind:
                name = self.column(node.this)
                value = self.literal(node.expression, name)
                if name is not None and value is not _NOT_A_LITERAL:
                    return direct(name, value)
                name = self.column(node.expression)
                value = self.literal(node.this, name)
                if name is not None and value is not _NOT_A_LITERAL:
                    return flipped(name, value)
                return None
        if isinstance(node, exp.In) and not node.args.get("query"):
            name = self.column(node.this)
            values = [self.literal(v, name) for v in node.expressions]
            if name is not None and values and all(v is not _NOT_A_LITERAL for v in values):
                return predicates.is_in(name, set(values))
            return None
        if isinstance(node, exp.Between):
            name = self.column(node.this)
            low, high = self.literal(node.args["low"], name), self.literal(node.args["high"], name)
            if name is not None and low is not _NOT_A_LITERAL and high is not _NOT_A_LITERAL:
                return ie.And(
                    predicates.greater_than_or_equal(name, low), predicates.less_than_or_equal(name, high)
                )
            return None
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            name = self.column(node.this)
            return predicates.is_null(name) if name is not None else None
        if (
            isinstance(node, exp.Not)
            and isinstance(node.this, exp.Is)
            and isinstance(node.this.expression, exp.Null)
        ):
            name = self.column(node.this.this)
            return predicates.not_null(name) if name is not None else None
        return None


def row_filter(
    where: exp.Expression | None,
    schema: Schema,
    qualifiers: set[str],
    allowed: set[str] | None = None,
) -> ie.BooleanExpression:
    """An inclusive pyiceberg filter for the conjuncts of ``where`` that only touch this table.

    A conjunct pyiceberg cannot bind (a literal it cannot read as the column's type, say) is left out.
    """
    columns = prunable_columns(schema)
    converter = _Converter(
        {c.lower(): c for c in columns},
        {q.lower() for q in qualifiers},
        allowed,
        {f.name: f.field_type for f in schema.fields},
    )
    result: ie.BooleanExpression = ie.AlwaysTrue()
    for conjunct in conjuncts(where):
        converted = converter.convert(conjunct)
        if converted is not None:
            try:
                bind(schema, converted, case_sensitive=True)
            except Exception:  # noqa: BLE001 - pruning is optional; the query still filters
                continue
            result = converted if isinstance(result, ie.AlwaysTrue) else ie.And(result, converted)
    return result


def pushable_where(table_node: exp.Table) -> tuple[exp.Expression | None, set[str]]:
    """The WHERE of the SELECT that reads ``table_node`` directly, and the names that qualify its columns.

    Returns (None, ...) when pruning would be unsafe: the table sits on the null-supplying side of
    an outer join, or the SELECT aggregates before filtering (a HAVING is not a WHERE).
    """
    select = table_node.parent_select
    # An alias replaces the name: in `d.t AS prev JOIN other AS t`, `t.id` is the other table's.
    qualifiers = {table_node.alias_or_name}
    if select is None or not isinstance(select, exp.Select):
        return None, qualifiers
    source = select.args.get("from_") or select.args.get("from")
    joins = select.args.get("joins") or []
    if source is None or table_node not in [source.this] + [j.this for j in joins]:
        return None, qualifiers
    for join in joins:
        if join.side:  # LEFT/RIGHT/FULL: a WHERE on the null-supplying side is not a file filter
            return None, qualifiers
    if not joins:
        qualifiers.add("")  # unqualified columns belong to the only table
    return select.args.get("where"), qualifiers


def key_lookups(
    where: exp.Expression | None, schema: Schema, qualifiers: set[str], keys: list[str]
) -> list[tuple] | None:
    """The keys a point lookup asks for (``k = v`` or ``k IN (...)`` on every key column), or None.

    Used to prune files by hash-tree node: a key can only be in the files of its node's path.
    """
    if not keys:
        return None
    converter = _Converter(
        {f.name.lower(): f.name for f in schema.fields},
        {q.lower() for q in qualifiers},
        set(keys),
        {f.name: f.field_type for f in schema.fields},
    )
    choices: dict[str, set] = {}
    for conjunct in conjuncts(where):
        converted = converter.convert(conjunct)
        if isinstance(converted, ie.EqualTo):
            values = {converted.literal.value}
        elif isinstance(converted, ie.In):
            values = {lit.value for lit in converted.literals}
        else:
            continue
        assert isinstance(converted.term, ie.Reference)  # made from a column's name
        name = converted.term.name
        choices[name] = choices[name] & values if name in choices else values
    return key_combinations(keys, choices)


def key_conjuncts(
    where: exp.Expression | None, schema: Schema, qualifiers: set[str], keys: list[str]
) -> list[exp.Expr]:
    """The conjuncts of ``where`` that :func:`key_lookups` reads as ``k = v`` or ``k IN (...)`` on a
    key column with literals of the column's own kind (whole numbers for an integer column, strings
    for a string one), which Spark compares without a cast: every row of the looked-up keys passes
    them, so a query over those rows need not evaluate them again."""
    if not keys:
        return []
    types = {f.name: f.field_type for f in schema.fields}
    converter = _Converter(
        {f.name.lower(): f.name for f in schema.fields}, {q.lower() for q in qualifiers}, set(keys), types
    )
    found = []
    for conjunct in conjuncts(where):
        converted = converter.convert(conjunct)
        if isinstance(converted, ie.EqualTo):
            values = [converted.literal.value]
        elif isinstance(converted, ie.In):
            values = [lit.value for lit in converted.literals]
        else:
            continue
        assert isinstance(converted.term, ie.Reference)  # made from a column's name
        kind = types[converted.term.name]
        if isinstance(kind, it.IntegerType | it.LongType) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        ):
            found.append(conjunct)
        elif isinstance(kind, it.StringType) and all(isinstance(v, str) for v in values):
            found.append(conjunct)
    return found
