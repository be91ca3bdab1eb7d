"""The query runner: reading arctic tables and running Spark SQL over them, for every statement.

Statements call it with their (plain) ``StatementContext``: ``run_spark`` runs a statement,
``constant`` evaluates one SQL expression, ``read_table`` reads a table's merged rows. Every
``exp.Table`` in a statement that names an arctic table (or one of its metadata tables) is replaced
by a temporary view over the DataFrame of the version it asks for. The statement is then handed to
``spark.sql`` whole, so joins with plain Spark tables, CTEs, views and every Spark function keep
working. Where a reference's SELECT only aggregates it, the SELECT is rewritten to combine partial
aggregates computed per tree node (``aggregate_pushdown``).

A query runs queries in turn: an arctic view's query (``read_view``), a time-travel value or a
``get_latest_version`` argument that is an expression. All of that recursion is here; what this
module calls (time travel, table_changes) is handed ``evaluator(ctx)`` rather than calling back up.
"""

from __future__ import annotations

import itertools
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.parser import parse, parse_one, to_spark_sql
from arctic_sql.statements import aggregate_pushdown, mv_analysis, table_changes, time_travel
from arctic_sql.statements.metadata_tables import METADATA_TABLES, metadata_table
from arctic_sql.statements.pruning import key_conjuncts, key_lookups, pushable_where, row_filter
from arctic_sql.table.catalog import ViewDefinition
from arctic_sql.table.format.keyhash import hash_types, lookup_hashes
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.reading import local_rows
from arctic_sql.table.reading.changes import changes_between
from arctic_sql.table.reading.merge_on_read import DRIVER_NOTE, merged_dataframe
from arctic_sql.table.reading.scan import ALWAYS_TRUE, plan_read

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import Evaluate, StatementContext
    from arctic_sql.table.model.table import ArcticTable

_view_ids = itertools.count(1)
# The views being expanded in this thread, outermost first: a view met again inside itself is a cycle.
_expanding: ContextVar[tuple[TableIdentifier, ...]] = ContextVar("arctic_views_expanding", default=())
# The attribute of a looked-up DataFrame that says what the lookup read (EXPLAIN shows it).
LOOKUP_NOTE = "_arctic_lookup"


def run_spark(ctx: StatementContext, expression: exp.Expression, text: str) -> DataFrame:
    """Run a statement on Spark, after pointing its arctic table references at merged views."""

    if not isinstance(expression, exp.Command):
        replaced = time_travel.replace_functions(ctx, expression, evaluator(ctx))  # get_latest_version()...
        if replaced is not expression:
            expression, text = replaced, to_spark_sql(replaced)
    if isinstance(expression, exp.Command) or not any(True for _ in expression.find_all(exp.Table)):
        return ctx.spark.sql(text)
    resolved = resolve(ctx, expression)
    if not resolved.views:
        return ctx.spark.sql(text)
    # A temporary view (CREATE TEMP VIEW, CACHE TABLE name AS query) reads ours by their names.
    keep_views = (isinstance(expression, exp.Create) and expression.kind == "VIEW") or isinstance(
        expression, exp.Cache
    )
    try:
        return ctx.spark.sql(to_spark_sql(resolved.expression))
    finally:
        if not keep_views:  # the DataFrame holds the analyzed plan; the views are no longer needed
            for view in resolved.views:
                ctx.spark.catalog.dropTempView(view)


def constant(ctx: StatementContext, sql: str) -> Any:
    """The value of one SQL expression (``current_date() - INTERVAL 1 DAY``, a scalar subquery over
    an arctic table, ...): ``SELECT <sql>`` run as any statement is, arctic tables resolved."""

    (statement,) = parse(f"SELECT {sql}")
    return run_spark(ctx, statement.expression, statement.sql).collect()[0][0]


def evaluator(ctx: StatementContext) -> Evaluate:
    """``constant`` for ``ctx``, for the code that evaluates expressions without running queries."""
    return lambda sql: constant(ctx, sql)


def read_table(
    ctx: StatementContext,
    table: ArcticTable,
    version: int | None = None,
    columns: list[str] | None = None,
    in_memory: bool = True,
    rows_filter: BooleanExpression = ALWAYS_TRUE,
    **filters: Any,
) -> DataFrame:
    """The merge-on-read DataFrame of ``table`` at ``version`` (default: latest).

    ``base_filter``/``change_filter`` (pyiceberg expressions) prune files; see pruning.py.
    ``columns``: the columns the caller uses (default all); others may be left out.
    ``in_memory``: whether node groups may merge in memory (see table/reading/merge_on_read.py).
    ``rows_filter``: conjuncts the caller applies to the rows itself (``merged_dataframe``).
    """
    plan = plan_read(table, version, **filters)
    return merged_dataframe(ctx.spark, table, plan, columns, in_memory, rows_filter)


def read_view(ctx: StatementContext, identifier: TableIdentifier, view: ViewDefinition) -> DataFrame:
    """The rows of an arctic view now: its query run as any statement's, its arctic tables resolved
    afresh (views.py keeps the definitions)."""
    if identifier in _expanding.get():
        raise InvalidArgumentError(f"View {identifier} reads itself")
    token = _expanding.set((*_expanding.get(), identifier))
    try:
        df = run_spark(ctx, parse_one(view.sql), view.sql)
    finally:
        _expanding.reset(token)
    if view.columns:
        if len(view.columns) != len(df.columns):
            raise InvalidArgumentError(
                f"View {identifier} names {len(view.columns)} columns but its query returns {len(df.columns)}"
            )
        df = df.toDF(*view.columns)
    return df


@dataclass
class Resolved:
    """A statement whose arctic table references point at registered temporary views."""

    expression: exp.Expression
    views: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what lookups read here (``looked_up``), for EXPLAIN
    # What other reads merged in the driver (small pushed aggregates, ``merge_on_read.by_node``).
    driver_reads: list[str] = field(default_factory=list)


def _cte_names(expression: exp.Expression) -> set[str]:
    return {cte.alias_or_name.lower() for cte in expression.find_all(exp.CTE)}


def resolve(ctx: StatementContext, expression: exp.Expression) -> Resolved:
    """Replace arctic table references in ``expression`` (a copy) by temporary views, and the
    ``get_latest_version``/``get_latest_timestamp`` functions by their values."""

    expression = time_travel.replace_functions(ctx, expression, evaluator(ctx))
    expression = expression.copy()
    ctes = _cte_names(expression)
    resolved = Resolved(expression)
    bare: set[tuple[str, str]] = set()  # (database, table) of the references read under their bare name
    for node in list(expression.find_all(exp.Table)):
        df: DataFrame | None
        changes = table_changes.is_table_changes(node)
        if changes:
            parts, df = [table_changes.TABLE_CHANGES], table_changes.dataframe(ctx, node.this, evaluator(ctx))
        else:
            if not node.name or isinstance(node.this, exp.Func):
                continue  # table-valued functions and the like
            parts = [p.name for p in node.parts]
            if len(parts) == 1 and parts[0].lower() in ctes:
                continue
            df = dataframe_for(ctx, node)
        if df is None:
            continue
        view = f"arctic_view_{next(_view_ids)}"
        df.createOrReplaceTempView(view)
        resolved.views.append(view)
        if hasattr(df, LOOKUP_NOTE):
            resolved.notes.append(f"{view}: {getattr(df, LOOKUP_NOTE)}")
        if hasattr(df, DRIVER_NOTE):
            resolved.driver_reads.append(f"{view}: {getattr(df, DRIVER_NOTE)}")
        alias = node.alias or parts[-1]
        if not node.alias and not changes:
            bare.add(((parts[-2] if len(parts) > 1 else ctx.current_database).lower(), alias.lower()))
        replacement = exp.Table(this=exp.to_identifier(view))
        replacement.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        node.replace(replacement)
    if bare:  # `SELECT db.t.id FROM db.t`: Spark knows the view only as `t`
        for column in expression.find_all(exp.Column):
            if column.args.get("db") and (column.text("db").lower(), column.table.lower()) in bare:
                column.set("db", None)
                column.set("catalog", None)
    return resolved


def dataframe_for(ctx: StatementContext, node: exp.Table) -> DataFrame | None:
    """The DataFrame an arctic table reference stands for, or None if the name is not arctic's."""
    parts = [p.name for p in node.parts]
    version = node.args.get("version")
    if len(parts) >= 2 and parts[-1].lower() in METADATA_TABLES:
        owner = TableIdentifier.parse(".".join(parts[:-1]), ctx.current_database)
        if ctx.catalog.table_exists(owner):
            if version is not None:
                raise InvalidArgumentError(f"Metadata table {'.'.join(parts)} has no versions to travel to")
            return metadata_table(ctx, ctx.catalog.load_table(owner), parts[-1].lower())
    if len(parts) > 3:
        return None
    try:
        identifier = TableIdentifier.parse(".".join(parts), ctx.current_database)
    except InvalidArgumentError:
        return None
    if not ctx.catalog.table_exists(identifier):
        view = ctx.catalog.load_view(identifier)
        if view is not None and version is not None:
            raise InvalidArgumentError(f"{identifier} is a view: it has no versions to travel to")
        return read_view(ctx, identifier, view) if view is not None else None
    table = ctx.on_session_branch(ctx.catalog.load_table(identifier), writes=False)
    df = _table_dataframe(ctx, node, table, version)
    if mv_analysis.is_definition(table.base.properties):
        # A materialized view's hidden state (sums and counts its refresh adds to) is not its rows.
        df = df.drop(*(c for c in df.columns if c.startswith(mv_analysis.STATE_PREFIX)))
    return df


def _table_dataframe(
    ctx: StatementContext, node: exp.Table, table: ArcticTable, version: exp.Version | None
) -> DataFrame:
    if version is not None and (version.text("kind") or "AS OF").upper() == "BETWEEN":
        return changes_between(
            ctx.spark, table, time_travel.version_range(ctx, table, version, evaluator(ctx))
        )

    as_of = time_travel.version_as_of(ctx, table, version, evaluator(ctx)) if version is not None else None
    pushed = aggregate_pushdown.dataframe_for(ctx, node, table, as_of)  # also rewrites node's SELECT
    if pushed is not None:
        return pushed
    where, qualifiers = pushable_where(node)
    schema = table.schema
    lookups = key_lookups(where, schema, qualifiers, table.primary_key)
    found = looked_up(ctx, table, as_of, lookups)
    if found is not None:
        if "" in qualifiers:  # the SELECT reads this table alone: its WHERE filters these rows only
            # The looked-up rows all pass the key conjuncts: Spark need not plan a 1,000-value IN
            # again (about 0.6 s of analysis and optimizing, against 0.1 s for the rest here).
            for conjunct in key_conjuncts(where, schema, qualifiers, table.primary_key):
                conjunct.replace(exp.true())
        return found
    pushed_filter = row_filter(where, schema, qualifiers)
    return read_table(
        ctx,
        table,
        version=as_of,
        columns=referenced_columns(node.root(), table),
        rows_filter=pushed_filter,  # the WHERE above filters these rows anyway
        base_filter=pushed_filter,
        change_filter=row_filter(where, schema, qualifiers, allowed=set(table.primary_key)),
        key_hashes=_key_hashes(table, lookups),
    )


def looked_up(
    ctx: StatementContext, table: ArcticTable, version: int | None, lookups: list[tuple] | None
) -> DataFrame | None:
    """The rows of a point or small-set lookup (``lookups``: the key tuples its WHERE pins), read
    here (table/reading/lookup.py) and handed to Spark as a local relation, or None when the lookup is not
    one for this process. A Spark task would cost more to start than the read: the query above it
    (its WHERE included) folds into the local relation and runs no job. EXPLAIN names what was read
    (``LOOKUP_NOTE``)."""
    from arctic_sql.table.model.schemas import spark_schema
    from arctic_sql.table.reading import lookup

    if lookups is None or not table.is_keyed:
        return None
    plan = lookup.plan_lookup(table, version, lookups)
    if plan is None:
        return None
    df = local_rows.frame(
        ctx.spark, lookup.read_keys(table, plan, lookups), spark_schema(plan.schema, all_nullable=True)
    )
    setattr(df, LOOKUP_NOTE, lookup.describe(plan))
    return df


def referenced_columns(statement: exp.Expr, table: ArcticTable) -> list[str] | None:
    """The table's columns ``statement`` may use, conservatively: every column spelled like an
    identifier anywhere in it; None (all) when it has a star other than ``count(*)``.

    Spark prunes columns of its own scans; a merge in memory (reader.merged_by_node) is opaque to it,
    so it is told here which columns to read.
    """
    if any(not isinstance(star.parent, exp.Count) for star in statement.find_all(exp.Star)):
        return None
    if any((join.args.get("method") or "").upper() == "NATURAL" for join in statement.find_all(exp.Join)):
        return None  # a NATURAL JOIN joins on every column the two sides share, naming none
    names = {i.name.lower() for i in statement.find_all(exp.Identifier)}
    return [f.name for f in table.schema.fields if f.name.lower() in names]


def _key_hashes(table, lookups: list[tuple] | None) -> frozenset[int] | None:
    """Spark xxhash64 of each looked-up key, to prune by tree node; None when any cannot be hashed."""
    return lookup_hashes(lookups, hash_types(table.key_types, table.key_as_int))
