"""The full change feed of a small change set, computed in this process: pre-images looked up by key.

The Spark form of the feed (full_changes.full_changes_frame) runs a Python task per node group that
reads the group's changes and merges the group's files at the range's start, keeping the touched
keys' rows. For a commit of 1% random upserts every node is touched, and a materialized view's
refresh spent most of its time in that job and the jobs that reused it (docs/benchmarks.md,
"Materialized views"). A small change set costs less here: its change rows are read with pyarrow,
and the pre-images of its keys are looked up by key at the range's start (lookup.plan_lookup and
read_keys: only the files of the keys' tree nodes whose key bounds hold one of them, no Spark job),
then diffed as a task diffs them. The rows are the same rows; only where they are computed moves.

The bound is ``MAX_CHANGE_ROWS`` change rows (and each lookup's own: the keys of one lookup, the
bytes it reads in this process). A lookup takes at most ``MAX_LOOKUP_KEYS`` keys, so the keys are
looked up in chunks, packed by node group so that a chunk reads only its nodes' files. Each chunk
plans its read again and hashes its keys in Python (about 0.2 s for 1,024 random keys of a
200,000-row table on a quiet machine). Measured at 200,000 rows: an aggregate view's refresh of
2,000 changed keys took half its time through the Spark form (benchmarks/materialized_views.py),
while 8,000 keys took 1.2x the Spark form's read, which reads each node once in parallel tasks
(benchmarks/change_feed_full.py); so the bound sits between, at 4 chunks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow

from arctic_sql.table.format.keyhash import MAX_LOOKUP_KEYS
from arctic_sql.table.format.layout import Store
from arctic_sql.table.reading import full_changes, lookup, node_merge
from arctic_sql.table.reading.changes import conformed, tagged_parts, with_change_columns
from arctic_sql.table.reading.full_changes import FullPlan, changes_over, per_version
from arctic_sql.table.reading.merge_on_read import node_groups

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import DataFrame, SparkSession

    from arctic_sql.table.format import versions
    from arctic_sql.table.model.table import ArcticTable
    from arctic_sql.table.reading.changes import Range
    from arctic_sql.table.reading.scan import ReadPlan

MAX_CHANGE_ROWS = 4 * MAX_LOOKUP_KEYS
Key = tuple[Any, ...]  # a key's column values, in the key's order


@dataclass(frozen=True)
class LocalFeed:
    """A full change feed computed here: its rows (the table's columns, every one nullable, and the
    change columns) and the keyed reads its pre-images took (what EXPLAIN and the tests look at)."""

    rows: pa.Table
    lookups: tuple[ReadPlan, ...]


def read_local(table: ArcticTable, plan: FullPlan, committed_at_ms: Mapping[int, int]) -> LocalFeed | None:
    """The full changes of ``plan`` (full_changes.plan_full) computed in this process, or None when
    they are not a read for it (too many change rows, a key the lookup cannot take): the caller
    runs the Spark form then."""
    if not table.is_keyed or sum(f.record_count for f in plan.changes) > MAX_CHANGE_ROWS:
        return None
    keys, schema, engine = tuple(table.primary_key), table.schema, table.merge_engine
    base, change = node_merge.Store.both(table)

    def store(name: str) -> node_merge.Store:
        return change if name == Store.CHANGE else base

    target = schema_to_pyarrow(node_merge.optional(schema), include_field_ids=False)
    parts, chunks = [], []
    for group in node_groups(plan.changes):  # a key's changes lie in one group
        tagged = [(f.store, f.data_file, node_merge.tag(f.sequence_number, f.is_delete)) for f in group]
        mine = tagged_parts(store, tagged, schema, keys, engine.sequence)
        parts.extend(mine)
        chunks.append(key_values(node_merge.tagged_rows(mine), keys))
    if not parts:
        empty = with_change_columns(target.empty_table(), np.zeros(0, str), np.zeros(0, np.int64), {})
        return LocalFeed(empty, ())
    rows = node_merge.tagged_rows(parts)
    changes = per_version(rows, keys)
    lookups: list[ReadPlan] = []
    before = [target.empty_table()]
    if plan.state_version is not None:
        for values in packed(chunks):
            found = rows_by_key(table, plan.state_version, values)
            if found is None:
                return None
            lookups.append(found[0])
            before.append(conformed(found[1], target))
    out, kinds, versions = changes_over(pa.concat_tables(before), rows, changes, keys, engine, target)
    return LocalFeed(with_change_columns(out, kinds, versions, committed_at_ms), tuple(lookups))


def rows_by_key(
    table: ArcticTable, version: int | None, values: Sequence[Key]
) -> tuple[ReadPlan, pa.Table] | None:
    """The merged rows of ``values`` (at most ``MAX_LOOKUP_KEYS`` key tuples) at ``version`` through
    the keyed lookup, with its plan; None when the lookup refuses them."""
    plan = lookup.plan_lookup(table, version, values)
    if plan is None:
        return None
    return plan, lookup.read_keys(table, plan, values)


def key_values(rows: pa.Table, keys: Sequence[str]) -> list[Key]:
    """The distinct key tuples of ``rows``, in their order."""
    return list(dict.fromkeys(zip(*(rows.column(k).to_pylist() for k in keys), strict=True)))


def packed(groups: Sequence[Sequence[Key]]) -> list[list[Key]]:
    """Key tuples, given per node group, in chunks of at most ``MAX_LOOKUP_KEYS``: whole groups
    together while they fit, so that a chunk's lookup reads the files of few nodes."""
    chunks: list[list[Key]] = []
    for group in groups:
        for i in range(0, len(group), MAX_LOOKUP_KEYS):
            piece = list(group[i : i + MAX_LOOKUP_KEYS])
            if chunks and len(chunks[-1]) + len(piece) <= MAX_LOOKUP_KEYS:
                chunks[-1].extend(piece)
            else:
                chunks.append(piece)
    return chunks


def feed_frame(
    spark: SparkSession, table: ArcticTable, span: Range, history: versions.History
) -> tuple[DataFrame, bool]:
    """``full_changes.feed_frame`` with a small change set computed here (:func:`read_local`)."""
    return full_changes.feed_frame(spark, table, span, history, read_local)


def full_changes_frame(
    spark: SparkSession, table: ArcticTable, span: Range, history: versions.History
) -> DataFrame:
    """``full_changes.full_changes_frame`` with a small change set computed here (:func:`read_local`):
    SQL's ``table_changes`` and the views' refreshes."""
    return full_changes.full_changes_frame(spark, table, span, history, read_local)
