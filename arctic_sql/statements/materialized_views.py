"""Materialized views: ``CREATE``, ``REFRESH``, ``DROP``, ``SHOW`` and ``DESCRIBE MATERIALIZED VIEW``.

A materialized view is an arctic table (keyed when its query gives a key, mv_analysis.py) whose
table properties hold its definition (``arctic.mv.query``, ``arctic.mv.sources``) and whose every
refresh commit records, in its snapshot summary, the version of each source it covers
(``arctic.mv.source-versions``). A refresh reads each source at one version, and the rows it writes
and the versions they cover land in one commit, so a refresh that dies before its commit leaves the
view as it was and the next one starts from the same versions: exactly once. An incremental refresh
reads only the sources' changes since the recorded versions; when those have expired, when no
refresh is recorded among the view's retained commits, or when the query has no incremental form,
it recomputes the view (docs/design.md, "Materialized views").
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import pyarrow as pa
from sqlglot import exp

from arctic_sql.errors import (
    ArcticError,
    CommitConflictError,
    ExecutionError,
    InvalidArgumentError,
    NoSuchTableError,
    TableAlreadyExistsError,
    UnsupportedOperationError,
)
from arctic_sql.parser import parse_one, statements, to_spark_sql
from arctic_sql.statements import ddl, mv_analysis, mv_join, mv_local, runner, views
from arctic_sql.statements.mv_analysis import Analysis, Shape
from arctic_sql.table.format import layout, versions
from arctic_sql.table.format.versions import Operation
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.model.materialized import SHOWN_KEY, SOURCE_VERSIONS, SOURCES
from arctic_sql.table.model.schemas import iceberg_schema
from arctic_sql.table.reading import full_changes, local_rows, preimages
from arctic_sql.table.reading import time_travel as tt
from arctic_sql.table.reading.changes import changes_between, conformed
from arctic_sql.table.reading.full_changes import DELETE, UPDATE_PREIMAGE
from arctic_sql.table.reading.preimages import full_changes_frame
from arctic_sql.table.writing import base_rows, change_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from arctic_sql.statements.context import StatementContext
    from arctic_sql.table.model.table import ArcticTable

QUERY = mv_analysis.QUERY_PROPERTY
REFRESH_MODE = "arctic.mv.refresh"
_views = itertools.count()


def is_materialized(table: ArcticTable) -> bool:
    return mv_analysis.is_definition(table.base.properties)


def create(ctx: StatementContext, expression: exp.Create) -> DataFrame:
    """``CREATE MATERIALIZED VIEW [IF NOT EXISTS] v [PARTITIONED BY (...)] [TBLPROPERTIES (...)] AS
    query``: the table, then its first (full) refresh; a failure leaves no view."""
    target = expression.this
    query = expression.expression
    if not isinstance(target, exp.Table) or query is None:
        raise InvalidArgumentError("CREATE MATERIALIZED VIEW needs a name and AS query")
    identifier = ctx.identifier(target)
    if ctx.catalog.table_exists(identifier) or ctx.catalog.load_view(identifier) is not None:
        if expression.args.get("exists"):
            return ctx.ok()
        raise TableAlreadyExistsError(
            f"Cannot create materialized view {identifier}: {identifier} already exists"
        )
    query = views.qualified(ctx, query)
    sources = _sources(ctx, query, f"materialized view {identifier}")
    user_props = ddl.validated_properties(expression)
    definition = {QUERY: to_spark_sql(query), SOURCES: ",".join(sources)}
    run = _Refresh(ctx, None, query, sources)  # analyses the query: a bad one fails here
    rows = run.full_rows()
    if run.analysis.groups:
        definition[SHOWN_KEY] = ",".join(run.analysis.shown_key)
    key = list(run.analysis.key)
    schema = iceberg_schema(rows.schema, required=set(key), identifier=key)
    spec = ddl.partition_spec(expression, schema, [*key, *run.analysis.shown_key], identifier)
    if spec.fields and run.analysis.groups:
        # Partitioned by group columns: they join the key (a delete row carries only the key, and
        # the partition must be known from it), so they cannot be NULL.
        # A partition's source column is in the schema.
        key = [*(cast(str, schema.find_column_name(f.source_id)) for f in spec.fields), *key]
        schema = iceberg_schema(rows.schema, required=set(key), identifier=key)
        spec = ddl.partition_spec(expression, schema, key, identifier)
    table = ctx.catalog.create_table(identifier, schema, spec, user_props, staged=True, system=definition)
    try:
        run.view = table
        run.write_full(rows, "the first refresh")
    except BaseException:
        ctx.catalog.discard_staged(table)
        raise
    ctx.catalog.publish(table)
    return ctx.ok()


def refresh(ctx: StatementContext, expression: exp.Refresh, text: str) -> DataFrame:
    """``REFRESH MATERIALIZED VIEW v``."""
    view = _view(ctx, expression.this, "REFRESH MATERIALIZED VIEW")
    query = parse_one(view.base.properties[QUERY])
    sources = _sources(ctx, query, f"materialized view {view.identifier}")
    _Refresh(ctx, view, query, sources).run()
    return ctx.ok()


def recompute(ctx: StatementContext, identifier: TableIdentifier) -> None:
    """A full refresh of the view, whatever its query allows (what an incremental one is measured
    against: benchmarks/materialized_views.py)."""
    view = _view(ctx, exp.table_(identifier.name, db=identifier.database), "recompute")
    query = parse_one(view.base.properties[QUERY])
    run = _Refresh(ctx, view, query, _sources(ctx, query, f"materialized view {view.identifier}"))
    run.write_full(run.full_rows(), "asked for")


def drop(ctx: StatementContext, identifier: TableIdentifier, if_exists: bool) -> DataFrame:
    """``DROP MATERIALIZED VIEW [IF EXISTS] v``: the view's table and its files."""
    if not ctx.catalog.table_exists(identifier):
        if if_exists:
            return ctx.ok()
        raise NoSuchTableError(f"Materialized view {identifier} does not exist")
    if not is_materialized(ctx.catalog.load_table(identifier)):
        raise InvalidArgumentError(f"{identifier} is a table, not a materialized view: use DROP TABLE")
    ctx.catalog.drop_table(identifier, purge=True)
    return ctx.ok()


def show(ctx: StatementContext, expression: statements.ShowMaterializedViews, text: str) -> DataFrame:
    database = expression.this.name if expression.this is not None else ctx.current_database
    rows = []
    for name in ctx.catalog.list_tables(database):
        table = ctx.catalog.load_table(TableIdentifier(database.lower(), name))
        if is_materialized(table):
            rows.append((database.lower(), name, table.base.properties[SOURCES]))
    return ctx.result(rows, "namespace string, viewName string, sources string")


def describe(ctx: StatementContext, expression: statements.DescribeMaterializedView, text: str) -> DataFrame:
    """How the view refreshes (and why not incrementally), its plan and its last refresh."""
    view = _view(ctx, expression.this, "DESCRIBE MATERIALIZED VIEW")
    query = parse_one(view.base.properties[QUERY])
    names = [f.name for f in view.schema.fields if not f.name.startswith(mv_analysis.STATE_PREFIX)]
    keys = {s: tuple(ctx.table(s).primary_key) for s in view.base.properties[SOURCES].split(",")}
    analysis = mv_analysis.analyse(query, names, keys)
    last = last_refresh(view)
    rows = [
        ("query", view.base.properties[QUERY]),
        ("sources", view.base.properties[SOURCES]),
        ("key", ", ".join(analysis.shown_key) or "(none: refreshed in full as a table without a key)"),
        ("refresh", "incremental" if analysis.incremental else "full"),
        ("plan", f"{analysis.shape.value}: {analysis.reason}"),
        ("hidden state columns", ", ".join(analysis.hidden_columns) or "(none)"),
    ]
    if last is not None:
        rows += [
            ("last refreshed at version", str(last.version)),
            ("last refreshed at", tt.utc(last.committed_at_ms * 1000)),
            ("last refresh", last.summary.get(REFRESH_MODE, "")),
            ("source versions", last.summary.get(SOURCE_VERSIONS, "")),
        ]
    return ctx.result(rows, "info_name string, info_value string")


def last_refresh(view: ArcticTable) -> versions.Commit | None:
    """The view's newest retained commit that records a refresh, or None."""
    history = versions.history(view.base, view.change)
    recorded = [c for c in history.commits if SOURCE_VERSIONS in c.summary]
    return recorded[-1] if recorded else None


def _view(ctx: StatementContext, node: exp.Table, what: str) -> ArcticTable:
    table = ctx.arctic_table(node)
    if table is None:
        raise NoSuchTableError(f"{what}: materialized view {ctx.identifier(node)} does not exist")
    if not is_materialized(table):
        raise InvalidArgumentError(f"{what}: {table.identifier} is a table, not a materialized view")
    return table


def _sources(ctx: StatementContext, query: exp.Expression, what: str) -> list[str]:
    """The arctic tables ``query`` reads (``db.t``); a source that is no arctic table is refused."""
    names = mv_analysis.source_names(query)
    if not names:
        raise InvalidArgumentError(f"The query of {what} reads no table")
    for name in names:
        identifier = TableIdentifier.parse(name, ctx.current_database)
        if ctx.catalog.table_exists(identifier):
            continue  # another materialized view is a source as any table is
        if ctx.catalog.load_view(identifier) is not None or ctx.spark.catalog.tableExists(name):
            raise UnsupportedOperationError(
                f"The query of {what} reads {name}, which is not an arctic table; "
                "a materialized view reads arctic tables only"
            )
        raise NoSuchTableError(f"The query of {what} reads {name}, which does not exist")
    return names


@dataclass
class _Refresh:
    """One refresh of ``view`` (None while the view is being created)."""

    ctx: StatementContext
    view: ArcticTable | None
    query: exp.Expression
    sources: list[str]

    def __post_init__(self) -> None:
        self._temp: list[str] = []
        self._cached: list[DataFrame] = []
        self._small = False  # the change rows were computed from rows this process holds
        self.tables = {s: self.ctx.table(s) for s in self.sources}
        self.histories = {s: versions.history(t.base, t.change) for s, t in self.tables.items()}
        self.at = {s: h.latest for s, h in self.histories.items()}  # every source at one version
        self.output = self._run_query(self._shapes()).schema  # analysed only, no job
        keys = {s: tuple(t.primary_key) for s, t in self.tables.items()}
        self.analysis: Analysis = mv_analysis.analyse(self.query, self.output.names, keys)

    # full ------------------------------------------------------------------------------------
    def full_rows(self) -> DataFrame:
        """The view's rows from scratch, every source at its version of this refresh."""
        if self.analysis.shape is Shape.AGGREGATE:
            source = self.sources[0]
            relation = self._relation(runner.read_table(self.ctx, self.tables[source], self.at[source]))
            state = self.ctx.spark.sql(mv_analysis.state_query(self.analysis, relation))
            return self._with_outputs(state)
        return self._keyed(self._run_query(self.tables_at()))

    def _keyed(self, rows: DataFrame) -> DataFrame:
        """A grouped view's rows with their hidden group key (other views' rows as they are)."""
        if not self.analysis.groups:
            return rows
        shown = [out for _, out in self.analysis.groups]
        return rows.selectExpr("*", f"{mv_analysis.group_key(shown)} AS {mv_analysis.GROUP_KEY}")

    def _shapes(self) -> dict[str, DataFrame]:
        """Each source as an empty frame of its columns: what the query's analysis needs, without
        planning a read of each source (a refresh reads only what its path needs)."""
        from arctic_sql.table.model.schemas import spark_schema

        spark = self.ctx.spark
        return {s: spark.createDataFrame([], spark_schema(t.schema)) for s, t in self.tables.items()}

    def tables_at(self) -> dict[str, DataFrame]:
        return {s: runner.read_table(self.ctx, t, self.at[s]) for s, t in self.tables.items()}

    def write_full(self, rows: DataFrame, why: str) -> None:
        assert self.view is not None
        base_rows.overwrite_rows(
            self.view,
            rows,
            operation=Operation.REFRESH,
            named=lambda _: True,
            summary=self._summary(f"full: {why}"),
        )

    # incremental -----------------------------------------------------------------------------
    def run(self) -> None:
        assert self.view is not None
        last = last_refresh(self.view)
        if last is None:
            return self.write_full(
                self.full_rows(), "no refresh is recorded among the view's retained commits"
            )
        recorded = json.loads(last.summary[SOURCE_VERSIONS])
        if recorded == self.at:
            return None  # nothing changed since the last refresh
        if not self.analysis.incremental:
            return self.write_full(self.full_rows(), self.analysis.reason)
        if list(self.analysis.key) != self.view.primary_key[-len(self.analysis.key) :]:
            if not self.view.primary_key:  # made when its query (a join) refreshed in full
                return self.write_full(self.full_rows(), "the view was created without a key")
            raise UnsupportedOperationError(
                f"REFRESH MATERIALIZED VIEW {self.view.identifier}: the view was created keyed by "
                f"{', '.join(self.view.primary_key)}, before grouped views kept a hidden group key; "
                "drop it and create it again"
            )
        try:
            if self.analysis.shape is Shape.JOIN:
                changes = self._join_changes(recorded)
            else:
                changes = self._changes(
                    self._span(self.sources[0], recorded), self.histories[self.sources[0]]
                )
        except ExecutionError:  # a failure computing the rows (an ANSI overflow): a recompute would fail too
            raise
        except ArcticError as e:  # expired history, a version that replaced rows: recompute
            return self.write_full(
                self.full_rows(), f"the changes since the last refresh are not readable ({e})"
            )
        try:
            change_rows.write_changes(  # refused (StaleRead) when another refresh committed first
                self.view,
                changes=changes,
                operation=Operation.REFRESH,
                read_version=versions.history(self.view.base, self.view.change).latest,
                small=self._small,
                summary=self._summary(f"incremental ({self.analysis.shape.value})"),
            )
        except base_rows.StaleRead:
            raise CommitConflictError(
                f"REFRESH MATERIALIZED VIEW {self.view.identifier}: another refresh committed first; run it again"
            ) from None
        finally:
            self._drop_temp()
            for frame in self._cached:
                frame.unpersist()
        return None

    def _span(self, source: str, recorded: dict[str, int]) -> tt.Range:
        """The versions of ``source`` since the last refresh; an ArcticError when not readable."""
        start = recorded.get(source)
        if start is None:
            raise InvalidArgumentError(f"no version of {source} is recorded")
        table, history = self.tables[source], self.histories[source]
        return tt.range_of_versions(table, history, start, self.at[source], "REFRESH MATERIALIZED VIEW")

    def _join_changes(self, recorded: dict[str, int]) -> DataFrame:
        """A ``join`` view's change rows: its query over the left rows to join again (mv_join.py)."""
        sides = self.analysis.join
        assert sides is not None
        moved = {
            s: changes_between(self.ctx.spark, self.tables[s], self._span(s, recorded))
            if recorded.get(s) != self.at[s]
            else None
            for s in (sides.left, sides.right)
        }
        left = self.tables[sides.left]
        left_now = runner.read_table(self.ctx, left, self.at[sides.left])
        rows, touched = mv_join.rows_to_join_again(
            self.analysis, left, left_now, moved[sides.left], moved[sides.right], self._keep
        )
        right_now = runner.read_table(self.ctx, self.tables[sides.right], self.at[sides.right])
        return self._upserts_and_deletes(self._run_query({sides.left: rows, sides.right: right_now}), touched)

    def _changes(self, span: tt.Range, history: versions.History) -> DataFrame:
        """The view's change rows: what to upsert and the keys to delete, told apart by ``arctic_op``.
        The rows upserted are kept once they are computed (they also decide the deletes), so the
        sources are read once."""

        source = self.sources[0]
        table = self.tables[source]
        key = list(self.analysis.key)
        if self.analysis.shape is Shape.AGGREGATE:
            return self._aggregate_changes(table, span, history)
        if self.analysis.shape is Shape.FILTER:
            changed = changes_between(self.ctx.spark, table, span)
            columns = [f"`{f.name}`" for f in table.schema.fields]
            new = self._run_query({source: changed.where("_change_type = 'upsert'").select(*columns)})
            pairs = zip(self.analysis.source_key, key, strict=True)
            touched = changed.selectExpr(*(f"`{s}` AS `{k}`" for s, k in pairs))
        else:  # the touched groups (pre- or post-image), found by their hidden key: NULL is a group
            changes = full_changes_frame(self.ctx.spark, table, span, history)
            touched = self._keyed(
                changes.selectExpr(*(f"`{s}` AS `{k}`" for s, k in self.analysis.groups)).distinct()
            )
            groups = [s for s, _ in self.analysis.groups]
            at = runner.read_table(self.ctx, table, self.at[source])
            at_keyed = at.selectExpr("*", f"{mv_analysis.group_key(groups)} AS {mv_analysis.GROUP_KEY}")
            picked = at_keyed.join(touched.select(mv_analysis.GROUP_KEY), mv_analysis.GROUP_KEY, "left_semi")
            new = self._keyed(self._run_query({source: picked.drop(mv_analysis.GROUP_KEY)}))
        return self._upserts_and_deletes(new, touched)

    def _keep(self, frame: DataFrame) -> DataFrame:
        """``frame`` cached until the refresh ends."""
        frame = frame.persist()
        self._cached.append(frame)
        return frame

    def _upserts_and_deletes(self, new: DataFrame, touched: DataFrame) -> DataFrame:
        """``new`` rows upserted, and the ``touched`` keys not among them deleted. ``new`` is kept
        once computed (it also decides the deletes), so the sources are read once."""
        from pyspark.sql import functions as F

        key = list(self.analysis.key)
        new = self._keep(new)
        gone = touched.join(new.select(*(f"`{k}`" for k in key)), key, "left_anti")
        upserts = new.withColumn(layout.OP_COLUMN, F.lit(layout.UPSERT))
        deletes = gone.withColumn(layout.OP_COLUMN, F.lit(layout.DELETE))
        return upserts.unionByName(deletes, allowMissingColumns=True)

    def _aggregate_changes(self, table: ArcticTable, span: tt.Range, history: versions.History) -> DataFrame:
        """An ``aggregate`` view's change rows. A change set small enough for the driver, of a query
        mv_local sums exactly, is summed here with Arrow (no Spark job: the write's rows are a local
        relation too); any other runs the state query in Spark."""
        from pyspark.sql.pandas.types import to_arrow_schema

        assert self.view is not None
        feed_schema = full_changes.feed_types(table)[1]  # the held rows' schema
        local = mv_local.plan(self.analysis, feed_schema) if self._bigint_state() else None
        # Summed here, the feed never crosses to Spark: a larger change set still gains (preimages).
        held = preimages.held_feed(
            table, span, history, preimages.MAX_CHANGE_ROWS * (preimages.HELD_FACTOR if local else 1)
        )
        if local is not None and held.rows is not None:
            view = str(self.view.identifier)
            delta = mv_local.delta(held.rows, local, checked=self._ansi(), view=view)
            if delta is not None:
                schema = self._delta_schema()
                touched = self._touched_state(conformed(delta, to_arrow_schema(schema)), schema)
                if touched is not None:
                    return self._merged(*touched)
        return self._merged_state(*preimages.frame_of(self.ctx.spark, table, span, history, held))

    def _bigint_state(self) -> bool:
        """Whether the view keeps every state column as BIGINT (what mv_local's sums give)."""
        from pyspark.sql.types import LongType

        from arctic_sql.table.model.schemas import spark_schema

        assert self.view is not None
        fields = spark_schema(self.view.schema)
        return all(isinstance(fields[c].dataType, LongType) for c in self.analysis.state_columns)

    def _delta_schema(self) -> StructType:
        """The Spark type of an aggregate view's delta: its group columns, group key and state."""
        from pyspark.sql.types import StructType

        from arctic_sql.table.model.schemas import spark_schema

        assert self.view is not None
        fields = spark_schema(self.view.schema, all_nullable=True)
        names = [
            *(out for _, out in self.analysis.groups),
            mv_analysis.GROUP_KEY,
            *self.analysis.state_columns,
        ]
        return StructType([fields[n] for n in names])

    def _ansi(self) -> bool:
        return str(self.ctx.spark.conf.get("spark.sql.ansi.enabled")).lower() == "true"

    def _merged_state(self, changes: DataFrame, local: bool = False) -> DataFrame:
        """The aggregate view's touched groups: its state plus the changes' signed contributions.
        ``local``: the changes were computed here (a small change set), so the view's state of the
        groups they touch is looked up by key rather than read whole."""
        assert self.view is not None
        negative = f"'{UPDATE_PREIMAGE}', '{DELETE}'"
        # inserts and post-images count +1, deletes and pre-images -1
        sign = f"CASE WHEN _change_type IN ({negative}) THEN -1 ELSE 1 END AS {mv_analysis.SIGN}"
        signed = changes.selectExpr("*", sign)
        delta = self._keyed(
            self.ctx.spark.sql(
                mv_analysis.state_query(self.analysis, self._relation(signed), sign=mv_analysis.SIGN)
            )
        )
        if local:  # a Spark job over local rows, no Python task
            touched = self._touched_state(delta.toArrow().combine_chunks(), delta.schema)
            if touched is not None:
                return self._merged(*touched)
        return self._merged(delta, runner.read_table(self.ctx, self.view), None)

    def _merged(self, delta: DataFrame, current: DataFrame, merged: DataFrame | None) -> DataFrame:
        """The change rows of the touched groups: ``merged`` (their summed state) when it was summed
        here, else ``delta`` joined with ``current`` (the view's rows) in Spark."""
        from pyspark.sql import functions as F

        state = self.analysis.state_columns
        if merged is None:
            merged = delta.alias("d").join(current.alias("o"), mv_analysis.GROUP_KEY, "left")
            sums = [f"coalesce(o.`{c}`, 0) + coalesce(d.`{c}`, 0) AS `{c}`" for c in state]
            merged = merged.selectExpr(*(f"d.`{out}`" for _, out in self.analysis.groups), *sums)
        rows = self._with_outputs(merged)
        op = F.when(F.col(mv_analysis.ROWS) > 0, F.lit(layout.UPSERT)).otherwise(F.lit(layout.DELETE))
        return rows.withColumn(layout.OP_COLUMN, op)  # a group whose last row went is deleted

    def _touched_state(
        self, rows: pa.Table, delta_type: StructType
    ) -> tuple[DataFrame, DataFrame, DataFrame | None] | None:
        """``rows`` (a few groups' changes, held here, of Spark type ``delta_type``) as a local
        relation, the view's rows of those groups looked up by key (only the files that may hold
        them), and the two summed here when they can be (:func:`mv_local.summed_here`: then the
        write's rows are a local relation and it runs no Spark job); None when the lookup refuses
        the keys."""
        from arctic_sql.table.model.schemas import spark_schema

        assert self.view is not None
        looked_up = preimages.rows_by_key(self.view, None, rows.select(list(self.view.primary_key)))
        if looked_up is None:
            return None
        schema = spark_schema(self.view.schema, all_nullable=True)
        spark = self.ctx.spark
        held = looked_up[1]
        current = local_rows.frame(spark, held, schema)
        shown = [out for _, out in self.analysis.groups]
        summed = mv_local.summed_here(
            rows, held, shown, self.analysis, checked=self._ansi(), view=str(self.view.identifier)
        )
        merged = None
        if summed is not None:
            fields = [delta_type[c] for c in [*shown, *self.analysis.state_columns]]
            from pyspark.sql.types import StructType

            merged = local_rows.frame(spark, summed, StructType(fields))
        self._small = True
        return local_rows.frame(spark, rows, delta_type), current, merged

    # helpers ---------------------------------------------------------------------------------
    def _with_outputs(self, state: DataFrame) -> DataFrame:
        """The view's columns in its order (outputs, then the group key and the state) from group and
        state columns."""
        types = self._output_types()
        outputs = mv_analysis.output_expressions(self.analysis, types)
        groups = {out for _, out in self.analysis.groups}
        columns = [f"`{n}`" if n in groups else f"{outputs[n]} AS `{n}`" for n in types]
        hidden = [
            f"CAST(`{c}` AS {self._state_type(c, state)}) AS `{c}`" for c in self.analysis.state_columns
        ]
        shown = [out for _, out in self.analysis.groups]
        key = f"{mv_analysis.group_key(shown)} AS {mv_analysis.GROUP_KEY}"
        return state.selectExpr(*columns, key, *hidden)

    def _output_types(self) -> dict[str, str]:
        return {f.name: f.dataType.simpleString() for f in self.output.fields}

    def _state_type(self, column: str, state: DataFrame) -> str:
        if self.view is not None:
            from arctic_sql.table.model.schemas import spark_schema

            return spark_schema(self.view.schema)[column].dataType.simpleString()
        return state.schema[column].dataType.simpleString()

    def _run_query(self, frames: dict[str, DataFrame]) -> DataFrame:
        """The view's query with each source read from ``frames`` (``db.t`` -> DataFrame)."""
        query = self.query.copy()
        for node in list(query.find_all(exp.Table)):
            name = ".".join(p.name.lower() for p in node.parts[-2:])
            if name in frames:
                replacement = exp.Table(this=exp.to_identifier(self._relation(frames[name])))
                replacement.set("alias", exp.TableAlias(this=exp.to_identifier(node.alias or node.name)))
                node.replace(replacement)
        try:
            return self.ctx.spark.sql(to_spark_sql(query))
        finally:
            self._drop_temp()

    def _relation(self, frame: DataFrame) -> str:
        name = f"arctic_mv_{next(_views)}"
        frame.createOrReplaceTempView(name)
        self._temp.append(name)
        return name

    def _drop_temp(self) -> None:
        for name in self._temp:
            self.ctx.spark.catalog.dropTempView(name)
        self._temp.clear()

    def _summary(self, mode: str) -> dict[str, str]:
        return {SOURCE_VERSIONS: json.dumps(self.at, sort_keys=True), REFRESH_MODE: mode}
