"""Writes whose files are written in Spark's Python workers with pyarrow and committed on the driver.

Each task (:func:`write_task`) turns its Arrow batches into the table's rows, keeps one change per
key within the task, and writes the files (arrow_files.py). The driver (:func:`resolve_across_files`)
then looks only where two tasks may have written the same key, the files of one node of one
partition: it reads their key columns, and keeps the newest change of a key (by the sequence each
task wrote beside its files) or refuses the write. No Spark job runs for either step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.format.statistics import statistics_columns
from arctic_sql.table.model.merge_engine import MergeEngine
from arctic_sql.table.writing.arrow_files import WriteTarget, WrittenFile, conform, sidecar_path, write_table
from arctic_sql.table.writing.change_kinds import (
    CHANGE_TYPE,
    SEQUENCE_HINT,
    check_appends,
    check_not_null,
    check_null_keys,
    newest_per_key,
    to_changes,
)
from arctic_sql.table.writing.write_fold import fold_write

SEQUENCE_SIDECAR = "__arctic_sequence"
CHANGES, OVERWRITE, APPEND = "changes", "overwrite", "append"


@dataclass(frozen=True)
class WritePlan:
    """One write, as the driver planned it and every task receives it (pickled)."""

    table: str
    table_root: str  # where write leases go (leases.py)
    target: WriteTarget
    location: str  # this write's folder under the store's data/
    mode: str  # changes | overwrite | append
    sequence_column: str | None
    operation: str  # the history's name for it: write, overwrite, append, stream
    scope: str  # "in one write", "in one micro-batch": what the duplicate-key error says
    change_column: str = CHANGE_TYPE  # the column telling upserts from deletes (SQL's own: arctic_op)
    duplicate_hint: str | None = SEQUENCE_HINT  # how the duplicate-key error says to resolve it
    fold: MergeEngine | None = None  # a folding engine: a key's changes fold into one (write_fold.py)
    keep_missing: tuple[str, ...] = ()  # columns the rows lack, whose stored values stay (narrow_writes.py)

    @property
    def what(self) -> str:
        return f"{self.operation.upper()} into {self.table}"


def write_task(plan: WritePlan, batches: Iterable[pa.RecordBatch], task: int) -> list[WrittenFile]:
    """Write one task's rows; return the files (none for no rows)."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return []
    batch = pa.Table.from_batches(collected)
    target = plan.target
    if plan.mode != CHANGES:
        if plan.mode == APPEND:
            check_appends(batch, plan.table)
        rows = conform(batch, target)
        check_not_null(rows, target, plan.what)
        if target.keys:
            newest_per_key(rows.select(list(target.keys)), None, plan.what, plan.scope, plan.duplicate_hint)
        return write_table(rows, target, plan.location, task=task)
    changes = to_changes(batch, target, plan.sequence_column, plan.change_column)
    check_not_null(changes.rows, target, plan.what, changes.deletes)
    if plan.fold is not None:
        folded = fold_write(changes.rows, changes.deletes, target.keys, plan.fold, plan.what, plan.scope)
        ops = pa.array(np.where(folded.deletes, layout.DELETE, layout.UPSERT).astype(object), pa.string())
        return write_table(folded.rows, target, plan.location, ops=ops, task=task)
    keep = newest_per_key(
        changes.rows.select(list(target.keys)), changes.sequence, plan.what, plan.scope, plan.duplicate_hint
    )
    rows, ops, sequence = changes.rows, changes.ops, changes.sequence
    if len(keep) < rows.num_rows:
        index = pa.array(keep)
        rows, ops = rows.take(index), ops.take(index)
        sequence = sequence.take(index) if sequence is not None else None
    if sequence is None:
        return write_table(rows, target, plan.location, ops=ops, task=task)
    return write_table(
        rows.append_column(SEQUENCE_SIDECAR, sequence),
        target,
        plan.location,
        ops=ops,
        task=task,
        sidecar=SEQUENCE_SIDECAR,
    )


def _node_folder(path: str) -> str:
    """A file's folder without its kind of change: the files that may share keys share it."""
    folder = path.rsplit("/", 1)[0]
    return "/".join(s for s in folder.split("/") if not s.startswith(f"{layout.OP_COLUMN}="))


def resolve_across_files(plan: WritePlan, files: list[WrittenFile]) -> list[WrittenFile]:
    """Make every key appear once in the write: read the keys where two tasks' files meet, keep the
    newest change of a key (with a sequence column) or raise. Rewritten files replace the originals."""
    keys = list(plan.target.keys)
    if not keys:
        return files
    groups: dict[str, list[WrittenFile]] = {}
    for f in files:
        groups.setdefault(_node_folder(f.path), []).append(f)
    result = [f for group in groups.values() if len(group) == 1 for f in group]
    for group in (g for g in groups.values() if len(g) > 1):
        result.extend(_resolve_group(plan, keys, group))
    return result


def may_share_keys(group: list[WrittenFile]) -> bool:
    """Whether two files of ``group`` may hold one key: their key hashes meet (or a file has none)."""
    if any(f.key_hashes is None for f in group):
        return True
    hashes = np.concatenate([np.frombuffer(f.key_hashes, dtype=np.uint64) for f in group])  # type: ignore[arg-type]
    return len(np.unique(hashes)) < len(hashes)


def _resolve_group(plan: WritePlan, keys: list[str], group: list[WrittenFile]) -> list[WrittenFile]:
    if not may_share_keys(group):
        return group
    if plan.fold is not None:
        return _fold_group(plan, keys, group)
    tables = [read_written(f.path, keys) for f in group]
    key_rows = pa.concat_tables(tables)
    check_null_keys(key_rows, plan.what)
    sequence = None
    if plan.sequence_column is not None:
        sequence = pa.concat_arrays(
            [read_written(sidecar_path(f.path), None).column(0).combine_chunks() for f in group]
        )
    keep = newest_per_key(key_rows, sequence, plan.what, plan.scope, plan.duplicate_hint)
    if len(keep) == key_rows.num_rows:
        return group
    kept = np.zeros(key_rows.num_rows, dtype=bool)
    kept[keep] = True
    result, start = [], 0
    for f, table in zip(group, tables, strict=True):
        mask = kept[start : start + table.num_rows]
        start += table.num_rows
        result.extend([f] if mask.all() else _rewrite(f, mask))
    return result


def _fold_group(plan: WritePlan, keys: list[str], group: list[WrittenFile]) -> list[WrittenFile]:
    """Fold the changes of a key that several tasks wrote (tasks in order: Spark's partition order is
    the write's arrival order); each file keeps the folded changes whose last input row it held."""
    assert plan.fold is not None
    tables = [read_written(f.path, None) for f in group]
    rows = pa.concat_tables(tables, promote_options="permissive")
    deletes = np.concatenate(
        [np.full(t.num_rows, layout.parse_file_path(f.path)[1]) for f, t in zip(group, tables, strict=True)]
    )
    folded = fold_write(rows, deletes, keys, plan.fold, plan.what, plan.scope)
    if len(folded.owners) == rows.num_rows:
        return group
    file_of = np.repeat(np.arange(len(group)), [t.num_rows for t in tables])
    result = []
    for i, (f, table) in enumerate(zip(group, tables, strict=True)):
        mine = np.flatnonzero(file_of[folded.owners] == i)
        if len(mine) == table.num_rows and (folded.owners[mine] == np.flatnonzero(file_of == i)).all():
            if folded.rows.take(pa.array(mine)).cast(table.schema).equals(table):
                result.append(f)
                continue
        storage.delete_files([f.path])
        if len(mine):
            result.append(write_beside(f, folded.rows.take(pa.array(mine)).cast(table.schema)))
    return result


def read_written(path: str, columns: list[str] | None = None) -> pa.Table:
    """The rows of a file a write task wrote (not yet committed: read whole, no table schema)."""
    fs, inner = storage.filesystem(path)
    with fs.open_input_file(inner) as f:
        return pq.read_table(f, columns=columns)


def _rewrite(f: WrittenFile, mask: np.ndarray) -> list[WrittenFile]:
    """The file without the rows ``mask`` drops (a new file beside it; none if no row is left)."""
    rows = read_written(f.path, None).filter(pa.array(mask))
    storage.delete_files([f.path, sidecar_path(f.path)])
    if rows.num_rows == 0:
        return []
    return [write_beside(f, rows)]


def write_beside(f: WrittenFile, rows: pa.Table, mark: str = "r") -> WrittenFile:
    """``rows`` in a new file beside ``f``, its name marked with ``mark`` (``f`` is the caller's to
    delete: no commit referenced it)."""
    folder, name = f.path.rsplit("/", 1)
    path = f"{folder}/{name.replace('part-', f'part-{mark}', 1)}"
    fs, inner = storage.filesystem(path)
    with fs.open_output_stream(inner) as out:
        pq.write_table(
            rows,
            out,
            compression="snappy",
            store_schema=False,
            write_statistics=statistics_columns(rows.schema),
        )
    return WrittenFile(path, rows.num_rows)


def discard(files: Iterable[WrittenFile]) -> None:
    """Delete files no commit references (and their sequence sidecars)."""
    paths = []
    for f in files:
        paths.extend([f.path, sidecar_path(f.path)])
    storage.delete_files(paths)
