"""MERGE INTO on a primary-key table, as one query that yields the change rows.

The general form joins the source with the target version it read (an outer join, full when there
are ``WHEN NOT MATCHED BY SOURCE`` clauses), picks for each joined row the first clause whose
category and condition hold (Spark's semantics), and projects each target column for that clause.

The *blind* form skips reading the target: when ``ON`` is equality on the whole primary key with
the source's same-named columns, clauses never look at target columns, and for every source row the
matched and not-matched outcomes agree (an upsert either way, or a delete that is a no-op for an
absent key), the outcome does not depend on what the target holds. That is the shape of a CDC
upsert stream (``WHEN MATCHED AND s.op = 'D' THEN DELETE WHEN MATCHED THEN UPDATE SET * WHEN NOT
MATCHED AND s.op != 'D' THEN INSERT *``), and it makes its commit cost follow the batch, not the table.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError, NoSuchColumnError
from arctic_sql.parser import to_spark_sql
from arctic_sql.statements import merge_join, runner
from arctic_sql.statements.time_travel import at_version
from arctic_sql.table.format import layout
from arctic_sql.table.format.keyhash import MAX_LOOKUP_KEYS
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import local_rows
from arctic_sql.table.writing.change_rows import REFUSE_COLUMN, is_small

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from arctic_sql.statements.context import StatementContext

SOURCE_MARK = "_arctic_s"
TARGET_MARK = "_arctic_t"
CLAUSE = "_arctic_clause"
# A source Spark estimates under this is collected for its keys (and, when it has few enough rows,
# joined from that copy): cheap next to a table read.
SMALL_SOURCE_BYTES = 64 * 1024 * 1024
_lookup_views = itertools.count(1)
# Source rows whose keys are collected as they are (then made distinct in the driver).
SOURCE_KEY_ROWS = 16 * MAX_LOOKUP_KEYS


@dataclass(frozen=True)
class Clause:
    category: str  # matched | not_matched | not_matched_by_source
    condition: exp.Expression | None
    action: str  # update | delete | insert
    assignments: dict[str, exp.Expression] | None  # None: UPDATE SET * / INSERT *
    star: bool = False  # written as SET * / INSERT * (schema evolution takes the source's columns only then)


def _bare_qualifiers(expression: exp.Merge) -> exp.Merge:
    """``expression`` with its conditions and assignments naming an unaliased table by its bare name
    (``ON db.t.id = db.s.id`` as ``ON t.id = s.id``): the plan reads both sides under those names."""
    unaliased = {
        side.name.lower()
        for side in (expression.this, expression.args["using"])
        if isinstance(side, exp.Table) and not side.alias
    }
    if not unaliased:
        return expression
    expression = expression.copy()
    for part in (expression.args["on"], expression.args["whens"]):
        for column in part.find_all(exp.Column):
            if column.table.lower() in unaliased:
                column.set("db", None)
                column.set("catalog", None)
    return expression


def _once(names: list[str], what: str) -> list[str]:
    """``names``, when none is given twice (else ``<what> column 'x' twice``)."""
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise InvalidArgumentError(f"{what} column '{twice}' twice")
    return names


def _is_star(
    assignments: dict[str, exp.Expression], action: str, source_alias: str, table: ArcticTable
) -> bool:
    """Whether listed assignments mean what ``UPDATE SET *`` / ``INSERT *`` mean: every column the
    star sets (an update leaves the key alone), each to the source's column of its name, in any
    order, bare or in a CAST to the column's own type (what writing it does anyway). dbt's
    ``merge_update_columns``, CDC tools and hand-written SQL list the columns."""
    from arctic_sql.table.model.schemas import type_string

    keys = set(table.primary_key)
    starred = {f.name for f in table.schema.fields if action == "insert" or f.name not in keys}
    if set(assignments) != starred:
        return False
    types = {
        f.name: exp.DataType.build(type_string(f.field_type), dialect="spark") for f in table.schema.fields
    }
    for name, value in assignments.items():
        if isinstance(value, exp.Cast) and not value.args.get("format") and value.to == types[name]:
            value = value.this
        if not (
            isinstance(value, exp.Column)
            and value.table.lower() == source_alias.lower()
            and not value.args.get("db")
            and value.name.lower() == name.lower()
        ):
            return False
    return True


@dataclass(frozen=True)
class SourceKeys:
    """The distinct keys a small MERGE source can match on (tuples in key order), and the source's
    rows when they were collected whole to find them (the join then reads these, not the source)."""

    values: list[tuple]
    small: bool  # the source is under Spark's broadcast threshold: its change rows may be collected here
    rows: pa.Table | None = None  # with ``schema``: the source as collected, once
    schema: StructType | None = None

    def condition(self, keys: tuple[str, ...]) -> exp.Expr:
        """``k IN (...)`` on every key column."""
        conditions = []
        for position, key in enumerate(keys):
            literals = [
                exp.Literal.number(v) if isinstance(v, int) else exp.Literal.string(v)
                for v in sorted({k[position] for k in self.values}, key=repr)
            ]
            conditions.append(exp.column(key, quoted=True).isin(*literals) if literals else exp.false())
        return exp.and_(*conditions)


@dataclass(frozen=True)
class MergePlan:
    target_alias: str
    source: exp.Expression
    source_alias: str
    on: exp.Expression
    clauses: tuple[Clause, ...]
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    key_types: tuple[object, ...] = ()  # the keys' Spark types
    # Under schema evolution, the table's columns a narrower source lacks: ``UPDATE SET *`` keeps the
    # target's value there and ``INSERT *`` writes NULL (Delta's rule); the statement reads the target.
    missing: frozenset[str] = frozenset()
    # The table's sequence.field columns the source has (:meth:`carrying`): a delete carries the
    # source's values of them, so that a late delete below a key's stored sequence is ignored.
    carried: frozenset[str] = frozenset()

    @classmethod
    def of(cls, expression: exp.Merge, table: ArcticTable) -> MergePlan:
        expression = _bare_qualifiers(expression)
        target = expression.this
        target_alias = target.alias or target.name
        using = expression.args["using"]
        source_alias = using.alias_or_name
        if not source_alias:
            raise InvalidArgumentError("MERGE INTO ... USING (subquery) needs an alias for the subquery")
        source = using.copy()
        source.set("alias", None)
        columns = tuple(f.name for f in table.schema.fields)
        lookup = {c.lower(): c for c in columns}

        def column_name(node: exp.Expression) -> str:
            name = node.name.lower()
            if name not in lookup:
                raise NoSuchColumnError(f"Column '{node.name}' does not exist in {table.identifier}")
            return lookup[name]

        clauses = []
        for when in expression.args["whens"].expressions:
            if when.args.get("matched"):
                category = "matched"
            elif when.args.get("source"):
                category = "not_matched_by_source"
            else:
                category = "not_matched"
            then = when.args["then"]
            assignments: dict[str, exp.Expression] | None = None
            if isinstance(then, exp.Update):
                action = "update"
                if not (len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star)):
                    named = _once(
                        [column_name(a.this) for a in then.expressions], "MERGE ... UPDATE SET sets"
                    )
                    assignments = dict(zip(named, [a.expression for a in then.expressions], strict=True))
                    for key in table.primary_key:
                        if key in assignments:
                            raise InvalidArgumentError(
                                f"MERGE cannot change primary key column '{key}' of {table.identifier}"
                            )
            elif isinstance(then, exp.Insert):
                action = "insert"
                if not isinstance(then.this, exp.Star):
                    names = _once([column_name(c) for c in then.this.expressions], "MERGE ... INSERT names")
                    values = then.expression.expressions
                    if len(names) != len(values):
                        raise InvalidArgumentError(
                            "MERGE ... INSERT has a different number of columns and values"
                        )
                    assignments = dict(zip(names, values, strict=True))
            else:
                action = "delete"
            if category == "not_matched" and action != "insert":
                raise InvalidArgumentError("WHEN NOT MATCHED can only INSERT")
            if category != "not_matched" and action == "insert":
                raise InvalidArgumentError("Only WHEN NOT MATCHED can INSERT")
            star = action != "delete" and assignments is None
            if assignments is not None and _is_star(assignments, action, source_alias, table):
                assignments = None  # the same as SET * / INSERT *: the blind path may take it
            clauses.append(Clause(category, when.args.get("condition"), action, assignments, star))
        from arctic_sql.table.model.schemas import to_spark_type

        return cls(
            target_alias,
            source,
            source_alias,
            expression.args["on"],
            tuple(clauses),
            columns,
            tuple(table.primary_key),
            tuple(to_spark_type(table.schema.find_field(k).field_type) for k in table.primary_key),
        )

    def carrying(self, ctx: StatementContext, sequence: Sequence[str]) -> MergePlan:
        """This plan with :attr:`carried` found among the table's ``sequence`` columns, once per
        statement (Spark's analysis of the source, no job), when a clause deletes."""
        if not sequence or not any(c.action == "delete" for c in self.clauses):
            return self
        have = {c.lower() for c in self._source_frame(ctx).columns}
        return replace(self, carried=frozenset(c for c in sequence if c.lower() in have))

    # ------------------------------------------------------------------------------------------
    def source_schema(self, ctx: StatementContext) -> StructType | None:
        """The source's columns when a clause is written ``UPDATE SET *`` / ``INSERT *`` (what
        schema evolution takes, as in Spark: only direct assignments evolve), else None."""
        if not any(c.star for c in self.clauses):
            return None
        return self._source_frame(ctx).schema

    def _source_frame(self, ctx: StatementContext) -> DataFrame:
        """The source as a DataFrame (analysed, not run)."""
        select = exp.select(exp.Star()).from_(self.source.copy())
        return runner.run_spark(ctx, select, to_spark_sql(select))

    def blind_changes(self, ctx: StatementContext) -> DataFrame | None:
        """The change rows computed without reading the target, or None when the statement's shape
        rules it out. The rows carry ``arctic_refuse``, true on a row whose outcome would depend on
        the target: the write refuses them all then (change_writer.Refused) and the caller takes
        :meth:`joined_changes`. So the check costs no Spark job of its own."""
        if not self._may_be_blind():
            return None
        source = self.source.copy()
        source.set("alias", exp.TableAlias(this=exp.to_identifier(self.source_alias)))
        # A source row with a NULL key matches no target row: only its not-matched outcome applies.
        null_key = exp.or_(*[exp.column(k, quoted=True).is_(exp.null()) for k in self.keys])
        matched = exp.Case().when(null_key, exp.null()).else_(self._first("matched"))
        outcomes = exp.select(
            exp.Star(), exp.alias_(matched, "_arctic_m"), exp.alias_(self._first("not_matched"), "_arctic_n")
        ).from_(source)
        # Blind is exact when both outcomes agree, or the matched one deletes and the other does nothing.
        refuse = exp.not_(
            exp.or_(
                exp.NullSafeEQ(this=exp.column("_arctic_m"), expression=exp.column("_arctic_n")),
                exp.and_(
                    exp.column("_arctic_m").eq(exp.Literal.string(layout.DELETE)),
                    exp.column("_arctic_n").is_(exp.null()),
                ),
            )
        )
        # The key, and the sequence a delete carries, are the source's values whatever the outcome.
        as_is = set(self.keys) | self.carried
        # Only an upsert reads the source's other columns: a DELETE-only MERGE may have just the key.
        upserts = any(c.action != "delete" for c in self.clauses if c.category != "not_matched_by_source")
        columns = [
            exp.column(c, quoted=True)
            if c in as_is
            else exp.alias_(
                exp.Case().when(
                    exp.column("_arctic_m").eq(exp.Literal.string(layout.UPSERT)), exp.column(c, quoted=True)
                )
                if upserts
                else exp.null(),
                c,
                quoted=True,
            )
            for c in self.columns
        ]
        query = (
            exp.select(
                *columns,
                exp.alias_(exp.column("_arctic_m"), layout.OP_COLUMN),
                exp.alias_(refuse.copy(), REFUSE_COLUMN),
            )
            .from_(outcomes.subquery("_arctic_blind"))
            .where(exp.or_(exp.column("_arctic_m").is_(exp.null()).not_(), refuse))
        )
        return runner.run_spark(ctx, query, to_spark_sql(query))

    def joined_changes(
        self,
        ctx: StatementContext,
        target_node: exp.Table,
        version: int,
        keys: SourceKeys | None | bool = True,
    ) -> DataFrame:
        """The change rows of the general form, from the source joined with the target at ``version``;
        ``keys``: the source's keys when already found (True: find them)."""
        if keys is True:
            keys = self.source_keys(ctx)
        return self._joined_changes(ctx, self.target_select(ctx, target_node, version, keys), keys or None)

    def changes_by_lookup(
        self, ctx: StatementContext, table: ArcticTable, version: int, keys: SourceKeys | None
    ) -> DataFrame | None:
        """:meth:`joined_changes` with the target's rows of the source's ``keys`` read here
        (``table/reading/lookup.py``) and joined as a local relation, when the source is under Spark's broadcast
        threshold; else None. No Spark job reads the target, and the change rows (no more than the
        source's) may be collected and written here (``change_writer.write``'s ``small``)."""
        from arctic_sql.table.model.schemas import spark_schema
        from arctic_sql.table.reading import lookup

        if keys is None or not keys.small:
            return None
        plan = lookup.plan_lookup(table, version, keys.values)
        if plan is None:
            return None
        rows = lookup.read_keys(table, plan, keys.values)
        view = f"arctic_lookup_{next(_lookup_views)}"
        target_schema = spark_schema(plan.schema, all_nullable=True)
        if merge_join.joinable(self, keys):
            joined, schema = merge_join.joined_rows(
                self, keys, rows, target_schema, (SOURCE_MARK, TARGET_MARK)
            )
            local_rows.frame(ctx.spark, joined, schema).createOrReplaceTempView(view)
            try:
                return self._changes_query(ctx, None, exp.select(exp.Star()).from_(exp.to_table(view)), None)
            finally:
                ctx.spark.catalog.dropTempView(view)
        local_rows.frame(ctx.spark, rows, target_schema).createOrReplaceTempView(view)
        try:  # the DataFrame holds the analyzed plan: the view is no longer needed once it is made
            target = exp.select(exp.Star(), exp.alias_(exp.true(), TARGET_MARK)).from_(exp.to_table(view))
            return self._joined_changes(ctx, target, keys)
        finally:
            ctx.spark.catalog.dropTempView(view)

    def target_select(
        self,
        ctx: StatementContext,
        target_node: exp.Table,
        version: int,
        keys: SourceKeys | None | bool = True,
    ) -> exp.Select:
        """What the join reads of the target: its rows at ``version``, only those of the source's keys
        when a small source names few enough of them. The ``k IN (...)`` it adds is a point lookup
        (statements/runner.py): the read opens only those keys' tree nodes and the files whose key
        bounds hold them, so a partial update costs what its batch costs, not what the table does.
        ``keys``: the source's keys when already found (True: find them)."""
        bare = target_node.copy()
        bare.set("alias", None)
        select = exp.select(exp.Star(), exp.alias_(exp.true(), TARGET_MARK)).from_(at_version(bare, version))
        if keys is True:
            keys = self.source_keys(ctx)
        return select if not isinstance(keys, SourceKeys) else select.where(keys.condition(self.keys))

    def source_keys(self, ctx: StatementContext) -> SourceKeys | None:
        """The distinct keys the source can match on, or None (read every row) when rows the source
        does not name may change (``NOT MATCHED BY SOURCE``), ``ON`` does not pin every key column to
        a source column of the same type, or the source is not small (Spark's estimate) or names
        more keys than a lookup takes."""
        if any(c.category == "not_matched_by_source" for c in self.clauses):
            return None
        pinned = self._pinned_keys()
        if pinned is None:
            return None
        select = self._source_select()
        source = runner.run_spark(ctx, select, to_spark_sql(select))
        if not is_small(source, SMALL_SOURCE_BYTES):
            return None
        types = {f.name.lower(): f.dataType for f in source.schema.fields}
        if any(types.get(pinned[k].lower()) != t for k, t in zip(self.keys, self.key_types, strict=True)):
            return None  # the join would cast: leave matching to it
        # A batch names each key about once. The source is collected whole, in one job with no
        # shuffle, and kept: its keys are made distinct here, and the join reads these rows as a
        # local relation instead of planning and reading the source again. A source of many rows,
        # with duplicate column names or an interval column (which Arrow cannot hold) costs Spark's
        # distinct of its keys instead.
        rows: pa.Table | None = None
        if _arrow_can_hold(source.schema):
            collected = source.limit(SOURCE_KEY_ROWS + 1).toArrow()
            actual = {name.lower(): name for name in collected.column_names}
            names = [actual[pinned[k].lower()] for k in self.keys]
            if (
                collected.num_rows <= SOURCE_KEY_ROWS
                and len(set(collected.column_names)) == collected.num_columns
                and len(set(names)) == len(names)
            ):
                rows = collected
        if rows is not None:
            named = rows.select(names).drop_null()
            distinct = named.group_by(named.column_names).aggregate([])
            values = (
                list(zip(*(c.to_pylist() for c in distinct.columns), strict=True))
                if distinct.num_rows
                else []
            )
        else:
            named_frame = source.select(*[pinned[k] for k in self.keys]).dropna(how="any")
            values = [tuple(row) for row in named_frame.distinct().limit(MAX_LOOKUP_KEYS + 1).collect()]
        if len(values) > MAX_LOOKUP_KEYS:
            return None
        if not all(isinstance(v, (int, str)) and not isinstance(v, bool) for key in values for v in key):
            return None
        return SourceKeys(values, is_small(source), rows, source.schema if rows is not None else None)

    def _pinned_keys(self) -> dict[str, str] | None:
        """The source column ``ON`` sets equal to each key column (``t.k = s.c``), or None."""
        pinned: dict[str, str] = {}
        for pair in self._on_pairs():
            if pair is not None:
                pinned.setdefault(pair[0].lower(), pair[1])
        return (
            {k: pinned[k.lower()] for k in self.keys} if all(k.lower() in pinned for k in self.keys) else None
        )

    def _on_pairs(self) -> list[tuple[str, str] | None]:
        """Each conjunct of ``ON``: (target column, source column) when it is ``t.a = s.b`` (either
        way round), else None."""
        target, source = self.target_alias.lower(), self.source_alias.lower()
        pairs: list[tuple[str, str] | None] = []
        for part in self.on.flatten() if isinstance(self.on, exp.And) else [self.on]:
            sides = [part.this, part.expression] if isinstance(part, exp.EQ) else []
            by_table = {s.table.lower(): s for s in sides if isinstance(s, exp.Column)}
            pairs.append(
                (by_table[target].name, by_table[source].name)
                if len(sides) == 2 and set(by_table) == {target, source}
                else None
            )
        return pairs

    def _source_select(self) -> exp.Select:
        return exp.select(exp.Star(), exp.alias_(exp.true(), SOURCE_MARK)).from_(self.source.copy())

    def _references_target(self, node: exp.Expression | None) -> bool:
        if node is None:
            return False
        target = self.target_alias.lower()
        return any(c.table.lower() == target for c in node.find_all(exp.Column))

    def _may_be_blind(self) -> bool:
        if self.missing:  # an update keeps the target's values of the columns the source lacks
            return False
        pairs = self._on_pairs()
        if any(p is None or p[0].lower() != p[1].lower() for p in pairs):
            return False
        if sorted(p[0].lower() for p in pairs if p) != sorted(k.lower() for k in self.keys):
            return False
        for clause in self.clauses:
            if clause.category == "not_matched_by_source" or clause.assignments is not None:
                return False
            if self._references_target(clause.condition):
                return False
        return True

    def _first(self, category: str) -> exp.Expression:
        """CASE over the clauses of a category: the change each would make ('upsert'/'delete')."""
        case = exp.Case()
        for clause in self.clauses:
            if clause.category == category:
                result = layout.DELETE if clause.action == "delete" else layout.UPSERT
                case = case.when(
                    clause.condition.copy() if clause.condition else exp.true(), exp.Literal.string(result)
                )
        return case if case.args.get("ifs") else exp.null()

    def _joined_changes(
        self, ctx: StatementContext, target_select: exp.Select, keys: SourceKeys | None
    ) -> DataFrame:
        if keys is None or keys.rows is None:
            return self._changes_query(ctx, target_select, self._source_select(), keys)
        assert keys.schema is not None  # collected with its rows
        view = f"arctic_source_{next(_lookup_views)}"
        local_rows.frame(ctx.spark, keys.rows, keys.schema).createOrReplaceTempView(view)
        try:  # the DataFrame holds the analyzed plan: the view is no longer needed once it is made
            return self._changes_query(
                ctx, target_select, exp.select(exp.Star()).from_(exp.to_table(view)), keys
            )
        finally:
            ctx.spark.catalog.dropTempView(view)

    def _changes_query(
        self,
        ctx: StatementContext,
        target_select: exp.Select | None,
        source_sql: exp.Select,
        keys: SourceKeys | None,
    ) -> DataFrame:
        """The change rows, from ``source_sql`` joined with ``target_select``; with no target select,
        ``source_sql`` is that join already (merge_join.py: the sides as structs named by their aliases)."""
        both = exp.and_(
            exp.column(SOURCE_MARK).is_(exp.null()).not_(), exp.column(TARGET_MARK).is_(exp.null()).not_()
        )
        only_source = exp.and_(
            exp.column(SOURCE_MARK).is_(exp.null()).not_(), exp.column(TARGET_MARK).is_(exp.null())
        )
        only_target = exp.and_(
            exp.column(SOURCE_MARK).is_(exp.null()), exp.column(TARGET_MARK).is_(exp.null()).not_()
        )
        guard = {"matched": both, "not_matched": only_source, "not_matched_by_source": only_target}
        choose = exp.Case()
        for index, clause in enumerate(self.clauses):
            condition = guard[clause.category].copy()
            if clause.condition is not None:
                condition = exp.and_(condition, exp.paren(clause.condition.copy()))
            choose = choose.when(condition, exp.Literal.number(index))
        tgt = self.target_alias
        src = self.source_alias
        projections = [exp.alias_(choose, CLAUSE)]
        for name in self.columns:
            value: exp.Expression
            case = exp.Case(this=exp.column(CLAUSE))
            for index, clause in enumerate(self.clauses):
                if clause.action == "delete" and name in self.carried:
                    value = exp.column(name, src, quoted=True)
                elif clause.action == "delete":
                    value = exp.column(name, tgt, quoted=True) if name in self.keys else exp.null()
                elif clause.assignments is None and name in self.missing:
                    value = exp.column(name, tgt, quoted=True) if clause.action == "update" else exp.null()
                elif clause.assignments is None:
                    value = exp.column(name, src, quoted=True)
                elif name in clause.assignments:
                    value = clause.assignments[name].copy()
                elif clause.action == "update":
                    value = exp.column(name, tgt, quoted=True)
                else:
                    value = exp.null()
                case = case.when(exp.Literal.number(index), value)
            projections.append(exp.alias_(case, name, quoted=True))
        op = exp.Case(this=exp.column(CLAUSE))
        for index, clause in enumerate(self.clauses):
            op = op.when(
                exp.Literal.number(index),
                exp.Literal.string(layout.DELETE if clause.action == "delete" else layout.UPSERT),
            )
        projections.append(exp.alias_(op, layout.OP_COLUMN))
        join_kind = "FULL" if any(c.category == "not_matched_by_source" for c in self.clauses) else "LEFT"
        if target_select is None:
            query = exp.select(*projections).from_(source_sql.subquery("_arctic_joined"))
        else:
            query = (
                exp.select(*projections)
                .from_(source_sql.subquery(src))
                .join(target_select.subquery(tgt), on=self.on.copy(), join_type=join_kind)
            )
        if keys is not None and target_select is not None:
            # A lookup of at most MAX_LOOKUP_KEYS keys yields a row per key at most, but Spark sizes
            # the merged read at its files' bytes and would shuffle both sides for a sort-merge join.
            query.set(
                "hint",
                exp.Hint(expressions=[exp.Anonymous(this="BROADCAST", expressions=[exp.to_identifier(tgt)])]),
            )
        outer = (
            exp.select(*[exp.column(c, quoted=True) for c in self.columns], exp.column(layout.OP_COLUMN))
            .from_(query.subquery("_arctic_merge"))
            .where(exp.column(CLAUSE).is_(exp.null()).not_())
        )
        return runner.run_spark(ctx, outer, to_spark_sql(outer))


def _arrow_can_hold(schema: StructType) -> bool:
    """Whether Spark can collect rows of ``schema`` as Arrow (not a year-month or calendar interval)."""
    from pyspark.errors import PySparkTypeError
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        to_arrow_schema(schema, timezone="UTC")
    except PySparkTypeError:
        return False
    return True
