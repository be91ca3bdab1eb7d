"""Which materialized-view queries refresh incrementally, and the SQL each refresh runs.

Pure sqlglot, no Spark and no catalog: the caller gives the query (its table names already
qualified), the output column names Spark gave it, and the primary key of each source. The result
says how the view refreshes and, when it must recompute everything, why (DESCRIBE MATERIALIZED VIEW
prints it). Three incremental shapes:

- ``filter``: filters and projections over one keyed table. The view's key is the source's key
  (under the names the projection gives it); a refresh runs the query over the net changes per key.
- ``aggregate``: GROUP BY plain columns with count(*), count(x), sum(x), avg(x). The view keeps
  hidden state columns (``__mv_rows``, ``__mv_sum_i``, ``__mv_count_i``) and a refresh adds the
  signed contributions of the full change feed's pre- and post-images to them.
- ``groups``: GROUP BY with min, max or count(DISTINCT): the groups a change touches (pre- or
  post-image) are computed again from the source at the new version.
- ``join``: an inner or left join of two keyed tables whose ON equates every key column of the
  right one with a column of the left, so each left row has at most one view row, keyed by the
  left's key: the left rows a change touches (changed themselves, or referencing a changed right
  key) are joined again at the new versions.

Grouped views are keyed by a hidden ``__mv_group`` (the group values as one string that is never
NULL), so a NULL group value is a group as SQL says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlglot import exp

from arctic_sql.table.model.materialized import QUERY_PROPERTY, STATE_PREFIX, is_definition

__all__ = ["QUERY_PROPERTY", "STATE_PREFIX", "is_definition"]

ROWS = f"{STATE_PREFIX}rows"
SIGN = f"{STATE_PREFIX}sign"
# A grouped view's key: its group values encoded as one string that is never NULL, so a NULL group
# is a group as SQL says (a key column cannot hold NULL; the group columns themselves can).
GROUP_KEY = f"{STATE_PREFIX}group"

# Functions whose value changes from one run to the next: a view over them has no stable rows.
_VOLATILE = frozenset(
    {
        "rand",
        "random",
        "randn",
        "uuid",
        "current_timestamp",
        "current_date",
        "now",
        "shuffle",
        "localtimestamp",
    }
)


class Shape(StrEnum):
    FILTER = "filter"
    AGGREGATE = "aggregate"
    GROUPS = "groups"
    JOIN = "join"
    FULL = "full"


class Kind(StrEnum):
    COUNT_STAR = "count(*)"
    COUNT = "count"
    SUM = "sum"
    AVG = "avg"
    MIN = "min"
    MAX = "max"
    COUNT_DISTINCT = "count(DISTINCT)"


_ADDITIVE = frozenset({Kind.COUNT_STAR, Kind.COUNT, Kind.SUM, Kind.AVG})


@dataclass(frozen=True)
class Aggregate:
    """One aggregate of the select list: its kind, its argument's SQL and its output column."""

    kind: Kind
    argument: str | None
    output: str
    index: int

    @property
    def sum_column(self) -> str:
        return f"{STATE_PREFIX}sum_{self.index}"

    @property
    def count_column(self) -> str:
        return f"{STATE_PREFIX}count_{self.index}"


@dataclass(frozen=True)
class JoinSides:
    """A ``join`` view's sources (``db.t``) and the ON equalities that find the right row of a left
    row: (left column, right key column), one per key column of the right source."""

    left: str
    right: str
    on: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Analysis:
    """How a view refreshes. ``key``: the view's primary key (output names; empty: no key, the view is
    an append-only table refreshed in full). ``source_key``: the source's key columns in the same
    order (``filter`` views). ``groups``: (source column, output name) of the GROUP BY."""

    shape: Shape
    reason: str
    key: tuple[str, ...] = ()
    source_key: tuple[str, ...] = ()
    groups: tuple[tuple[str, str], ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    where: str | None = None
    join: JoinSides | None = None

    @property
    def incremental(self) -> bool:
        return self.shape is not Shape.FULL

    @property
    def shown_key(self) -> tuple[str, ...]:
        """The key as users see it: the GROUP BY columns of a grouped view (whose real key is the
        hidden ``__mv_group``), else the key."""
        return tuple(out for _, out in self.groups) if self.groups else self.key

    @property
    def hidden_columns(self) -> tuple[str, ...]:
        """Every column the view keeps beside its outputs: the group key, then the state."""
        return ((GROUP_KEY,) if self.groups else ()) + self.state_columns

    @property
    def state_columns(self) -> tuple[str, ...]:
        """The hidden columns an ``aggregate`` view keeps beside its outputs."""
        if self.shape is not Shape.AGGREGATE:
            return ()
        columns = [ROWS]
        for a in self.aggregates:
            if a.kind in (Kind.SUM, Kind.AVG):
                columns.append(a.sum_column)
            if a.kind in (Kind.COUNT, Kind.SUM, Kind.AVG):
                columns.append(a.count_column)
        return tuple(columns)


def source_names(query: exp.Expression) -> list[str]:
    """The tables ``query`` reads, as ``db.t`` in lower case (a CTE's name is not a table)."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    names: list[str] = []
    for node in query.find_all(exp.Table):
        parts = [p.name.lower() for p in node.parts]
        if not node.name or isinstance(node.this, exp.Func) or (len(parts) == 1 and parts[0] in ctes):
            continue
        name = ".".join(parts[-2:])
        if name not in names:
            names.append(name)
    return names


def analyse(query: exp.Expression, names: Sequence[str], keys: Mapping[str, Sequence[str]]) -> Analysis:
    """How the view ``query`` refreshes; ``names``: its output columns; ``keys``: each source's
    primary key by ``db.t`` (empty for a table without one)."""
    sources = source_names(query)
    obstacle = _obstacle(query, sources)
    if obstacle is not None:
        return Analysis(Shape.FULL, obstacle)
    assert isinstance(query, exp.Select)
    if query.args.get("joins"):
        return _join_view(query, names, keys)
    source_key = tuple(keys.get(sources[0], ()))
    if not source_key:
        return Analysis(
            Shape.FULL, f"the source {sources[0]} has no primary key, so it has no change feed per key"
        )
    where = query.args.get("where")
    where_sql = where.this.sql(dialect="spark") if where is not None else None
    items = query.expressions
    if len(items) != len(names):
        return Analysis(Shape.FULL, "the select list's columns could not be matched to the view's")
    group = query.args.get("group")
    has_aggregates = any(True for item in items for _ in item.find_all(exp.AggFunc))
    if group is None and not has_aggregates:
        return _filter_view(items, names, source_key, where_sql)
    if group is None:
        return Analysis(Shape.FULL, "an aggregate without GROUP BY has one row and no key")
    return _aggregate_view(group, items, names, where_sql)


def _obstacle(query: exp.Expression, sources: list[str]) -> str | None:
    """Why ``query`` cannot refresh incrementally at all, or None."""
    if not isinstance(query, exp.Select):
        return "only a single SELECT refreshes incrementally (this is a set operation or another query form)"
    if query.args.get("with"):
        return "a WITH clause is not refreshed incrementally"
    joins = query.args.get("joins") or []
    if len(joins) > 1:
        return "joins of more than two tables are not refreshed incrementally"
    read = [(query.args.get("from_") or exp.From()).this, *(j.this for j in joins)]
    if joins and (len(sources) != 2 or not all(isinstance(t, exp.Table) for t in read)):
        return "a join refreshes incrementally only between two different tables read directly"
    if len(sources) != 1 + len(joins) or not isinstance(read[0], exp.Table):
        return "the query must read exactly one table directly (no subquery in FROM)"
    for node, why in (
        (exp.Subquery, "a subquery"),
        (exp.Window, "a window function"),
        (exp.Version, "time travel inside the query"),
    ):
        if any(True for _ in query.find_all(node)):
            return f"{why} is not refreshed incrementally"
    for clause in ("distinct", "having", "order", "limit", "offset", "qualify"):
        if query.args.get(clause):
            return f"{clause.upper()} is not refreshed incrementally"
    for func in query.find_all(exp.Func):
        name = (func.name if isinstance(func, exp.Anonymous) else func.sql_name()).lower()
        if name in _VOLATILE or isinstance(func, (exp.Rand, exp.CurrentTimestamp, exp.CurrentDate)):
            return f"{name}() gives a different value on every run"
    return None


def _filter_view(
    items: list[exp.Expression], names: Sequence[str], source_key: tuple[str, ...], where: str | None
) -> Analysis:
    if any(isinstance(item, exp.Star) for item in items):
        return Analysis(
            Shape.FILTER, "filter and projection over one keyed table", source_key, source_key, where=where
        )
    outputs: dict[str, str] = {}
    for item, name in zip(items, names, strict=True):
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Column) and inner.name.lower() in {k.lower() for k in source_key}:
            outputs.setdefault(inner.name.lower(), name)
    missing = [k for k in source_key if k.lower() not in outputs]
    if missing:
        return Analysis(
            Shape.FULL, f"the select list leaves out the source's key column(s) {', '.join(missing)}"
        )
    key = tuple(outputs[k.lower()] for k in source_key)
    return Analysis(Shape.FILTER, "filter and projection over one keyed table", key, source_key, where=where)


def _join_view(query: exp.Select, names: Sequence[str], keys: Mapping[str, Sequence[str]]) -> Analysis:
    join = query.args["joins"][0]
    side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
    if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER") or join.args.get("using"):
        shown = " ".join(w for w in (side, kind) if w) or "this"
        return Analysis(
            Shape.FULL,
            f"only an inner or left join ON equalities refreshes incrementally, not a {shown} join",
        )
    nodes = (query.args["from_"].this, join.this)
    left, right = (".".join(p.name.lower() for p in n.parts[-2:]) for n in nodes)
    left_alias, right_alias = (n.alias_or_name.lower() for n in nodes)
    left_key, right_key = tuple(keys.get(left, ())), tuple(keys.get(right, ()))
    if not left_key:
        return Analysis(Shape.FULL, f"the join's left source {left} has no primary key")
    if not right_key:
        return Analysis(
            Shape.FULL,
            f"the join's right source {right} has no primary key, so a left row may join many rows",
        )
    equal = _equalities(join.args.get("on"), left_alias, right_alias)
    missing = [k for k in right_key if k.lower() not in equal]
    if missing:
        return Analysis(
            Shape.FULL,
            f"the join's ON must equate each key column of its right source {right} with a column of "
            f"{left_alias} (qualified), so each left row joins one row at most: {', '.join(missing)} is not",
        )
    if query.args.get("group") or any(True for item in query.expressions for _ in item.find_all(exp.AggFunc)):
        return Analysis(Shape.FULL, "a join with GROUP BY or aggregates is refreshed in full")
    if any(isinstance(item, exp.Star) or isinstance(item.this, exp.Star) for item in query.expressions):
        return Analysis(Shape.FULL, "a join that selects * is refreshed in full (select the columns by name)")
    outputs: dict[str, str] = {}
    for item, name in zip(query.expressions, names, strict=True):
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Column) and inner.table.lower() == left_alias:
            outputs.setdefault(inner.name.lower(), name)
    absent = [k for k in left_key if k.lower() not in outputs]
    if absent:
        return Analysis(
            Shape.FULL,
            f"the select list leaves out the join's left key column(s) {', '.join(absent)} "
            f"(qualified by {left_alias}), which key the view",
        )
    sides = JoinSides(left, right, tuple((equal[k.lower()], k) for k in right_key))
    reason = (
        f"{'left' if side else 'inner'} join on the right source's key: the left rows that changed or "
        "reference a changed right key are joined again"
    )
    key = tuple(outputs[k.lower()] for k in left_key)
    return Analysis(Shape.JOIN, reason, key, left_key, join=sides)


def _equalities(on: exp.Expression | None, left: str, right: str) -> dict[str, str]:
    """The ``left.x = right.y`` conjuncts of ``on`` (either way round) as {y (lower case): x}."""
    equal: dict[str, str] = {}
    for condition in _conjuncts(on):
        if isinstance(condition, exp.EQ) and all(isinstance(c, exp.Column) for c in condition.args.values()):
            a, b = condition.this, condition.expression
            if (a.table.lower(), b.table.lower()) == (right, left):
                a, b = b, a
            if (a.table.lower(), b.table.lower()) == (left, right):
                equal.setdefault(b.name.lower(), a.name)
    return equal


def _conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    if condition is None:
        return []
    if isinstance(condition, exp.And):
        return [*_conjuncts(condition.this), *_conjuncts(condition.expression)]
    return [condition.unnest() if isinstance(condition, exp.Paren) else condition]


def _aggregate_view(
    group: exp.Group, items: list[exp.Expression], names: Sequence[str], where: str | None
) -> Analysis:
    columns = group.expressions
    if not columns or not all(isinstance(c, exp.Column) for c in columns):
        return Analysis(Shape.FULL, "GROUP BY must list plain columns to refresh incrementally")
    grouped = {c.name.lower(): c.name for c in columns}
    outputs: dict[str, str] = {}
    aggregates: list[Aggregate] = []
    for index, (item, name) in enumerate(zip(items, names, strict=True)):
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Column) and inner.name.lower() in grouped:
            outputs.setdefault(inner.name.lower(), name)
            continue
        kind = _kind(inner)
        if kind is None:
            return Analysis(
                Shape.FULL,
                f"{inner.sql(dialect='spark')} is not a GROUP BY column or one of count, sum, avg, min, max",
            )
        argument = inner.this.expressions[0] if kind is Kind.COUNT_DISTINCT else inner.this
        if kind is not Kind.COUNT_STAR and any(True for _ in argument.find_all(exp.AggFunc)):
            return Analysis(Shape.FULL, f"{inner.sql(dialect='spark')} nests an aggregate")
        text = None if kind is Kind.COUNT_STAR else argument.sql(dialect="spark")
        aggregates.append(Aggregate(kind, text, name, index))
    missing = [grouped[g] for g in grouped if g not in outputs]
    if missing:
        return Analysis(
            Shape.FULL,
            f"the GROUP BY column(s) {', '.join(missing)} are not selected, so the view has no key",
        )
    groups = tuple((grouped[g], outputs[g]) for g in grouped)
    key = (GROUP_KEY,)
    if all(a.kind in _ADDITIVE for a in aggregates):
        reason = (
            "GROUP BY with count/sum/avg: the changes' pre- and post-images are added to hidden state columns"
        )
        return Analysis(
            Shape.AGGREGATE, reason, key, groups=groups, aggregates=tuple(aggregates), where=where
        )
    reason = "GROUP BY with min/max/count(DISTINCT): the groups the changes touch are computed again"
    return Analysis(Shape.GROUPS, reason, key, groups=groups, aggregates=tuple(aggregates), where=where)


def _kind(node: exp.Expression) -> Kind | None:
    if isinstance(node, exp.Count):
        if isinstance(node.this, exp.Star):
            return Kind.COUNT_STAR
        if isinstance(node.this, exp.Distinct):
            return Kind.COUNT_DISTINCT if len(node.this.expressions) == 1 else None
        return Kind.COUNT if node.this is not None else None
    if isinstance(node, exp.Sum):
        return Kind.SUM
    if isinstance(node, exp.Avg):
        return Kind.AVG
    if isinstance(node, exp.Min):
        return Kind.MIN
    if isinstance(node, exp.Max):
        return Kind.MAX
    return None


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def group_key(columns: Sequence[str]) -> str:
    """SQL for the ``__mv_group`` of rows whose group values are ``columns``: their JSON, NULLs kept
    (``{"0":null}`` is not ``{"0":"null"}``), timestamps in UTC to the microsecond, so every session
    encodes a group alike and two groups never share a key."""
    fields = ", ".join(f"'{i}', {_quoted(c)}" for i, c in enumerate(columns))
    options = (
        "map('ignoreNullFields', 'false', 'timeZone', 'UTC', "
        "'timestampFormat', 'yyyy-MM-dd HH:mm:ss.SSSSSS', 'timestampNTZFormat', 'yyyy-MM-dd HH:mm:ss.SSSSSS')"
    )
    return f"to_json(named_struct({fields}), {options})"


def state_query(analysis: Analysis, relation: str, sign: str = "1") -> str:
    """The state of an ``aggregate`` view over ``relation`` (a table or view name), each row counted
    ``sign`` times: the group columns, ``__mv_rows`` and the hidden sums and counts. Over the source
    (sign 1) it is the view's state from scratch; over the full change feed (sign +1 for inserts and
    post-images, -1 for deletes and pre-images) it is what a refresh adds."""
    selected = [f"{_quoted(src)} AS {_quoted(out)}" for src, out in analysis.groups]
    selected.append(f"CAST(SUM({sign}) AS BIGINT) AS {ROWS}")
    for a in analysis.aggregates:
        present = f"CASE WHEN ({a.argument}) IS NOT NULL THEN {sign} ELSE 0 END"
        if a.kind in (Kind.SUM, Kind.AVG):
            selected.append(f"SUM(({sign}) * ({a.argument})) AS {a.sum_column}")
        if a.kind in (Kind.COUNT, Kind.SUM, Kind.AVG):
            selected.append(f"CAST(SUM({present}) AS BIGINT) AS {a.count_column}")
    where = f" WHERE {analysis.where}" if analysis.where else ""
    group = ", ".join(_quoted(src) for src, _ in analysis.groups)
    return f"SELECT {', '.join(selected)} FROM {relation}{where} GROUP BY {group}"


def output_expressions(analysis: Analysis, types: Mapping[str, str]) -> dict[str, str]:
    """Each aggregate output of an ``aggregate`` view as SQL over its state columns, cast to the
    Spark type ``types`` gives the output."""
    result: dict[str, str] = {}
    for a in analysis.aggregates:
        if a.kind is Kind.COUNT_STAR:
            value = ROWS
        elif a.kind is Kind.COUNT:
            value = a.count_column
        elif a.kind is Kind.SUM:
            value = f"CASE WHEN {a.count_column} > 0 THEN {a.sum_column} END"
        else:
            value = f"CASE WHEN {a.count_column} > 0 THEN {a.sum_column} / {a.count_column} END"
        result[a.output] = f"CAST({value} AS {types[a.output]})"
    return result
