"""The full change feed: every change of every version, as Delta's change data feed gives it.

``changeFeedMode=full`` (the arctic format) and ``table_changes('db.t', v1, v2)`` (SQL) return, per
version ``v`` of a range and per key that ``v``'s change files touch, how the key changed between the
table's state before ``v`` and its state at ``v``: ``insert`` (absent before), ``update_preimage``
and ``update_postimage`` (present in both: the row before, the row after), ``delete`` (present
before, absent after, with the deleted row's values); a delete of an absent key gives nothing.
What ``v`` shows of a key is what reading version ``v`` shows: the merge rule over ``v``'s change
rows, so one change per key per version (a delete beats an upsert of the same version).

Pre-images are found at read time. A key's state before its first change in the range is the
merged rows of its tree node at the range's start, read in the same task as the range's change
files of that node (a key's rows all lie in one node group); its state before each later change is
its previous change in the range. A range costs one keyed read of the touched nodes at its start,
whatever its length, and writes cost nothing (docs/design.md, "The full change feed").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.files import storage
from arctic_sql.table.format.layout import Store
from arctic_sql.table.model.merge_engine import MergeEngine
from arctic_sql.table.reading import engine_fold, local_rows, node_merge
from arctic_sql.table.reading.changes import (
    CHANGE_TYPE,
    CHANGE_VERSION,
    COMMIT_TIMESTAMP,
    Range,
    carries_changes,
    change_files,
    conformed,
    crossing_error,
    net_changes,
    tagged_parts,
    with_change_columns,
)
from arctic_sql.table.reading.merge_on_read import node_groups
from arctic_sql.table.reading.scan import FileEntry, plan_read

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from pyiceberg.manifest import DataFile
    from pyiceberg.schema import Schema
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from arctic_sql.table.format import versions
    from arctic_sql.table.model.table import ArcticTable

LATEST, FULL = "latest", "full"
MODES = (LATEST, FULL)
INSERT, UPDATE_PREIMAGE, UPDATE_POSTIMAGE, DELETE = "insert", "update_preimage", "update_postimage", "delete"
_FIRST, _SECOND = "_arctic_first", "_arctic_second"


def checked_mode(raw: str, what: str) -> str:
    """The change feed mode ``raw`` names (``latest`` or ``full``), or the one-line error."""
    mode = raw.strip().lower()
    if mode not in MODES:
        raise InvalidArgumentError(f"{what} must be latest or full, got {raw!r}")
    return mode


@dataclass(frozen=True)
class FullPlan:
    """The files of a full change feed: the range's change files after ``anchor`` (tagged with their
    versions), and the files that hold the table's state at ``anchor``, where pre-images start."""

    anchor: int
    before: tuple[FileEntry, ...]
    changes: tuple[FileEntry, ...]
    # The version ``before`` holds (the newest at or before ``anchor``); None: nothing to read there.
    state_version: int | None = None


@dataclass(frozen=True)
class FullGroup:
    """One node group: the merge of its files at the anchor, and its change files in the range."""

    before: node_merge.NodeTask
    changes: tuple[tuple[str, DataFile, int], ...]


def plan_full(
    table: ArcticTable, span: Range, history: versions.History, *, skip_overwrites: bool = False
) -> FullPlan:
    """The files of ``span``'s full changes. A version that replaced rows without per-key changes is
    refused as an incremental read refuses it; ``skip_overwrites`` (a stream's): the changes start
    after the last such version in the range, whose rows are then the state pre-images start from."""
    inside = [c for c in history.commits if span.start < c.version <= span.end]
    skipped = [c for c in inside if not carries_changes(table, c)]
    if skipped and not skip_overwrites:
        raise crossing_error(table, span, skipped[0])
    anchor = max([span.start, *(c.version for c in skipped)])
    changes = change_files(table, Range(anchor, span.end), history=history)
    at = [c.version for c in history.commits if c.version <= anchor]
    if not changes or not at:  # nothing changed, or the table was empty at the anchor
        return FullPlan(anchor, (), changes)
    state = plan_read(table, max(at))
    return FullPlan(anchor, (*state.base_files, *state.change_files), changes, max(at))


def group_of(files: Sequence[FileEntry], changes: frozenset[str]) -> FullGroup:
    """The ``FullGroup`` of a node group's files; ``changes``: the paths of the range's change files."""
    return FullGroup(
        node_merge.NodeTask.of(f for f in files if f.path not in changes),
        tuple(
            (f.store, f.data_file, node_merge.tag(f.sequence_number, f.is_delete))
            for f in files
            if f.path in changes
        ),
    )


def read_group(
    store: Callable[[str], node_merge.Store],
    group: FullGroup,
    schema: Schema,
    keys: Sequence[str],
    engine: MergeEngine | None = None,
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The full changes of one node group: the rows (``schema`` made optional), each row's change type
    and version; ``engine``: the table's merge engine (a folding one makes each version's state the
    fold of the changes up to it, not its change row)."""
    target = schema_to_pyarrow(node_merge.optional(schema), include_field_ids=False)
    parts = tagged_parts(store, group.changes, schema, keys, engine.sequence if engine is not None else ())
    if not parts:
        return target.empty_table(), np.zeros(0, str), np.zeros(0, np.int64)
    rows = node_merge.tagged_rows(parts)
    changes = per_version(rows, keys)
    before = _before(store, group, schema, keys, engine, changes.select(list(keys)), target)
    return changes_over(before, rows, changes, keys, engine, target)


def changes_over(
    before: pa.Table,
    rows: pa.Table,
    changes: pa.Table,
    keys: Sequence[str],
    engine: MergeEngine | None,
    target: pa.Schema,
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The full changes of tagged change ``rows`` (``changes``: cut by :func:`per_version`) over
    ``before``, their keys' rows at the range's start (one per key, in ``target``)."""
    if engine is not None and not engine.newest_wins:
        changes = folded_versions(before, rows, changes, keys, engine)
    return diff(before, changes, keys, target)


def read_latest_folded(
    store: Callable[[str], node_merge.Store],
    group: FullGroup,
    schema: Schema,
    keys: Sequence[str],
    engine: MergeEngine,
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The latest-change feed of one node group of a folding table: per key the range changed, its
    row after the range (the fold of its row before it and its changes in it) as an ``upsert``, or
    ``delete`` with only its key when the fold leaves nothing; the version of its last change."""
    target = schema_to_pyarrow(node_merge.optional(schema), include_field_ids=False)
    parts = tagged_parts(store, group.changes, schema, keys, engine.sequence)
    if not parts:
        return target.empty_table(), np.zeros(0, str), np.zeros(0, np.int64)
    rows = node_merge.tagged_rows(parts)
    changes = per_version(rows, keys)
    last = np.ones(changes.num_rows, dtype=bool)  # a key's last version: the next row starts a key
    last[:-1] = node_merge.key_starts(changes, keys)[1:]
    touched = changes.filter(pa.array(last))
    versions = touched.column(node_merge.TAG).to_numpy() // 2
    touched = touched.select(list(keys))
    before = _before(store, group, schema, keys, engine, touched, target)
    state = engine_fold.merge(
        before, [(rows.drop_columns([node_merge.TAG]), rows.column(node_merge.TAG).to_numpy())], keys, engine
    )
    present = node_merge.changed_rows(touched, state, keys)  # both sorted by key: state is touched[present]
    out = pa.concat_tables([conformed(state, target), conformed(touched.filter(pa.array(~present)), target)])
    kinds = np.concatenate([np.full(state.num_rows, "upsert"), np.full(int((~present).sum()), DELETE)])
    return out, kinds, np.concatenate([versions[present], versions[~present]])


def _before(
    store: Callable[[str], node_merge.Store],
    group: FullGroup,
    schema: Schema,
    keys: Sequence[str],
    engine: MergeEngine | None,
    touched: pa.Table,
    target: pa.Schema,
) -> pa.Table:
    """The rows of the ``touched`` keys at the range's start (one per key, in ``target``)."""
    before = node_merge.read_node(
        group.before,
        schema,
        keys,
        store(Store.BASE),
        store(Store.CHANGE),
        sort=False,
        keys_kept=node_merge.keys_in(touched, keys),
        engine=engine,
    )
    return conformed(before.filter(pa.array(node_merge.changed_rows(before, touched, keys))), target)


def folded_versions(
    before: pa.Table, rows: pa.Table, changes: pa.Table, keys: Sequence[str], engine: MergeEngine
) -> pa.Table:
    """:func:`per_version`'s rows for a folding engine: per version, each key it touched as the fold
    of its row in ``before`` and its change ``rows`` up to that version (tagged as an upsert), or its
    key tagged as a delete when the fold leaves nothing. One fold per version of the range."""
    versions = changes.column(node_merge.TAG).to_numpy() // 2
    upto = rows.column(node_merge.TAG).to_numpy() // 2
    parts = []
    for version in np.unique(versions).tolist():
        touched = changes.filter(pa.array(versions == version)).select(list(keys))
        mine = rows.filter(pa.array((upto <= version) & node_merge.changed_rows(rows, touched, keys)))
        stored = before.filter(pa.array(node_merge.changed_rows(before, touched, keys)))
        tags = mine.column(node_merge.TAG).to_numpy()
        state = engine_fold.merge(stored, [(mine.drop_columns([node_merge.TAG]), tags)], keys, engine)
        gone = touched.filter(pa.array(~node_merge.changed_rows(touched, state, keys)))
        parts.append(state.append_column(node_merge.TAG, pa.array(np.full(state.num_rows, 2 * version))))
        parts.append(
            conformed(gone, before.schema).append_column(
                node_merge.TAG, pa.array(np.full(gone.num_rows, 2 * version + 1))
            )
        )
    return pa.concat_tables(parts).sort_by([*((k, "ascending") for k in keys), (node_merge.TAG, "ascending")])


def per_version(rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Tagged change rows cut to one per key per version (the highest tag, as the merge rule picks),
    sorted by key and version."""
    rows = rows.sort_by([*((k, "ascending") for k in keys), (node_merge.TAG, "ascending")])
    if rows.num_rows == 0:
        return rows
    version = rows.column(node_merge.TAG).to_numpy() // 2
    starts = node_merge.key_starts(rows, keys)
    last = np.ones(rows.num_rows, dtype=bool)
    last[:-1] = starts[1:] | (version[1:] != version[:-1])
    return rows.filter(pa.array(last))


def diff(
    before: pa.Table, changes: pa.Table, keys: Sequence[str], target: pa.Schema
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """Delta's rows for ``changes`` (from :func:`per_version`, tagged) over ``before`` (the keys' rows
    before the first of them, one per key, in ``target``): the rows, change types and versions, a
    version's pre-image before its post-image."""
    tags = changes.column(node_merge.TAG).to_numpy()
    versions, present = tags // 2, tags % 2 == 0
    n, old = len(tags), before.num_rows
    data = pa.concat_tables([before, conformed(changes.drop_columns([node_merge.TAG]), target)])
    index = np.arange(n)
    starts = node_merge.key_starts(changes, keys)
    # Where each change's key was before it (an index into ``data``, -1: absent): its previous change
    # in the range when that was an upsert, else its row in ``before``.
    prev = np.full(n, -1, np.int64)
    follows_upsert = ~starts & np.concatenate([[False], present[:-1]])
    prev[follows_upsert] = old + index[follows_upsert] - 1
    if old:
        firsts = data.slice(old).select(list(keys)).filter(pa.array(starts))
        firsts = firsts.append_column(_FIRST, pa.array(index[starts]))
        known = data.slice(0, old).select(list(keys)).append_column(_SECOND, pa.array(np.arange(old)))
        hit = firsts.join(known, keys=list(keys), join_type="inner")
        prev[hit.column(_FIRST).to_numpy()] = hit.column(_SECOND).to_numpy()
    had = prev >= 0
    pieces = (
        (~had & present, 0, old + index, INSERT),
        (had & present, 0, prev, UPDATE_PREIMAGE),
        (had & present, 1, old + index, UPDATE_POSTIMAGE),
        (had & ~present, 0, prev, DELETE),
    )
    which = np.concatenate([index[mask] for mask, *_ in pieces])
    order = np.concatenate([np.full(mask.sum(), rank) for mask, rank, *_ in pieces])
    taken = np.concatenate([source[mask] for mask, _, source, _ in pieces])
    kinds = np.concatenate([np.full(mask.sum(), kind) for mask, _, _, kind in pieces])
    ordered = np.lexsort((order, which))
    return data.take(pa.array(taken[ordered])), kinds[ordered], versions[which[ordered]]


def full_changes_frame(
    spark: SparkSession,
    table: ArcticTable,
    span: Range,
    history: versions.History,
    local: Callable[[ArcticTable, FullPlan, dict[int, int]], Any | None] | None = None,
) -> DataFrame:
    """The full changes of ``span`` as a DataFrame (SQL's ``table_changes``): the table's columns,
    ``_change_type``, ``_change_version`` and ``_commit_timestamp`` (see :func:`feed_frame`)."""
    return feed_frame(spark, table, span, history, local)[0]


def committed_at(history: versions.History, span: Range) -> dict[int, int]:
    """When each version of ``span`` was committed (milliseconds), for ``_commit_timestamp``."""
    return {c.version: c.committed_at_ms for c in history.commits if span.start < c.version <= span.end}


def feed_types(table: ArcticTable) -> tuple[StructType, pa.Schema]:
    """The full change feed's Spark type (the table's columns, every one nullable, and the change
    columns) and the Arrow schema its rows are conformed to."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    from arctic_sql.table.model.schemas import spark_schema

    spark_type = StructType(
        [
            *spark_schema(table.schema, all_nullable=True).fields,
            StructField(CHANGE_TYPE, StringType()),
            StructField(CHANGE_VERSION, LongType()),
            StructField(COMMIT_TIMESTAMP, TimestampType()),
        ]
    )
    return spark_type, to_arrow_schema(spark_type, timezone="UTC")


def feed_frame(
    spark: SparkSession,
    table: ArcticTable,
    span: Range,
    history: versions.History,
    local: Callable[[ArcticTable, FullPlan, dict[int, int]], Any | None] | None = None,
    plan: FullPlan | None = None,
) -> tuple[DataFrame, bool]:
    """:func:`full_changes_frame`, and whether its rows were computed in this process: ``local``
    (preimages.read_local: a small change set of a keyed table, its pre-images looked up by key)
    computes them when it can, else they are read a node group per Spark task in pyarrow (a file at
    a time, every row an insert, without a key)."""
    committed = committed_at(history, span)
    schema, keys = table.schema, tuple(table.primary_key)
    spark_type, arrow_type = feed_types(table)
    if table.is_keyed:
        plan = plan if plan is not None else plan_full(table, span, history)
        computed = local(table, plan, committed) if local is not None else None
        if computed is not None:  # a small change set: computed here, handed to Spark as rows
            return local_rows.frame(spark, conformed(computed.rows, arrow_type), spark_type), True
        changed = frozenset(f.path for f in plan.changes)
        groups = [group_of(g, changed) for g in node_groups([*plan.before, *plan.changes])]
    else:
        groups = [group_of([f], frozenset([f.path])) for f in change_files(table, span, history=history)]
    base = node_merge.Store.of(table.base)
    change = node_merge.Store.of(table.change) if table.change is not None else base
    engine = table.merge_engine if keys else None

    def store(name: str) -> node_merge.Store:
        return change if name == Store.CHANGE else base

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # group indexes in, changes out
        for batch in batches:
            for i in batch.column(0).to_pylist():
                group = groups[i]
                if keys:
                    rows, kinds, found = read_group(store, group, schema, keys, engine)
                else:
                    rows, kinds, found = net_changes(store, group.changes, schema, keys)
                yield from conformed(
                    with_change_columns(rows, kinds, found, committed), arrow_type
                ).to_batches()

    count = max(1, len(groups))
    indexes = spark.range(0, len(groups), 1, numPartitions=count).selectExpr("CAST(id AS INT) AS i")
    return indexes.mapInArrow(storage.shipped(read), spark_type), False
