"""Aggregate pushdown into the merge by node: each node group aggregates its merged rows, Spark
combines the partial results.

A merge by node (table.reader.merged_by_node) hands Spark every merged row through Arrow, and Spark pays
for each row it takes in about as much as the merge itself costs (benchmarks/README.md). When one
level of a statement is a GROUP BY over one arctic table with only decomposable aggregates, every
node group aggregates its own rows in pyarrow and hands Spark one row per group key, and that level
of the statement is rewritten to combine the partial results:

    count(*), count(1), count(c)  ->  COALESCE(SUM(partial), 0)
    sum(c), c integral            ->  CAST(SUM(partial) AS BIGINT)   (partials DECIMAL(38, 0): no silent wrap)
    sum(c), c floating            ->  SUM(partial)
    min(c), max(c)                ->  MIN(partial), MAX(partial)     (c integral, string, date or timestamp)

This is what Spark's DataSource V2 aggregate pushdown does for sources that can aggregate. It
applies only where nothing but those aggregates reads the rows: no WHERE, join, window, subquery,
FILTER or DISTINCT aggregate at that level, and GROUP BY plain columns. Everything above that level
(HAVING, ORDER BY, LIMIT, the expressions around the aggregates) still runs in Spark. Floating
point sums add in another order than Spark's, as Spark's own sums do across partitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg import types as it
from sqlglot import exp

from arctic_sql.parser import to_spark_sql
from arctic_sql.table.model.schemas import spark_schema, to_spark_type
from arctic_sql.table.reading.merge_on_read import by_node
from arctic_sql.table.reading.scan import plan_read

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyspark.sql import DataFrame, SparkSession

    from arctic_sql.statements.context import StatementContext
    from arctic_sql.table.model.table import ArcticTable
    from arctic_sql.table.reading.scan import ReadPlan

_INTEGRAL = (it.IntegerType, it.LongType)
_FLOATING = (it.FloatType, it.DoubleType)
_ORDERED = (*_INTEGRAL, it.StringType, it.DateType, it.TimestampType, it.TimestamptzType)
PREFIX = "_arctic_partial_"


@dataclass(frozen=True)
class Partial:
    """One partial aggregate: ``kind`` (count_all, count, sum, min, max) of ``column`` per node group."""

    name: str
    kind: str
    column: str | None  # None for count_all

    def combine(self, field_type: it.IcebergType | None) -> exp.Expr:
        """The expression that combines the partials of all node groups into the aggregate."""
        partial = exp.column(self.name)
        if self.kind in ("count_all", "count"):
            return exp.Coalesce(this=exp.Sum(this=partial), expressions=[exp.Literal.number(0)])
        if self.kind == "sum" and isinstance(field_type, _INTEGRAL):
            return exp.Cast(this=exp.Sum(this=partial), to=exp.DataType.build("BIGINT"))
        return {"sum": exp.Sum, "min": exp.Min, "max": exp.Max}[self.kind](this=partial)


@dataclass(frozen=True)
class Pushdown:
    """What the node groups compute: their rows grouped by ``group_by``, with ``partials``."""

    group_by: tuple[str, ...]
    partials: tuple[Partial, ...]

    @property
    def columns(self) -> list[str]:
        """The table columns the partials read."""
        used = [*self.group_by, *(p.column for p in self.partials if p.column is not None)]
        return list(dict.fromkeys(used))


def analyze(
    select: exp.Select, node: exp.Table, schema: Schema
) -> tuple[Pushdown, dict[int, Partial]] | None:
    """The pushdown of ``select`` over the table ``node`` (its only source), and the partial of each
    aggregate node (by ``id``); None when some part of ``select`` needs the rows themselves."""
    if _reads_rows(select, node):
        return None
    fields = {f.name.lower(): f for f in schema.fields}
    qualifiers = {"", node.name.lower(), node.alias.lower()}

    def column_of(expression: exp.Expression) -> str | None:
        if not isinstance(expression, exp.Column) or expression.table.lower() not in qualifiers:
            return None
        field = fields.get(expression.name.lower())
        return None if field is None or not field.field_type.is_primitive else field.name

    group = select.args.get("group")
    group_by: list[str] = []
    if group is not None:
        if any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals", "all")):
            return None
        for expression in group.expressions:
            name = column_of(expression)
            if name is None:
                return None
            group_by.append(name)
    partials: dict[tuple[str, str | None], Partial] = {}
    by_node: dict[int, Partial] = {}
    for aggregate in select.find_all(exp.AggFunc, bfs=False):  # numbered in the order they are written
        found = _partial_of(aggregate, column_of, fields)
        if found is None:
            return None
        partial = partials.setdefault(found, Partial(f"{PREFIX}{len(partials)}", *found))
        by_node[id(aggregate)] = partial
    if not partials:
        return None
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    grouped = {g.lower() for g in group_by}
    for column in select.find_all(exp.Column):  # outside the aggregates: grouping columns only
        name = column_of(column)
        if column.find_ancestor(exp.AggFunc) is not None or name is None or name.lower() in grouped:
            continue
        ordering = column.find_ancestor(exp.Order) is not None
        if not (ordering and not column.table and column.name.lower() in aliases):  # ORDER BY <alias>
            return None
    return Pushdown(tuple(group_by), tuple(partials.values())), by_node


def _reads_rows(select: exp.Select, node: exp.Table) -> bool:
    """Whether anything at this level of ``select`` needs the table's rows, not their aggregates."""
    source = select.args.get("from_") or select.args.get("from")
    if source is None or source.this is not node or node.args.get("sample") or node.args.get("pivots"):
        return True
    if any(select.args.get(k) for k in ("joins", "laterals", "where", "qualify", "windows")):
        return True
    # Windows, FILTER and DISTINCT (aggregates or rows) see rows; so may functions sqlglot does not
    # know (a user's aggregate), and a star anywhere but in count(*).
    if any(select.find(kind) for kind in (exp.Window, exp.Filter, exp.Distinct, exp.Anonymous)):
        return True
    if any(not isinstance(star.parent, exp.Count) for star in select.find_all(exp.Star)):
        return True
    return any(s is not select for s in select.find_all(exp.Select, exp.Subquery))


def _partial_of(aggregate: exp.AggFunc, column_of, fields) -> tuple[str, str | None] | None:
    argument = aggregate.this
    if aggregate.expressions or argument is None:
        return None
    if isinstance(aggregate, exp.Count):
        if isinstance(argument, exp.Star) or (isinstance(argument, exp.Literal) and not argument.is_string):
            return "count_all", None
        column = column_of(argument)
        return ("count", column) if column is not None else None
    kind = {exp.Sum: "sum", exp.Min: "min", exp.Max: "max"}.get(type(aggregate))
    column = column_of(argument)
    if kind is None or column is None:
        return None
    allowed = (*_INTEGRAL, *_FLOATING) if kind == "sum" else _ORDERED
    return (kind, column) if isinstance(fields[column.lower()].field_type, allowed) else None


def needs_names(select: exp.Select) -> bool:
    """Whether some aggregate output of ``select`` has no alias, so that Spark names it: the
    rewrite must keep that name."""
    return any(not isinstance(e, exp.Alias) and e.find(exp.AggFunc) for e in select.expressions)


def rewrite(select: exp.Select, by_node: dict[int, Partial], schema: Schema, names: list[str] | None) -> None:
    """Replace each aggregate of ``select`` by the combination of its partials; ``names``: the
    output names Spark gave the original, for the select expressions that had no alias."""
    unnamed = [
        i for i, e in enumerate(select.expressions) if not isinstance(e, exp.Alias) and e.find(exp.AggFunc)
    ]
    types = {f.name: f.field_type for f in schema.fields}
    for aggregate in list(select.find_all(exp.AggFunc)):
        partial = by_node.get(id(aggregate))
        if partial is not None:
            aggregate.replace(partial.combine(types.get(partial.column) if partial.column else None))
    for i in unnamed if names is not None else ():
        assert names is not None
        expression = select.expressions[i]
        expression.replace(exp.Alias(this=expression.copy(), alias=exp.to_identifier(names[i], quoted=True)))


def partial_aggregate(rows: pa.Table, pushdown: Pushdown) -> pa.Table:
    """The partials of one node group's merged ``rows``: one row per ``group_by`` key."""
    aggregations: list[tuple[str | list[str], str]] = []
    for partial in pushdown.partials:
        if partial.kind == "count_all":
            aggregations.append(([], "count_all"))
            continue
        source = partial.column
        assert source is not None  # only count_all has no column
        if partial.kind == "sum":  # integers as DECIMAL(38, 0), which 64-bit partial sums could overflow
            wide = (
                pa.decimal128(38, 0) if pa.types.is_integer(rows.schema.field(source).type) else pa.float64()
            )
            source = f"{PREFIX}{wide}_{partial.column}"
            if source not in rows.column_names:
                rows = rows.append_column(source, rows.column(partial.column).cast(wide))
        aggregations.append((source, partial.kind))
    if any(pa.types.is_dictionary(t) for t in rows.schema.types):  # grouping wants one dictionary per column
        rows = rows.unify_dictionaries()
    result = rows.group_by(list(pushdown.group_by), use_threads=False).aggregate(aggregations)
    # pyarrow names each result <column>_<kind>, or count_all.
    columns = {k: result.column(k) for k in pushdown.group_by}
    for partial, (aggregated, kind) in zip(pushdown.partials, aggregations, strict=True):
        columns[partial.name] = result.column(f"{aggregated}_{kind}" if aggregated else kind)
    return pa.table(columns)


def spark_types(pushdown: Pushdown, schema: Schema):
    """The Spark schema of the partials: the grouping columns, then one column per partial."""
    from pyspark.sql import types as st

    fields = [
        st.StructField(name, to_spark_type(schema.find_field(name).field_type), True)
        for name in pushdown.group_by
    ]
    for partial in pushdown.partials:
        spark_type: st.DataType
        if partial.kind in ("count_all", "count"):
            spark_type = st.LongType()
        elif partial.kind == "sum":
            assert partial.column is not None  # only count_all has no column
            field_type = schema.find_field(partial.column).field_type
            spark_type = st.DecimalType(38, 0) if isinstance(field_type, _INTEGRAL) else st.DoubleType()
        else:
            assert partial.column is not None
            spark_type = to_spark_type(schema.find_field(partial.column).field_type)
        fields.append(st.StructField(partial.name, spark_type, True))
    return st.StructType(fields)


def aggregated_by_node(
    spark: SparkSession, table: ArcticTable, plan: ReadPlan, pushdown: Pushdown, driver_max_bytes: int = 0
) -> DataFrame | None:
    """Per node group, the partial aggregates of its merged rows; None as for
    ``reader.by_node``; ``driver_max_bytes``: up to which file bytes the groups merge in the driver."""
    from pyiceberg.types import StringType

    schema = plan.schema.select(*dict.fromkeys([*table.primary_key, *pushdown.columns]))
    # Grouping strings read dictionary-encoded: a third of the time to read, and to group by.
    strings = frozenset(
        c for c in pushdown.group_by if isinstance(plan.schema.find_field(c).field_type, StringType)
    )
    return by_node(
        spark,
        table,
        plan,
        schema,
        spark_types(pushdown, plan.schema),
        lambda rows: partial_aggregate(rows, pushdown),
        "arctic_aggregate_by_node",
        strings,
        driver_max_bytes,
    )


def dataframe_for(
    ctx: StatementContext, node: exp.Table, table: ArcticTable, version: int | None
) -> DataFrame | None:
    """The partials of ``node``'s select, merged and aggregated by node, with the select rewritten to
    combine them; None, with nothing changed, when the pushdown does not apply or would not help
    (no change data to merge and more than ``merge-on-read.driver-max-bytes`` to read: Spark reads
    the base itself). A read of at most that many file bytes merges and aggregates in the driver,
    with or without change data: its partials are a local relation, and the query runs no Python."""

    select = node.parent_select
    if table.change is None or not isinstance(select, exp.Select):
        return None
    analyzed = analyze(select, node, table.schema)
    if analyzed is None:
        return None
    pushdown, by_node = analyzed
    plan = plan_read(table, version)
    files = [*plan.base_files, *plan.change_files]
    driver_max_bytes = table.settings.merge_on_read_driver_max_bytes
    in_driver = bool(files) and sum(f.file_size for f in files) <= driver_max_bytes
    if not plan.change_files and not in_driver:
        return None
    df = aggregated_by_node(ctx.spark, table, plan, pushdown, driver_max_bytes)
    if df is None:
        return None
    names = None
    if needs_names(select):  # ask Spark what it calls them, over an empty view of the table
        probe = select.copy()
        view = f"arctic_names_{id(probe)}"
        ctx.spark.createDataFrame([], spark_schema(plan.schema)).createOrReplaceTempView(view)
        source = probe.args.get("from_") or probe.args.get("from")
        assert source is not None  # analyze read the table in this SELECT's FROM
        source.this.replace(
            exp.Table(
                this=exp.to_identifier(view),
                alias=exp.TableAlias(this=exp.to_identifier(node.alias or node.name)),
            )
        )
        try:
            names = ctx.spark.sql(to_spark_sql(probe)).columns
        finally:
            ctx.spark.catalog.dropTempView(view)
    rewrite(select, by_node, table.schema, names)
    return df
