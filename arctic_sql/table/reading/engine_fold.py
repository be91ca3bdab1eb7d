"""The fold of a key's rows by the table's merge engine (``model/merge_engine.py``), over Arrow.

Every place rows meet (merge-on-read, optimizing, lookups, the change feed) hands this one function a
node's rows: the stored row of each key (tagged ``BASE_TAG``, below every change) and its change rows
tagged ``transaction * 2 + (1 if a delete)``. Per key, in commit order:

1. A delete removes what came before it (the stored row and older changes); ``first-row`` and
   ``partial-update.ignore-delete`` drop deletes instead.
2. With ``sequence.field``, a change applies only when its sequence is at least that of every row
   before it (NULL the lowest; a tie goes to the later commit). Comparing with the running maximum,
   not sorting all rows by sequence, keeps the fold one of the stored row and the new changes: a row
   folded by optimizing carries the maximum sequence, so merge-on-read before and after optimizing agree.
   Deletes carry the sequence columns when their write had them (a CDC or DataFrame write with
   ``_change_type``, Debezium, a MERGE delete whose source has them): such a delete applies only
   under the same rule, so a late delete below the stored sequence is ignored. A delete without one
   (SQL ``DELETE``) always applies. An applied delete leaves no row and no sequence behind, so the
   running maximum starts again after it: a late upsert below an applied delete's sequence brings
   the key back. With ``MergeEngine.lasting_deletes`` (issue 31, not set by any table yet: the
   folds' callers do not store tombstones yet) it leaves a tombstone instead (``fold_lasting``): the
   key is absent with the delete's sequence, which later changes are held to.
3. The engine folds what is left: the last row (deduplicate), the first (first-row), per column the
   last non-NULL value (partial-update) or the column's aggregate function (aggregation).

All of it is vectorised: one sort by (key, tag), then numpy ``reduceat`` over each key's run and
pyarrow group-bys, never a Python loop per key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arctic_sql.table.model.merge_engine import Engine, MergeEngine

TAG = "_arctic_tag"
GROUP = "_arctic_group"
BASE_TAG = -2  # even (an upsert) and below every change's tag (transactions start at 1)
# A stored tombstone: odd (a delete), below every change; a key has a stored row or a tombstone.
TOMBSTONE_TAG = -3


def key_starts(rows: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """Which rows of ``rows`` (sorted by ``keys``) start a key: a boolean per row."""
    first = np.zeros(rows.num_rows, dtype=bool)
    if rows.num_rows == 0:
        return first
    first[0] = True
    for k in keys:  # a row starts a new key when any key column differs from the row before
        column = rows.column(k).combine_chunks()
        first[1:] |= pc.fill_null(
            pc.not_equal(column.slice(1), column.slice(0, len(column) - 1)), True
        ).to_numpy(zero_copy_only=False)
    return first


def tagged_rows(changes: Sequence[tuple[pa.Table, Any]]) -> pa.Table:
    """Tagged tables as one, each row with its ``_arctic_tag`` (one number per table, or one per row)."""
    parts = [
        t.append_column(TAG, pa.array(np.broadcast_to(np.asarray(value, np.int64), len(t))))
        for t, value in changes
    ]
    return pa.concat_tables(parts, promote_options="permissive")


def merge(
    base: pa.Table | None, changes: Sequence[tuple[pa.Table, Any]], keys: Sequence[str], engine: MergeEngine
) -> pa.Table:
    """The rows of one node after folding ``changes`` (table, tag) into ``base`` by ``engine``, in
    ``base``'s schema when there is one, sorted by key."""
    return merge_lasting(base, None, changes, keys, engine)[0]


def merge_lasting(
    base: pa.Table | None,
    tombstones: pa.Table | None,
    changes: Sequence[tuple[pa.Table, Any]],
    keys: Sequence[str],
    engine: MergeEngine,
) -> tuple[pa.Table, pa.Table]:
    """``merge`` with the node's stored ``tombstones`` (key and sequence columns) as stored state,
    and the tombstones after the fold beside its rows (empty unless ``engine.lasting_deletes``)."""
    parts = [(base, BASE_TAG)] if base is not None and base.num_rows else []
    if tombstones is not None and tombstones.num_rows:
        parts.append((tombstones, TOMBSTONE_TAG))
    rows, left = fold_lasting(tagged_rows([*parts, *changes]), keys, engine)
    if base is None:
        return rows, left
    for f in base.schema:  # with only delete tables, the change rows carry only the key
        if f.name not in rows.column_names:
            rows = rows.append_column(f.name, pa.nulls(rows.num_rows, f.type))
    return rows.select(base.column_names).cast(base.schema), left


def fold(rows: pa.Table, keys: Sequence[str], engine: MergeEngine) -> pa.Table:
    """One row per surviving key of ``rows`` (tagged in ``TAG``; the stored row ``BASE_TAG``), by
    ``engine``; without ``TAG``, sorted by key."""
    return fold_lasting(rows, keys, engine)[0]


def fold_lasting(rows: pa.Table, keys: Sequence[str], engine: MergeEngine) -> tuple[pa.Table, pa.Table]:
    """``fold``, and beside its rows the tombstones it leaves (``engine.lasting_deletes``): per key
    whose last applied change is a delete with a sequence, the key and sequence columns of it."""
    if rows.num_rows:
        rows = rows.sort_by([*((k, "ascending") for k in keys), (TAG, "ascending")])
    tags = rows.column(TAG).to_numpy()
    group = np.cumsum(key_starts(rows, keys)) - 1
    deletes = tags % 2 == 1
    marks = [*dict.fromkeys([*keys, *engine.sequence])]
    tombstones = rows.select(marks).slice(0, 0)
    if (
        engine.sequence
        and deletes.any()
        and engine.engine is not Engine.FIRST_ROW
        and not engine.ignore_delete
    ):
        if engine.lasting_deletes:
            keep, marked = _lasting(rows.select(list(engine.sequence)), group, deletes)
            tombstones = rows.select(marks).filter(pa.array(marked))
        else:
            keep = _sequenced(rows.select(list(engine.sequence)), group, deletes)
    else:
        keep = _after_deletes(group, deletes, engine)
        if engine.sequence and keep.any():
            keep[keep] = _in_sequence(rows.filter(pa.array(keep)).select(list(engine.sequence)), group[keep])
    return _engine_fold(rows, keys, engine, keep, group, tags), tombstones


def _engine_fold(
    rows: pa.Table,
    keys: Sequence[str],
    engine: MergeEngine,
    keep: np.ndarray,
    group: np.ndarray,
    tags: np.ndarray,
) -> pa.Table:
    """Step 3: the engine's fold of each key's rows that ``keep`` leaves."""
    rows, group, tags = rows.filter(pa.array(keep)).drop_columns([TAG]), group[keep], tags[keep]
    if rows.num_rows == 0:
        return rows
    starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
    ends = np.concatenate([starts[1:], [rows.num_rows]]) - 1
    if engine.engine is Engine.DEDUPLICATE:
        return rows.take(pa.array(ends))
    if engine.engine is Engine.FIRST_ROW:
        return rows.take(pa.array(starts))
    functions = dict.fromkeys(rows.column_names, "last_non_null_value")
    if engine.engine is Engine.AGGREGATION:
        functions.update({c: f for c, f, _ in engine.aggregates})
    distinct = {c for c, _, d in engine.aggregates if d}
    columns = []
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        if name in keys:
            columns.append(column.take(pa.array(starts)))
        else:
            found = _aggregate(column.combine_chunks(), functions[name], starts, ends, tags, name in distinct)
            columns.append(found.cast(column.type))
    return pa.table(columns, schema=rows.schema)


def _after_deletes(group: np.ndarray, deletes: np.ndarray, engine: MergeEngine) -> np.ndarray:
    """Which rows a delete leaves: those after a key's last delete (deletes themselves never stay)."""
    if engine.engine is Engine.FIRST_ROW or engine.ignore_delete or not deletes.any():
        return ~deletes
    position = np.arange(len(group))
    starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
    last_delete = np.maximum.reduceat(np.where(deletes, position, -1), starts)
    return position > last_delete[group]


def _sequenced(sequence: pa.Table, group: np.ndarray, deletes: np.ndarray) -> np.ndarray:
    """Which rows survive a key's changes in commit order under ``sequence.field``, deletes included.

    A delete without a sequence (every sequence column NULL: SQL ``DELETE``) always applies; one
    with a sequence applies only when it is at least the running maximum, as an upsert does. An
    applied delete leaves nothing behind, so the running maximum starts again after it: the state
    of a key is then always what a stored row says (a row with its sequence, or no row), and folding
    a stored row with the rest equals folding everything (invariant 2). Whether a delete applies
    depends on the last one that did, so each round finds every key's first applied delete after
    the last and cuts there: as many rounds as a key has applied deletes in one fold, each vectorised.
    """
    n = len(group)
    position = np.arange(n)
    carries = np.zeros(n, dtype=bool)
    for column in sequence.columns:
        carries |= column.is_valid().to_numpy(zero_copy_only=False)
    active = _after_deletes(
        group, deletes & ~carries, MergeEngine()
    )  # rows after the last unsequenced delete
    while True:
        index = np.flatnonzero(active)
        passes = np.zeros(n, dtype=bool)
        if len(index):
            passes[index] = _in_sequence(sequence.take(pa.array(index)), group[index])
        applied = passes & deletes
        if not applied.any():
            return passes & ~deletes
        first = np.full(int(group[-1]) + 1, n)
        np.minimum.at(first, group[applied], position[applied])
        cut = first[group]
        active &= (position > cut) | (cut == n)  # keys without an applied delete keep their rows


def _lasting(sequence: pa.Table, group: np.ndarray, deletes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_sequenced`` where an applied delete with a sequence lasts: the key is absent with that
    sequence (a tombstone), so the running maximum does not start again after it and a late upsert
    below it is ignored. A key's state is then a row with its sequence, a tombstone, or nothing
    (after a delete without a sequence, which always applies and clears the running maximum), and
    folding a stored row or tombstone with the rest equals folding everything (invariant 2). One
    pass: a row applies when it is at least the running maximum since the key's last unsequenced
    delete; what stays is what applied after the last applied delete. Returns which rows stay and
    which deletes are left as tombstones (an applied one that is its key's last applied change)."""
    n = len(group)
    position = np.arange(n)
    carries = np.zeros(n, dtype=bool)
    for column in sequence.columns:
        carries |= column.is_valid().to_numpy(zero_copy_only=False)
    active = _after_deletes(group, deletes & ~carries, MergeEngine())
    index = np.flatnonzero(active)
    passes = np.zeros(n, dtype=bool)
    if len(index):
        passes[index] = _in_sequence(sequence.take(pa.array(index)), group[index])
    applied = passes & deletes
    starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
    last_applied = np.maximum.reduceat(np.where(applied, position, -1), starts)[group]
    keep = passes & (position > last_applied)
    kept = np.add.reduceat(keep.astype(np.int64), starts)[group] > 0
    return keep, applied & (position == last_applied) & ~kept


def _in_sequence(sequence: pa.Table, group: np.ndarray) -> np.ndarray:
    """Which rows (a key's in commit order) carry a sequence at least every earlier row's of their
    key: the dense rank of the sequence tuple (NULL lowest) against its running maximum per key."""
    n = sequence.num_rows
    order = pc.sort_indices(sequence, sort_keys=[(c, "ascending", "at_start") for c in sequence.column_names])
    order = order.to_numpy()
    ordered = sequence.take(pa.array(order))
    differs = np.zeros(max(n - 1, 0), dtype=bool)
    for column in ordered.columns:
        values = column.combine_chunks()
        after, before = values.slice(1), values.slice(0, n - 1)
        valid_a = after.is_valid().to_numpy(zero_copy_only=False)
        valid_b = before.is_valid().to_numpy(zero_copy_only=False)
        unequal = pc.fill_null(pc.not_equal(after, before), False).to_numpy(zero_copy_only=False)
        differs |= (valid_a != valid_b) | unequal
    rank = np.empty(n, np.int64)
    rank[order] = np.concatenate([[0], np.cumsum(differs)])
    value = rank + group.astype(np.int64) * (
        int(rank.max()) + 1
    )  # keys apart: a key's values exceed the last's
    return value >= np.maximum.accumulate(value)


def _aggregate(
    column: pa.Array, function: str, starts: np.ndarray, ends: np.ndarray, tags: np.ndarray, distinct: bool
) -> pa.Array:
    """``function`` of ``column`` over each key's run ``starts[i]..ends[i]`` (the stored row first)."""
    n = len(column)
    position = np.arange(n)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    if function == "last_value":
        return column.take(pa.array(ends))
    if function == "first_value":
        return column.take(pa.array(starts))
    if function == "last_non_null_value":
        last = np.maximum.reduceat(np.where(valid, position, -1), starts)
        return column.take(pa.array(last, mask=last < 0))
    if function == "first_non_null_value":
        first = np.minimum.reduceat(np.where(valid, position, n), starts)
        return column.take(pa.array(first, mask=first >= n))
    if function == "count":
        # The stored row holds the count so far; each change row with a value counts one.
        stored = tags == BASE_TAG
        held = pc.fill_null(column.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        return pa.array(np.add.reduceat(np.where(stored, held, valid.astype(np.int64)), starts))
    if function in ("sum", "min", "max") and (
        pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
    ):
        return _numeric(column, function, starts, valid)
    group = np.repeat(np.arange(len(starts)), ends - starts + 1)
    if function == "collect":
        return _collect(column, group, len(starts), distinct)
    table = pa.table({GROUP: group, "v": column})
    options = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
    named = {"sum": "sum", "min": "min", "max": "max", "bool_and": "all", "bool_or": "any"}
    if function in named:
        found = table.group_by(GROUP, use_threads=False).aggregate([("v", named[function], options)])
        return found.column(f"v_{named[function]}").combine_chunks()
    if function == "listagg":  # the non-NULL strings in order, joined by a comma (Paimon's default)
        found = table.filter(pc.is_valid(table.column("v"))).group_by(GROUP, use_threads=False)
        lists = found.aggregate([("v", "list")])
        joined = pc.binary_join(lists.column("v_list"), ",")
        out = np.full(len(starts), -1)
        out[lists.column(GROUP).to_numpy()] = np.arange(lists.num_rows)
        return joined.combine_chunks().take(pa.array(out, mask=out < 0))
    raise ValueError(f"unknown aggregate function {function}")


def _numeric(column: pa.Array, function: str, starts: np.ndarray, valid: np.ndarray) -> pa.Array:
    """``sum``, ``min`` or ``max`` of a numeric column per run, in numpy (NULL for a run of NULLs);
    integers add as int64 and the caller casts back, as the group-by's result would be."""
    wide = pa.int64() if pa.types.is_integer(column.type) else pa.float64()
    values = column.cast(wide)
    fill: float
    reduce: np.ufunc
    if function == "sum":
        fill, reduce = 0, np.add
    elif function == "min":
        fill, reduce = (np.iinfo(np.int64).max if wide == pa.int64() else np.inf), np.minimum
    else:
        fill, reduce = (np.iinfo(np.int64).min if wide == pa.int64() else -np.inf), np.maximum
    filled = pc.fill_null(values, pa.scalar(fill, wide)).to_numpy(zero_copy_only=False)
    found = reduce.reduceat(filled, starts)
    return pa.array(found, wide, mask=np.add.reduceat(valid.astype(np.int64), starts) == 0)


def _collect(column: pa.Array, group: np.ndarray, groups: int, distinct: bool) -> pa.Array:
    """Each key's arrays concatenated in order (distinct: each element once, first seen first)."""
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
    values = pc.list_flatten(column)
    owner = np.repeat(group, lengths)
    if distinct:
        pairs = pa.table({GROUP: owner, "v": values}).group_by([GROUP, "v"], use_threads=False).aggregate([])
        owner, values = pairs.column(GROUP).to_numpy(), pairs.column("v").combine_chunks()
        order = np.argsort(owner, kind="stable")
        owner, values = owner[order], values.take(pa.array(order))
    counts = np.bincount(owner, minlength=groups)
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values, type=column.type)
