"""Rows by primary key, read in this process: what a partial MERGE needs of its target.

A key's rows lie in one tree node (DESIGN "The tree"), so the rows of a few keys are a merge of the
files of those keys' nodes whose key bounds hold them (``scan.plan_read`` prunes both). Reading them
here with pyarrow, node group by node group, keeping only the keys' rows of each, costs no Spark job
and no Python worker: a partial MERGE of a 1,000-row batch spent most of its time in the Spark job
that read the same files in a Python task and broadcast the result. What the driver holds is one node
group's rows at a time and the keys' rows, never the table's.

:func:`plan_lookup` takes the few keys a statement names (at most ``MAX_LOOKUP_KEYS``, hashed one by
one). :func:`plan_many` takes the keys of a change set (thousands, as an Arrow table): one scan plan
of both stores, the keys hashed with numpy (keyhash_arrow), and each file kept when one of its node's
keys lies in its key bounds, compared column-wise; each node group then reads only its own keys. A
refresh that looked 4,000 keys up in chunks of 1,024 spent most of its driver time planning each
chunk again and hashing and bounds-checking key by key in Python (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg import types as it
from pyiceberg.expressions import And, BooleanExpression

from arctic_sql.table.format import keyhash_arrow
from arctic_sql.table.format.keyhash import MAX_LOOKUP_KEYS, hash_types, lookup_hashes, spark_xxhash64
from arctic_sql.table.format.tree import DataTreeNode
from arctic_sql.table.model import predicates
from arctic_sql.table.reading import node_merge
from arctic_sql.table.reading.key_groups import KeySet
from arctic_sql.table.reading.merge_on_read import node_groups
from arctic_sql.table.reading.scan import FileEntry, ReadPlan, plan_read

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.types import IcebergType

    from arctic_sql.table.model.table import ArcticTable

# File bytes a lookup reads in this process at most; beyond, Spark tasks share the reading.
LOCAL_LOOKUP_MAX_BYTES = 512 * 1024 * 1024
# pyiceberg's metrics evaluation treats an IN of more values as "might match" (its
# IN_PREDICATE_LIMIT), and binding one converts every value, per manifest and per file read:
# beyond this many values, the bounds of the values prune as much and cost nothing.
IN_LIST_MAX_VALUES = 200
# Iceberg's default metrics keep string bounds of up to this many characters whole ("truncate(16)").
TRUNCATED_LENGTH = 16
# The key types keyhash.py hashes (plan_lookup refuses others): plan_many takes the same ones.
HASHED_TYPES = (it.IntegerType, it.LongType, it.StringType, it.DateType, it.BooleanType)


def key_filter(keys: Sequence[str], values: Sequence[tuple]) -> BooleanExpression:
    """A filter that every row of ``values`` (key tuples) passes, to prune files and row groups by
    their statistics: ``k IN (...)`` on each key column, or ``k BETWEEN min AND max`` for many
    values. The rows read are matched to the keys exactly afterwards."""
    return _key_columns_filter(keys, [{v[i] for v in values} for i in range(len(keys))])


def _key_columns_filter(keys: Sequence[str], distinct: Sequence[set[Any]]) -> BooleanExpression:
    """:func:`key_filter` of each key column's distinct values (``distinct[i]`` for ``keys[i]``)."""
    parts: list[BooleanExpression] = []
    for key, column in zip(keys, distinct, strict=True):
        if len(column) <= IN_LIST_MAX_VALUES:
            parts.append(predicates.is_in(key, column))
        else:
            parts.extend(
                [
                    predicates.greater_than_or_equal(key, min(column)),
                    predicates.less_than_or_equal(key, max(column)),
                ]
            )
    return parts[0] if len(parts) == 1 else And(*parts)


def plan_lookup(table: ArcticTable, version: int | None, values: Sequence[tuple]) -> ReadPlan | None:
    """The read of ``values`` (key tuples) at ``version``: only the files of their tree nodes whose
    key bounds hold one; None when that is not a read for this process (no key, too many keys, a key
    that cannot be hashed, a node group over ``merge-on-read.in-memory-max-bytes`` or more than
    ``LOCAL_LOOKUP_MAX_BYTES`` in all)."""
    keys = list(table.primary_key)
    if not keys or table.change is None or not values or len(values) > MAX_LOOKUP_KEYS:
        return None
    types = table.key_types
    by = hash_types(types, table.key_as_int)
    hashes = lookup_hashes(list(values), by)
    if hashes is None:
        return None
    condition = key_filter(keys, values)
    plan = plan_read(table, version, base_filter=condition, change_filter=condition, key_hashes=hashes)
    # Each key by its hash: a file is read only when a key of its node's path lies in its bounds.
    hashed = [(h, v) for v in values if (h := spark_xxhash64(v, by)) is not None]  # all: hashes is not None
    field_ids = [table.schema.find_field(k).field_id for k in keys]
    plan = replace(
        plan,
        base_files=tuple(f for f in plan.base_files if _may_hold(f, hashed, field_ids, types)),
        change_files=tuple(f for f in plan.change_files if _may_hold(f, hashed, field_ids, types)),
    )
    return plan if _fits(table, [*plan.base_files, *plan.change_files]) else None


def _fits(table: ArcticTable, files: Sequence[FileEntry]) -> bool:
    """Whether reading ``files`` is a read for this process: at most ``LOCAL_LOOKUP_MAX_BYTES`` in all
    and ``merge-on-read.in-memory-max-bytes`` per node group."""
    if sum(f.file_size for f in files) > LOCAL_LOOKUP_MAX_BYTES:
        return False
    limit = table.settings.merge_on_read_in_memory_max_bytes
    return not files or max(sum(f.file_size for f in g) for g in node_groups(files)) <= limit


@dataclass(frozen=True)
class ManyKeys:
    """A lookup of many keys planned once (:func:`plan_many`): its read, and each node group's files
    with the keys they may hold (the keys a group's read keeps)."""

    plan: ReadPlan
    groups: tuple[tuple[tuple[FileEntry, ...], pa.Table], ...]


def plan_many(table: ArcticTable, version: int | None, wanted: pa.Table) -> ManyKeys | None:
    """The read of the keys in ``wanted`` (a table with the key columns, duplicates allowed) at
    ``version``: only the files of their tree nodes whose key bounds hold one, as :func:`plan_lookup`
    chooses them, for any number of keys; None when that is not a read for this process (no key, a
    key type the hash does not cover, a node group or the whole over the byte bounds)."""
    keys = list(table.primary_key)
    types = table.key_types
    if not keys or table.change is None or not all(isinstance(t, HASHED_TYPES) for t in types):
        return None
    target = _target(table.schema)
    try:
        wanted = wanted.select(keys).cast(pa.schema([target.field(k) for k in keys]))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    wanted = wanted.group_by(keys, use_threads=False).aggregate([]).select(keys).combine_chunks()
    hashes = (
        keyhash_arrow.spark_xxhash64([wanted.column(k) for k in keys], table.key_as_int)
        if wanted.num_rows
        else np.zeros(0, np.uint64)
    )
    plan = plan_read(table, version)  # pruned here, file by file, by the keys' nodes and bounds
    field_ids = [table.schema.find_field(k).field_id for k in keys]
    holds: dict[tuple[str, str], np.ndarray] = {}
    for f in [*plan.base_files, *plan.change_files]:
        held = _holding(f, hashes, wanted, field_ids, types)
        if held.any():
            holds[(f.store, f.path)] = held
    condition = _many_filter(wanted, keys)
    plan = replace(
        plan,
        base_files=tuple(f for f in plan.base_files if (f.store, f.path) in holds),
        change_files=tuple(f for f in plan.change_files if (f.store, f.path) in holds),
        base_filter=condition,  # row groups only: read_many keeps each group's keys exactly
        change_filter=condition,
    )
    files = [*plan.base_files, *plan.change_files]
    if not _fits(table, files):
        return None
    groups = []
    for group in node_groups(files) if files else []:
        mine = np.logical_or.reduce([holds[(f.store, f.path)] for f in group])
        groups.append((tuple(group), wanted.filter(pa.array(mine))))
    return ManyKeys(plan, tuple(groups))


def _many_filter(wanted: pa.Table, keys: Sequence[str]) -> BooleanExpression:
    """:func:`key_filter` of all of ``wanted``'s keys, each column's distinct values found in Arrow
    (never of the columns' bounds alone: ``k IN (min, max)`` refuses a row group of keys between)."""
    return _key_columns_filter(keys, [set(pc.unique(wanted.column(k)).to_pylist()) for k in keys])


def _holding(
    file: FileEntry,
    hashes: np.ndarray,
    wanted: pa.Table,
    field_ids: Sequence[int],
    types: Sequence[IcebergType],
) -> np.ndarray:
    """Which of ``wanted``'s keys (their ``hashes``) ``file`` may hold: the vectorised
    :func:`_may_hold`, a boolean per key."""
    node = DataTreeNode.of_id(file.node_id)
    held = (hashes & np.uint64(node.mask)) == np.uint64(node.index)
    if not held.any():
        return held
    lows, highs = file.data_file.lower_bounds or {}, file.data_file.upper_bounds or {}
    for column, field_id, field_type in zip(wanted.itercolumns(), field_ids, types, strict=True):
        low, high = _bound(lows, field_id, field_type), _bound(highs, field_id, field_type)
        if low is not None:
            held &= pc.greater_equal(column, low).to_numpy(zero_copy_only=False)
        if high is not None:
            held &= pc.less_equal(column, high).to_numpy(zero_copy_only=False)
    return held


def describe(plan: ReadPlan) -> str:
    """What a lookup reads, as EXPLAIN shows it (the fields of ``reader.by_node``'s name)."""
    files = [*plan.base_files, *plan.change_files]
    groups = len(node_groups(files)) if files else 0
    nodes = len({(f.partition, f.store, f.node_id) for f in files})
    return (
        f"arctic_lookup_in_driver[groups={groups}, nodes={nodes}, base_files={len(plan.base_files)}, "
        f"change_files={len(plan.change_files)}]"
    )


def _may_hold(
    file: FileEntry,
    hashed: Sequence[tuple[int, tuple]],
    field_ids: Sequence[int],
    types: Sequence[IcebergType],
) -> bool:
    """Whether ``file`` may hold one of the keys (hash, key tuple): one whose hash lies on the path of
    the file's tree node and whose every column lies within the file's bounds of that column."""
    node = DataTreeNode.of_id(file.node_id)
    lows, highs = file.data_file.lower_bounds or {}, file.data_file.upper_bounds or {}
    bounds = [(_bound(lows, i, t), _bound(highs, i, t)) for i, t in zip(field_ids, types, strict=True)]
    return any(
        key_hash & node.mask == node.index
        and all(
            (low is None or low <= v) and (high is None or v <= high)
            for v, (low, high) in zip(key, bounds, strict=True)
        )
        for key_hash, key in hashed
    )


def _bound(bounds: dict[int, bytes], field_id: int, field_type: IcebergType) -> Any:
    """A column's bound, or None when there is none or it may be truncated (a string of the length
    that metrics truncate to, whose upper bound was rounded up, not kept)."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import PrimitiveType

    assert isinstance(field_type, PrimitiveType)  # a key column
    raw = bounds.get(field_id)
    if raw is None:
        return None
    value = from_bytes(field_type, raw)
    return None if isinstance(value, (str, bytes)) and len(value) >= TRUNCATED_LENGTH else value


def read_keys(table: ArcticTable, plan: ReadPlan, values: Sequence[tuple]) -> pa.Table:
    """The merged rows of ``plan`` (from :func:`plan_lookup`) whose key is one of ``values``, in the
    plan's schema with every column nullable."""
    keys = list(table.primary_key)
    target = _target(plan.schema)
    wanted = pa.table({k: pa.array([v[i] for v in values], target.field(k).type) for i, k in enumerate(keys)})
    files = [*plan.base_files, *plan.change_files]
    # Each key column's values, kept while scanning (a superset of the keys for a composite key);
    # files are sorted by key: a key's rows lie in one row group.
    kept, key_set = node_merge.keys_in(wanted, keys), KeySet.of(keys, values)
    return _read(
        table, plan, [(group, wanted, kept, key_set) for group in node_groups(files)] if files else []
    )


def read_many(table: ArcticTable, looked: ManyKeys) -> pa.Table:
    """The merged rows of the keys :func:`plan_many` planned, in the plan's schema with every column
    nullable: each node group reads and keeps only its own keys."""
    keys = list(table.primary_key)
    return _read(
        table,
        looked.plan,
        [
            (
                list(g),
                w,
                node_merge.keys_in(w, keys),
                KeySet.of_columns(keys, [pc.unique(w.column(k)).to_pylist() for k in keys]),
            )
            for g, w in looked.groups
        ],
    )


def _target(schema: Schema) -> pa.Schema:
    """The Arrow schema a lookup's rows come in: the table's, every column nullable."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(node_merge.optional(schema), include_field_ids=False)


def _read(
    table: ArcticTable,
    plan: ReadPlan,
    groups: Iterable[tuple[Sequence[FileEntry], pa.Table, Any, KeySet]],
) -> pa.Table:
    """The merged rows of each node group (files, the keys wanted of it, their scan filter and key
    set) whose key is one of the group's wanted keys."""
    keys = list(table.primary_key)
    target = _target(plan.schema)
    base, change = node_merge.Store.both(table)
    engine = table.merge_engine
    found = [target.empty_table()]
    for group, wanted, kept, key_set in groups:
        task = node_merge.NodeTask.of(list(group))
        try:
            rows = node_merge.read_node(
                task,
                plan.schema,
                keys,
                base,
                change,
                sort=False,
                base_filter=plan.base_filter,
                change_filter=plan.change_filter,
                keys_kept=kept,
                engine=engine,
                key_set=key_set,
            )
        except FileNotFoundError as e:
            raise node_merge.missing_file(task, str(table.identifier), plan.version, e) from None
        found.append(rows.filter(pa.array(node_merge.changed_rows(rows, wanted, keys))).cast(target))
    # A node group holding none of the keys is an empty batch: Spark gets these rows through
    # local_rows.frame, which drops such batches.
    return pa.concat_tables(found)
