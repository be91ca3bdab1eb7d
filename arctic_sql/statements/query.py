"""Queries over arctic tables: table references become merge-on-read DataFrames, the rest is Spark's.

Every ``exp.Table`` in a statement that names an arctic table (or one of its metadata tables) is
replaced by a temporary view over the DataFrame of the version it asks for. The statement is then
handed to ``spark.sql`` whole, so joins with plain Spark tables, CTEs, views and every Spark
function keep working. Where a reference's SELECT only aggregates it, the SELECT is rewritten to
combine partial aggregates computed per tree node (``aggregate_pushdown``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.statements import aggregate_pushdown, mv_analysis, table_changes, time_travel, views
from arctic_sql.statements.metadata_tables import METADATA_TABLES, metadata_table
from arctic_sql.statements.pruning import key_lookups, pushable_where, row_filter
from arctic_sql.statements.time_travel import replace_functions
from arctic_sql.table.format.keyhash import hash_types, lookup_hashes
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.reading.changes import changes_between

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext
    from arctic_sql.table.model.table import ArcticTable

_view_ids = itertools.count(1)
# The attribute of a looked-up DataFrame that says what the lookup read (EXPLAIN shows it).
LOOKUP_NOTE = "_arctic_lookup"


@dataclass
class Resolved:
    """A statement whose arctic table references point at registered temporary views."""

    expression: exp.Expression
    views: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what lookups read here (``looked_up``), for EXPLAIN


def _cte_names(expression: exp.Expression) -> set[str]:
    return {cte.alias_or_name.lower() for cte in expression.find_all(exp.CTE)}


def resolve(ctx: StatementContext, expression: exp.Expression) -> Resolved:
    """Replace arctic table references in ``expression`` (a copy) by temporary views, and the
    ``get_latest_version``/``get_latest_timestamp`` functions by their values."""

    expression = replace_functions(ctx, expression)
    expression = expression.copy()
    ctes = _cte_names(expression)
    resolved = Resolved(expression)
    bare: set[tuple[str, str]] = set()  # (database, table) of the references read under their bare name
    for node in list(expression.find_all(exp.Table)):
        df: DataFrame | None
        changes = table_changes.is_table_changes(node)
        if changes:
            parts, df = [table_changes.TABLE_CHANGES], table_changes.dataframe(ctx, node.this)
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
        return views.read(ctx, identifier, view) if view is not None else None
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
        return changes_between(ctx.spark, table, time_travel.version_range(ctx, table, version))

    as_of = time_travel.version_as_of(ctx, table, version) if version is not None else None
    pushed = aggregate_pushdown.dataframe_for(ctx, node, table, as_of)  # also rewrites node's SELECT
    if pushed is not None:
        return pushed
    where, qualifiers = pushable_where(node)
    schema = table.schema
    lookups = key_lookups(where, schema, qualifiers, table.primary_key)
    found = looked_up(ctx, table, as_of, lookups)
    if found is not None:
        return found
    return ctx.read_table(
        table,
        version=as_of,
        columns=referenced_columns(node.root(), table),
        base_filter=row_filter(where, schema, qualifiers),
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
    df = ctx.spark.createDataFrame(
        lookup.read_keys(table, plan, lookups), spark_schema(plan.schema, all_nullable=True)
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
