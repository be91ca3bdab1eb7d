"""The full change feed of a small change set, computed in this process: pre-images looked up by key.

The Spark form of the feed (full_changes.full_changes_frame) runs a Python task per node group that
reads the group's changes and merges the group's files at the range's start, keeping the touched
keys' rows. For a commit of 1% random upserts every node is touched, and a materialized view's
refresh spent most of its time in that job and the jobs that reused it (docs/benchmarks.md,
"Materialized views"). A small change set costs less here: its change rows are read with pyarrow,
and the pre-images of its keys are looked up by key at the range's start (lookup.plan_many and
read_many: only the files of the keys' tree nodes whose key bounds hold one of them, no Spark job),
then diffed as a task diffs them. The rows are the same rows; only where they are computed moves.

The bound is ``MAX_CHANGE_ROWS`` change rows (and the lookup's own: the bytes it reads in this
process). All the keys go to one lookup (lookup.plan_many): one scan plan, the keys hashed and
matched to the files' nodes and key bounds with numpy, each node group reading only its own keys.
Until session 25 they went in chunks of 1,024 keys, each planned again and hashed key by key in
Python, which was most of a small refresh's driver time (docs/benchmarks.md, "Materialized views").
Measured at 200,000 rows in session 24: an aggregate view's refresh of 2,000 changed keys took half
its time through the Spark form (benchmarks/materialized_views.py), while 8,000 keys took 1.2x the
Spark form's read, which reads each node once in parallel tasks (benchmarks/change_feed_full.py);
with one lookup for all the keys (session 25), measured again in session 26 (below).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow

from arctic_sql.table.format.layout import Store
from arctic_sql.table.reading import full_changes, local_rows, lookup, node_merge
from arctic_sql.table.reading.changes import conformed, tagged_parts, with_change_columns
from arctic_sql.table.reading.full_changes import FullPlan, changes_over, per_version
from arctic_sql.table.reading.merge_on_read import node_groups

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, SparkSession

    from arctic_sql.table.format import versions
    from arctic_sql.table.model.table import ArcticTable
    from arctic_sql.table.reading.changes import Range
    from arctic_sql.table.reading.scan import ReadPlan

# Session 26 (benchmarks.materialized_views --bound, 200,000 rows, the delta summed in the driver):
# a refresh of 1%, 5% and 10% of the keys took 0.10x, 0.17x and 0.16x of the Spark form's time, so
# the driver had not stopped winning at 20,000 change rows, the largest measured (and a 1% commit of
# the 2M rows); the bound is set there rather than guessed beyond it. It holds for a feed
# handed to Spark (``table_changes``): session 27 (benchmarks.change_feed_full, 200,000 rows, load
# about 3), the driver against the Spark form took 1.02x at 20,000 change rows, 1.69x at 40,000 and
# 1.47x at 80,000, every row crossing to the JVM.
MAX_CHANGE_ROWS = 20_000
# A view's refresh holds its feed in Arrow (mv_local sums it there) up to this many times the bound.
# Session 27 (benchmarks.materialized_views --bound 10,20,40, 200,000 rows, load about 7): 20,000,
# 40,000 and 80,000 change rows took 0.32x, 0.48x and 0.53x of the Spark form for an aggregate
# view, 0.95x, 1.04x and 0.94x for a join view (even: its other reads dominate); set at the largest.
HELD_FACTOR = 4


@dataclass(frozen=True)
class LocalFeed:
    """A full change feed computed here: its rows (the table's columns, every one nullable, and the
    change columns) and the keyed reads its pre-images took (what EXPLAIN and the tests look at)."""

    rows: pa.Table
    lookups: tuple[ReadPlan, ...]


def read_local(
    table: ArcticTable, plan: FullPlan, committed_at_ms: Mapping[int, int], max_rows: int | None = None
) -> LocalFeed | None:
    """The full changes of ``plan`` (full_changes.plan_full) computed in this process, or None when
    they are not a read for it (more change rows than ``max_rows``, default ``MAX_CHANGE_ROWS``; a
    key the lookup cannot take): the caller runs the Spark form then."""
    limit = MAX_CHANGE_ROWS if max_rows is None else max_rows
    if not table.is_keyed or sum(f.record_count for f in plan.changes) > limit:
        return None
    keys, schema, engine = tuple(table.primary_key), table.schema, table.merge_engine
    base, change = node_merge.Store.both(table)

    def store(name: str) -> node_merge.Store:
        return change if name == Store.CHANGE else base

    target = schema_to_pyarrow(node_merge.optional(schema), include_field_ids=False)
    parts = []
    for group in node_groups(plan.changes):  # a key's changes lie in one group
        tagged = [(f.store, f.data_file, node_merge.tag(f.sequence_number, f.is_delete)) for f in group]
        parts.extend(tagged_parts(store, tagged, schema, keys, engine.sequence))
    if not parts:
        empty = with_change_columns(target.empty_table(), np.zeros(0, str), np.zeros(0, np.int64), {})
        return LocalFeed(empty, ())
    rows = node_merge.tagged_rows(parts)
    changes = per_version(rows, keys)
    lookups: list[ReadPlan] = []
    before = [target.empty_table()]
    if plan.state_version is not None:
        found = rows_by_key(table, plan.state_version, rows.select(list(keys)))
        if found is None:
            return None
        lookups.append(found[0].plan)
        before.append(conformed(found[1], target))
    out, kinds, versions = changes_over(pa.concat_tables(before), rows, changes, keys, engine, target)
    return LocalFeed(with_change_columns(out, kinds, versions, committed_at_ms), tuple(lookups))


def rows_by_key(
    table: ArcticTable, version: int | None, wanted: pa.Table
) -> tuple[lookup.ManyKeys, pa.Table] | None:
    """The merged rows at ``version`` of the keys in ``wanted`` (a table with the key columns) through
    one keyed lookup, with its plan; None when the lookup refuses them."""
    looked = lookup.plan_many(table, version, wanted)
    if looked is None:
        return None
    return looked, lookup.read_many(table, looked)


def feed_frame(
    spark: SparkSession, table: ArcticTable, span: Range, history: versions.History
) -> tuple[DataFrame, bool]:
    """``full_changes.feed_frame`` with a small change set computed here (:func:`read_local`)."""
    return full_changes.feed_frame(spark, table, span, history, read_local)


def held_feed(table: ArcticTable, span: Range, history: versions.History, max_rows: int) -> HeldFeed:
    """The full changes of ``span`` as Arrow rows computed here when it holds at most ``max_rows``
    change rows (:func:`read_local`; ``rows`` None otherwise), with the plan, so a caller that cannot
    use the rows hands both to :func:`frame_of` and nothing is planned or read twice."""
    plan = full_changes.plan_full(table, span, history)
    feed = read_local(table, plan, full_changes.committed_at(history, span), max_rows)
    if feed is None:
        return HeldFeed(None, plan)
    rows = conformed(feed.rows, full_changes.feed_types(table)[1]).combine_chunks()
    return HeldFeed(rows, plan)


@dataclass(frozen=True)
class HeldFeed:
    """:func:`held_feed`'s answer: the feed's rows in the feed's Arrow schema (None: too many to
    hold here) and the plan they were read by."""

    rows: pa.Table | None
    plan: FullPlan


def frame_of(
    spark: SparkSession, table: ArcticTable, span: Range, history: versions.History, held: HeldFeed
) -> tuple[DataFrame, bool]:
    """:func:`feed_frame` of ``held`` (rows held here become a local relation; else Spark reads them)."""
    if held.rows is not None:
        return local_rows.frame(spark, held.rows, full_changes.feed_types(table)[0]), True
    return full_changes.feed_frame(spark, table, span, history, None, held.plan)


def full_changes_frame(
    spark: SparkSession, table: ArcticTable, span: Range, history: versions.History
) -> DataFrame:
    """``full_changes.full_changes_frame`` with a small change set computed here (:func:`read_local`):
    SQL's ``table_changes`` and the views' refreshes."""
    return full_changes.full_changes_frame(spark, table, span, history, read_local)
