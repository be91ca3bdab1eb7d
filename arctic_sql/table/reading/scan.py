"""Read planning: which base and change files make up a version of a table (pure metadata, no Spark)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from arctic_sql.errors import VersionNotFoundError
from arctic_sql.table.files import position_deletes
from arctic_sql.table.files.manifests import manifest_entries
from arctic_sql.table.format import versions
from arctic_sql.table.format.layout import Store, parse_file_path
from arctic_sql.table.format.partitioning import partition_path
from arctic_sql.table.format.tree import DataTreeNode
from arctic_sql.table.model.table import ArcticTable


@dataclass(frozen=True)
class FileEntry:
    """A live data file of one store, with what arctic-sql knows of it."""

    path: str
    store: str  # base | change
    node_id: int
    is_delete: bool
    sequence_number: int
    partition: str  # partition path, "" when unpartitioned
    record_count: int
    file_size: int
    data_file: DataFile = field(compare=False, repr=False)
    # The position-delete files that apply to this data file (base store, after a minor optimize).
    deletes: tuple[DataFile, ...] = field(default=(), compare=False, repr=False)

    @property
    def is_position_deletes(self) -> bool:
        return position_deletes.is_position_deletes(self.data_file)

    @property
    def deleted_rows(self) -> int:
        """Rows of this data file its delete files delete."""
        return sum(d.record_count for d in self.deletes)


ALWAYS_TRUE = AlwaysTrue()


@dataclass(frozen=True)
class ReadPlan:
    version: int  # 0 for a table with no data commit yet
    schema: Schema
    base_files: tuple[FileEntry, ...]
    change_files: tuple[FileEntry, ...]
    watermarks: dict[str, int]
    base_snapshot_id: int | None
    # The filters the files were pruned by; a reader may also skip row groups with them (never rows:
    # the query applies its own WHERE above the read).
    base_filter: BooleanExpression = ALWAYS_TRUE
    change_filter: BooleanExpression = ALWAYS_TRUE

    @property
    def change_rows(self) -> int:
        return sum(f.record_count for f in self.change_files)


def live_files(table: Table, snapshot: Snapshot | None, store: str, *, own: bool = False) -> list[FileEntry]:
    """The live data files of ``snapshot``, each with the position-delete files that apply to it;
    ``own``: only those in the manifests ``snapshot`` wrote (every file it added is in one)."""
    entries = live_entries(table, snapshot, store, own=own)
    deletes = [f for f in entries if f.is_position_deletes]
    if not deletes:
        return entries
    data = [f for f in entries if not f.is_position_deletes]
    applying = position_deletes.attach(
        [(f.path, f.partition, f.sequence_number) for f in data],
        [(f.data_file, f.partition, f.sequence_number) for f in deletes],
    )
    return [replace(f, deletes=applying[f.path]) if f.path in applying else f for f in data]


def live_entries(
    table: Table, snapshot: Snapshot | None, store: str, *, own: bool = False
) -> list[FileEntry]:
    """Every live file of ``snapshot``: data files and position-delete files alike (``own``: as for
    :func:`live_files`)."""
    if snapshot is None:
        return []
    spec, schema, io = table.spec(), table.schema(), table.io
    entries: list[FileEntry] = []
    for manifest in snapshot.manifests(io):
        if own and manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest_entries(io, manifest):
            data_file = entry.data_file
            node_id, is_delete = parse_file_path(data_file.file_path)
            entries.append(
                FileEntry(
                    path=data_file.file_path,
                    store=store,
                    node_id=node_id,
                    is_delete=is_delete,
                    sequence_number=entry.sequence_number or 0,
                    partition=partition_path(spec, schema, data_file.partition),
                    record_count=data_file.record_count,
                    file_size=data_file.file_size_in_bytes,
                    data_file=data_file,
                )
            )
    return entries


def latest_version(table: ArcticTable) -> int:
    commits = versions.data_commits(table.base, table.change)
    return commits[-1].version if commits else 0


def _prune(
    store: Table, snapshot: Snapshot | None, files: list[FileEntry], row_filter: BooleanExpression
) -> list[FileEntry]:
    """The files pyiceberg's partition and min/max evaluation says may hold rows matching the filter."""
    if snapshot is None or isinstance(row_filter, AlwaysTrue) or not files:
        return files
    keep = {
        task.file.file_path
        for task in store.scan(row_filter=row_filter, snapshot_id=snapshot.snapshot_id).plan_files()
    }
    return [f for f in files if f.path in keep]


def _on_key_paths(files: list[FileEntry], key_hashes: frozenset[int] | None) -> list[FileEntry]:
    """The files whose tree node lies on the path of one of the keys (hashes) looked up."""
    if key_hashes is None:
        return files
    kept = []
    for f in files:
        node = DataTreeNode.of_id(f.node_id)
        if any(h & node.mask == node.index for h in key_hashes):
            kept.append(f)
    return kept


def plan_read(
    table: ArcticTable,
    version: int | None = None,
    base_filter: BooleanExpression = ALWAYS_TRUE,
    change_filter: BooleanExpression = ALWAYS_TRUE,
    key_hashes: frozenset[int] | None = None,
) -> ReadPlan:
    """The files that hold ``version`` (default: the latest) and the watermarks that filter them.

    ``base_filter`` and ``change_filter`` prune files (see pruning.py); the change filter may only
    constrain primary-key columns. ``key_hashes`` (Spark xxhash64 of looked-up keys) keeps only the
    files of those keys' tree nodes.
    """
    commits = versions.data_commits(table.base, table.change)
    latest = commits[-1].version if commits else 0
    if version is None:
        version = latest
    elif version != latest and not any(c.version == version for c in commits):
        available = f"{commits[0].version} to {latest}" if commits else "none"
        raise VersionNotFoundError(
            f"Version {version} of {table.identifier} does not exist or has expired (available: {available})"
        )
    if table.change is None:
        snapshot = versions.snapshot_at(table.base, version)
        files = _prune(table.base, snapshot, live_files(table.base, snapshot, Store.BASE), base_filter)
        return ReadPlan(
            version,
            table.schema,
            tuple(files),
            (),
            {},
            snapshot.snapshot_id if snapshot else None,
            base_filter,
        )

    base_snapshot = versions.base_snapshot_for(table.base, version)
    marks = versions.watermarks_of(base_snapshot)
    base_files = _on_key_paths(
        _prune(table.base, base_snapshot, live_files(table.base, base_snapshot, Store.BASE), base_filter),
        key_hashes,
    )
    change_snapshot = versions.snapshot_at(table.change, version)
    change_files = [
        f
        for f in _on_key_paths(
            _prune(
                table.change,
                change_snapshot,
                live_files(table.change, change_snapshot, Store.CHANGE),
                change_filter,
            ),
            key_hashes,
        )
        if marks.get(f.partition, 0) < f.sequence_number <= version
    ]
    return ReadPlan(
        version,
        table.schema,
        tuple(base_files),
        tuple(change_files),
        marks,
        base_snapshot.snapshot_id if base_snapshot else None,
        base_filter,
        change_filter,
    )
