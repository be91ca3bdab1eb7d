"""The input partitions of the arctic format's readers and what one Spark task does with them.

A partition is a list of node groups (``table.reader.node_groups``: a key's rows all lie in one
group) balanced by file size, so each task merges its groups one after the other in Arrow, as
merge-on-read does in SQL. Spark pickles the reader's ``read`` function *before* it asks the
reader for its partitions, so each partition carries everything a task needs: the files, the
stores' metadata (field ids, name mapping) and file IO, and the read's filters.

Two kinds:

- ``MergePartition``: the rows of one version (base merged with change data above the watermark).
- ``ChangePartition``: per key, the newest change among change files tagged with their versions
  (an incremental read: the change feed and the stream's micro-batches).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyspark.sql.datasource import InputPartition

from arctic_sql.errors import UnsupportedOperationError
from arctic_sql.table.model.merge_engine import MergeEngine
from arctic_sql.table.reading import node_merge

# The change types, also for stream_read and lookup_task, which read them here.
from arctic_sql.table.reading.changes import (  # noqa: F401
    DELETE,
    INSERT,
    UPSERT,
    conformed,
    net_changes,
    with_change_columns,
)
from arctic_sql.table.reading.full_changes import (
    FullGroup,
    FullPlan,
    group_of,
    read_group,
    read_latest_folded,
)
from arctic_sql.table.reading.merge_on_read import balance, node_groups

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyspark.sql.types import StructType

    from arctic_sql.table.model.table import ArcticTable
    from arctic_sql.table.reading.scan import FileEntry

ALWAYS_TRUE = AlwaysTrue()


@dataclass(frozen=True)
class Stores:
    """What reading the table's files needs, shared by a read's partitions."""

    schema: Schema
    keys: tuple[str, ...]
    base: node_merge.Store
    change: node_merge.Store | None
    engine: MergeEngine | None = None

    @classmethod
    def of(cls, table: ArcticTable) -> Stores:
        change = node_merge.Store.of(table.change) if table.change is not None else None
        engine = table.merge_engine if table.is_keyed else None
        return cls(table.schema, tuple(table.primary_key), node_merge.Store.of(table.base), change, engine)

    def store(self, name: str) -> node_merge.Store:
        return self.change if name == "change" and self.change is not None else self.base


@dataclass(frozen=True)
class ChangeColumns:
    """The change columns to add to merged rows (a stream's first batch: every row an upsert of
    ``version``), or None for a plain read."""

    change_type: str
    version: int
    committed_at_ms: int


class MergePartition(InputPartition):
    """Node groups of one version, each merged in memory."""

    def __init__(
        self,
        stores: Stores,
        groups: list[node_merge.NodeTask],
        base_filter: BooleanExpression,
        change_filter: BooleanExpression,
        tagged: ChangeColumns | None = None,
    ) -> None:
        super().__init__(len(groups))
        self.stores, self.groups, self.tagged = stores, groups, tagged
        self.base_filter, self.change_filter = base_filter, change_filter


@dataclass(frozen=True)
class ChangeGroup:
    """The change files of one node group: (store, file, tag) with ``node_merge.tag``'s tags."""

    files: tuple[tuple[str, DataFile, int], ...] = field(default=())


class ChangePartition(InputPartition):
    """Node groups of change files: per key, its newest change, with the change columns."""

    def __init__(self, stores: Stores, groups: list[ChangeGroup], committed_at_ms: dict[int, int]) -> None:
        super().__init__(len(groups))
        self.stores, self.groups, self.committed_at_ms = stores, groups, committed_at_ms


class FullChangePartition(InputPartition):
    """Node groups of a full change feed: every change per version, with pre-images
    (table/reading/full_changes.py)."""

    def __init__(
        self, stores: Stores, groups: list[FullGroup], committed_at_ms: dict[int, int], latest: bool = False
    ) -> None:
        super().__init__(len(groups))
        self.stores, self.groups, self.committed_at_ms = stores, groups, committed_at_ms
        self.latest = latest  # the latest-change feed of a folding table: per key its folded row


# planning ----------------------------------------------------------------------------------------
def slots() -> int:
    """How many partitions a read is balanced into: the planning machine's cores (a Python task
    costs about 0.1 s to start, so a partition per small node group would cost more than it merges)."""
    return max(1, os.cpu_count() or 1)


def _check_size(table: ArcticTable, sizes: list[int]) -> None:
    limit = table.settings.merge_on_read_in_memory_max_bytes
    if sizes and max(sizes) > limit:
        raise UnsupportedOperationError(
            f"A node group of {table.identifier} holds {max(sizes)} bytes of files, more than "
            f"merge-on-read.in-memory-max-bytes ({limit}) that the arctic format merges in one task: "
            "optimize the table, raise the property, or read it with SQL (which merges it as a Spark plan)"
        )


def _grouped(
    table: ArcticTable,
    files: Sequence[FileEntry],
    *,
    all_changes: bool = False,
    held: frozenset[str] | None = None,
) -> tuple[list[list[FileEntry]], list[list[int]]]:
    """Node groups and their balanced slots. Only a group with change data is merged in memory
    (``all_changes``: every file is one); any other group is read file by file, so its size does
    not matter: a table without a key, or the nodes of a keyed table that optimizing left clean.
    ``held``: the paths of the only files a task holds whole (a full change feed keeps just the
    touched keys' rows of the others while scanning), so only they count against the limit."""

    def needs_merge(group: list[FileEntry]) -> bool:
        return table.is_keyed and (all_changes or any(f.store == "change" for f in group))

    groups = node_groups(files) if table.is_keyed else [[f] for f in files]
    merged = [g for g in groups if needs_merge(g)]
    _check_size(table, [sum(f.file_size for f in g if held is None or f.path in held) for g in merged])
    groups = merged + [[f] for g in groups if not needs_merge(g) for f in g]
    return groups, balance([sum(f.file_size for f in g) for g in groups], slots()) if groups else []


def merge_partitions(
    table: ArcticTable,
    base_files: Sequence[FileEntry],
    change_files: Sequence[FileEntry],
    base_filter: BooleanExpression = ALWAYS_TRUE,
    change_filter: BooleanExpression = ALWAYS_TRUE,
    tagged: ChangeColumns | None = None,
) -> list[InputPartition]:
    groups, shares = _grouped(table, [*base_files, *change_files])
    stores = Stores.of(table)
    tasks = [node_merge.NodeTask.of(g) for g in groups]
    return [
        MergePartition(stores, [tasks[i] for i in share], base_filter, change_filter, tagged)
        for share in shares
    ]


def change_partitions(
    table: ArcticTable, files: Sequence[FileEntry], committed_at_ms: dict[int, int]
) -> list[InputPartition]:
    groups, shares = _grouped(table, files, all_changes=True)
    stores = Stores.of(table)
    tagged = [
        ChangeGroup(tuple((f.store, f.data_file, node_merge.tag(f.sequence_number, f.is_delete)) for f in g))
        for g in groups
    ]
    return [ChangePartition(stores, [tagged[i] for i in share], committed_at_ms) for share in shares]


def full_change_partitions(
    table: ArcticTable, plan: FullPlan, committed_at_ms: dict[int, int], *, latest: bool = False
) -> list[InputPartition]:
    """A full change feed's partitions: each node group holds the range's change files and the files
    of the state they start from, so a task finds its keys' pre-images beside their changes."""
    changed = frozenset(f.path for f in plan.changes)
    groups, shares = _grouped(table, [*plan.before, *plan.changes], all_changes=True, held=changed)
    stores = Stores.of(table)
    full = [group_of(g, changed) for g in groups]
    return [
        FullChangePartition(stores, [full[i] for i in share], committed_at_ms, latest) for share in shares
    ]


def file_count(planned: Sequence[InputPartition]) -> int:
    """How many files a read's partitions read (what pruning saves; the tests count it)."""
    count = 0
    for p in planned:
        if isinstance(p, MergePartition):
            count += sum(len(t.base_files) + len(t.change_files) for t in p.groups)
        elif isinstance(p, ChangePartition):
            count += sum(len(g.files) for g in p.groups)
        elif isinstance(p, FullChangePartition):
            count += sum(
                len(g.changes) + len(g.before.base_files) + len(g.before.change_files) for g in p.groups
            )
    return count


# reading -----------------------------------------------------------------------------------------
def read(partition: InputPartition, output: StructType) -> Iterator[pa.RecordBatch]:
    """The rows of one partition as Arrow batches of the read's Spark schema ``output``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_type = to_arrow_schema(output, timezone="UTC")
    if isinstance(partition, MergePartition):
        for task in partition.groups:
            yield from conformed(_merged(partition, task), arrow_type).to_batches()
    elif isinstance(partition, ChangePartition):
        for group in partition.groups:
            yield from conformed(_changes(partition, group), arrow_type).to_batches()
    elif isinstance(partition, FullChangePartition):
        stores = partition.stores
        for full in partition.groups:
            if partition.latest:
                assert stores.engine is not None
                rows, kinds, versions = read_latest_folded(
                    stores.store, full, stores.schema, stores.keys, stores.engine
                )
            else:
                rows, kinds, versions = read_group(
                    stores.store, full, stores.schema, stores.keys, stores.engine
                )
            changed = with_change_columns(rows, kinds, versions, partition.committed_at_ms)
            yield from conformed(changed, arrow_type).to_batches()


def _merged(partition: MergePartition, task: node_merge.NodeTask) -> pa.Table:
    stores = partition.stores
    if stores.change is None:
        rows = (
            stores.base.read(task.base_files, stores.schema, partition.base_filter, deletes=task.delete_map)
            if task.base_files
            else schema_to_pyarrow(stores.schema, include_field_ids=False).empty_table()
        )
    else:
        rows = node_merge.read_node(
            task,
            stores.schema,
            stores.keys,
            stores.base,
            stores.change,
            sort=False,
            base_filter=partition.base_filter,
            change_filter=partition.change_filter,
            engine=stores.engine,
        )
    tagged = partition.tagged
    if tagged is None:
        return rows
    n = rows.num_rows
    return (
        rows.append_column("_change_type", pa.array([tagged.change_type] * n, pa.string()))
        .append_column("_change_version", pa.array(np.full(n, tagged.version, np.int64)))
        .append_column("_commit_timestamp", _timestamps(np.full(n, tagged.committed_at_ms, np.int64)))
    )


def _timestamps(ms: np.ndarray) -> pa.Array:
    return pa.array(ms * 1000, pa.timestamp("us", tz="UTC"))


def _changes(partition: ChangePartition, group: ChangeGroup) -> pa.Table:
    """The newest change per key of one group (every row, as an insert, on a table without a key)."""
    stores = partition.stores
    rows, kinds, versions = net_changes(stores.store, group.files, stores.schema, stores.keys)
    return with_change_columns(rows, kinds, versions, partition.committed_at_ms)
