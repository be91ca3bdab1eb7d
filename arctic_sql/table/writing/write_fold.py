"""Several changes of one key in one write to a folding table (partial-update, aggregation, first-row).

The change store holds one change per key per transaction (DESIGN "Transactions and order"), so a
write folds a key's changes into one, in arrival order (Paimon's order within a write), before its
files are written: the last change when it is a delete, else the engine's fold of the upserts (the
fold of ``table/reading/engine_fold.py``, without a stored row). The engines fold associatively, so
reading the folded change after the stored row equals applying the changes one at a time. Where one
change cannot say it, the write is refused, naming the key:

- a delete followed by an upsert of the key (the upsert would have to start from nothing, and one
  change either removes the key or updates it);
- two values of a ``count`` column (a change row counts one);
- ``sequence.field``: a change of the write below the stored sequence would be skipped alone, so
  the fold of all of them depends on what is stored when the write commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.model.merge_engine import Engine, MergeEngine
from arctic_sql.table.reading import engine_fold
from arctic_sql.table.writing.change_kinds import check_null_keys, shown_key


@dataclass(frozen=True)
class FoldedWrite:
    """One change per key: its row (a delete's carries only the key), whether it deletes, and the
    position of the input row it stands for (the key's last delete or last upsert)."""

    rows: pa.Table
    deletes: np.ndarray
    owners: np.ndarray


def fold_write(
    rows: pa.Table, deletes: np.ndarray, keys: Sequence[str], engine: MergeEngine, what: str, scope: str
) -> FoldedWrite:
    """``rows`` (in arrival order; ``deletes`` marks deletes) folded to one change per key."""
    check_null_keys(rows.select(list(keys)), what)
    n = rows.num_rows
    position = np.arange(n)
    if n < 2:
        return FoldedWrite(rows, deletes, position)
    order = np.asarray(
        pa.table({**{k: rows.column(k) for k in keys}, "__pos": position}).sort_by(
            [*((k, "ascending") for k in keys), ("__pos", "ascending")]
        )["__pos"]
    )
    ordered = rows.take(pa.array(order))
    starts = engine_fold.key_starts(ordered, keys)
    if starts.all():
        return FoldedWrite(rows, deletes, position)
    group = np.cumsum(starts) - 1
    is_delete = deletes[order]
    first_repeat = int(np.flatnonzero(~starts)[0])

    def refuse(row: int, why: str) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"{what} changes primary key ({shown_key(ordered.select(list(keys)), row)}) more than once "
            f"{scope}, and a {engine.engine.value} table {why}: write them in separate commits"
        )

    if engine.sequence:
        raise refuse(first_repeat, "with sequence.field folds one change per key per write")
    groups = int(group[-1]) + 1
    has_upsert = np.zeros(groups, dtype=bool)
    has_upsert[group[~is_delete]] = True
    index = np.arange(n)
    last_delete = np.full(groups, -1)
    np.maximum.at(last_delete, group[is_delete], index[is_delete])
    if engine.engine is Engine.FIRST_ROW or engine.ignore_delete:
        # Deletes change nothing here; a key with only deletes keeps its last one (read drops it).
        keep_delete = (index == last_delete[group]) & ~has_upsert[group]
        fold_rows = ~is_delete
    else:
        # an upsert with a delete of its key before it in the write
        earlier_delete = np.maximum.accumulate(np.where(is_delete, index, -1))
        late = ~is_delete & (earlier_delete >= np.flatnonzero(starts)[group])
        if late.any():
            row = int(np.flatnonzero(late)[0])
            raise refuse(row, "cannot write a key again after deleting it in one change")
        keep_delete = is_delete & (index == last_delete[group])
        fold_rows = ~is_delete & (last_delete[group] < 0)
    for column, function, _ in engine.aggregates if engine.engine is Engine.AGGREGATION else ():
        if function == "count":
            valid = np.asarray(ordered.column(column).is_valid()) & fold_rows
            counts = np.bincount(group[valid], minlength=groups)
            if (counts > 1).any():
                row = int(np.flatnonzero(counts[group] > 1)[0])
                raise refuse(row, f"counts column '{column}' once per change")
    upserts = ordered.filter(pa.array(fold_rows))
    tags = 2 * np.flatnonzero(fold_rows)  # even tags in arrival order: upserts of one transaction each
    folded = engine_fold.fold(engine_fold.tagged_rows([(upserts, tags)]), keys, engine)
    last_upsert = np.full(groups, -1)
    np.maximum.at(last_upsert, group[fold_rows], np.flatnonzero(fold_rows))
    upsert_owners = order[last_upsert[last_upsert >= 0]]
    assert folded.num_rows == len(upsert_owners), "a fold without deletes or sequence keeps every key"
    delete_rows = ordered.filter(pa.array(keep_delete))
    out = pa.concat_tables([folded.cast(rows.schema), delete_rows])
    owners = np.concatenate([upsert_owners, order[keep_delete]])
    flags = np.concatenate([np.zeros(folded.num_rows, dtype=bool), np.ones(delete_rows.num_rows, dtype=bool)])
    arrival = np.argsort(owners, kind="stable")
    return FoldedWrite(out.take(pa.array(arrival)), flags[arrival], owners[arrival])
