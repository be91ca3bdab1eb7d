"""DROP TABLE ... PURGE and the location checks of CREATE TABLE: a table's files, and nothing else.

A table's folder may hold files that are not the table's (CREATE TABLE ... LOCATION points where
the user says). Purging therefore deletes exactly the files the table's metadata names (data and
delete files of every manifest entry of every snapshot, manifests, manifest lists, statistics
files, metadata JSON files of the metadata log) and arctic-sql's own optimizing and maintenance
records, then the
folders left empty; it never deletes a folder with what is in it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import pyarrow.fs as pafs

from arctic_sql.table.files import storage
from arctic_sql.table.maintenance import ownership
from arctic_sql.table.records import hive_syncs, leases, maintenance_runs
from arctic_sql.table.records import optimizing_processes as state

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table import Table

    from arctic_sql.table.model.table import ArcticTable

T = TypeVar("T")


@dataclass
class TableFiles:
    """The files of some stores, by the order a purge deletes them in: what a file names goes
    before it (data files, then manifests, then manifest lists, then metadata JSON files), so that
    a purge cut short still has the files that name what is left, and a second run finds it."""

    data: set[str] = field(default_factory=set)  # data and delete files (and Spark's companions), statistics
    manifests: set[str] = field(default_factory=set)
    manifest_lists: set[str] = field(default_factory=set)
    metadata: dict[str, set[str]] = field(default_factory=dict)  # metadata JSON files by store location
    folders: set[str] = field(default_factory=set)  # where the stores live: removed when left empty
    # The stores' own storage settings: a purge deletes through them, never through whatever this
    # process last configured (another catalog opened in the same process may have changed that).
    config: storage.StorageConfig | None = None

    def add_store(self, store: Table) -> None:
        io = store.io
        self.config = storage.StorageConfig.of(io.properties)
        manifests = {}
        for snapshot in store.snapshots():
            self.manifest_lists.add(snapshot.manifest_list)
            for manifest in _or_nothing(snapshot.manifests, io):
                manifests[manifest.manifest_path] = manifest
        written: set[str] = set()
        for path, manifest in manifests.items():
            self.manifests.add(path)
            # Deleted entries too: a file an expired snapshot still had is the table's all the same.
            entries = _or_nothing(manifest.fetch_manifest_entry, io, discard_deleted=False)
            written.update(e.data_file.file_path for e in entries)
        self.data |= written | _spark_companions(written, store.location())
        metadata = store.metadata
        self.data.update(s.statistics_path for s in metadata.statistics)
        self.data.update(s.statistics_path for s in metadata.partition_statistics)
        own = self.metadata.setdefault(store.location(), set())
        own.add(store.metadata_location)
        own.update(entry.metadata_file for entry in metadata.metadata_log)
        self.folders.add(store.location().rstrip("/"))

    def add_files(self, paths: Iterable[str]) -> None:
        self.data.update(paths)

    def keep_owned(self, table_root: str, io: FileIO) -> None:
        """Leave out what is not the table's to delete: files outside its folders (a shallow
        clone's source's) and files a shallow clone of it still claims (maintenance/ownership.py).
        Call it once the base store is dropped: a clone made until then has written its claim."""
        for kind in (self.data, self.manifests, self.manifest_lists):
            owned = set(ownership.deletable_under(table_root, self.folders, io, kind))
            kind.intersection_update(owned)


def _or_nothing(read: Callable[..., list[T]], *args: object, **kwargs: object) -> list[T]:
    """``read(...)``, or nothing when the file it reads is gone: a purge cut short deletes a file
    only after everything it names."""
    try:
        return read(*args, **kwargs)
    except FileNotFoundError:
        return []


def _spark_companions(paths: set[str], store_location: str) -> set[str]:
    """What Spark's writer puts beside the files it writes: ``_SUCCESS`` in the folders of the write
    (below the store's folder) and, on a local file system (Hadoop's checksummed one), a
    ``.<name>.crc`` beside each file."""
    top = store_location.rstrip("/")
    local = isinstance(storage.filesystem(top)[0], pafs.LocalFileSystem)
    folders = set()
    found = set()
    for path in paths:
        folder, _, name = path.rpartition("/")
        if local:
            found.add(f"{folder}/.{name}.crc")
        while folder.startswith(top + "/") and folder not in folders:
            folders.add(folder)
            folder = folder.rpartition("/")[0]
    for folder in folders:
        found.add(f"{folder}/_SUCCESS")
        if local:
            found.add(f"{folder}/._SUCCESS.crc")
    return found


def files_of(stores: Iterable[Table]) -> TableFiles:
    files = TableFiles()
    for store in stores:
        files.add_store(store)
    return files


def files_of_table(table: ArcticTable) -> TableFiles:
    """The files of both stores of ``table``, its optimizing processes' and maintenance runs' records."""

    files = files_of([table.base] + ([table.change] if table.change is not None else []))
    folder = f"{state.table_root(table)}/optimizing"
    files.add_files(f"{folder}/{r.process_id}.json" for r in state.processes(table))
    files.folders.add(folder)
    files.add_files(maintenance_runs.record_paths(table))
    files.folders.add(maintenance_runs.folder(table))
    # Ended write leases (an object store keeps them, marked run out, until orphan removal); a live
    # one belongs to a writer still at work, whose commit the drop will refuse: it stays.
    files.add_files(leases.ended_paths(state.table_root(table)))
    files.folders.add(leases.folder(state.table_root(table)))
    # The Hive view's folders and records (its Hive table is dropped by the statement, which has
    # the metastore at hand): everything under hive/ is the view's.
    files.add_files(_all_files(hive_syncs.hive_root(table)))
    files.folders.add(hive_syncs.hive_root(table))
    return files


def _all_files(location: str) -> list[str]:
    """Every file under ``location``, hidden ones (Spark's ``.crc`` companions) too."""
    fs, path = storage.filesystem(location)
    head = storage.prefix(location, path)
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    return [head + i.path for i in infos if i.type == pafs.FileType.File]


def static_store(metadata_location: str) -> Table | None:
    """The store whose metadata file is ``metadata_location``, read without a catalog; None if gone."""
    from pyiceberg.table import StaticTable

    try:
        return StaticTable.from_metadata(metadata_location)
    except FileNotFoundError:
        return None


def root_of(store: Table) -> str | None:
    """The table folder of a store at ``{root}/base`` or ``{root}/change``; None for other layouts."""
    location = store.location().rstrip("/")
    for suffix in ("/base", "/change"):
        if location.endswith(suffix):
            return location[: -len(suffix)]
    return None


def delete_content(files: TableFiles) -> None:
    """Delete the data, delete, statistics, manifest and manifest list files, in that order (missing
    ones are fine: a purge may run twice)."""
    for paths in (files.data, files.manifests, files.manifest_lists):
        _delete_each(paths, files.config)


def delete_metadata(store: Table, files: TableFiles) -> None:
    """Delete the metadata JSON files of ``store``: those among ``files`` and those of its commits
    since (the purge's own journal)."""
    own = set(files.metadata.get(store.location(), ()))
    own.add(store.metadata_location)
    own.update(entry.metadata_file for entry in store.metadata.metadata_log)
    _delete_each(own, files.config)


def remove_folders(files: TableFiles, root: str | None) -> None:
    """Remove the stores' folders (and ``root``, the table's) where they are left empty."""
    for folder in sorted(files.folders):
        remove_empty_folders(folder)
    if root is not None:
        remove_empty_folders(root)


def _delete_each(paths: Iterable[str], config: storage.StorageConfig | None = None) -> None:
    storage.delete_files(sorted(paths), config)


def remove_empty_folders(location: str) -> None:
    """Remove ``location`` and the folders under it that hold no file, deepest first."""
    fs, path = storage.filesystem(location)
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    folders = [i.path for i in infos if i.type == pafs.FileType.Directory] + [path]
    for folder in sorted(folders, key=lambda p: p.count("/"), reverse=True):
        try:
            if isinstance(fs, pafs.LocalFileSystem):
                os.rmdir(folder)  # refuses a folder that is not empty, even one filled a moment ago
            elif not fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True)):
                fs.delete_dir(folder)
        except OSError:  # not empty, or already gone
            pass


def enclosing_table(location: str) -> str | None:
    """The folder of an Iceberg table (a store: it has ``metadata/*.metadata.json``) that holds
    ``location``, or None. A table put there would have its files taken for that table's orphans."""
    fs, path = storage.filesystem(location)
    folder = path.rstrip("/")
    while "/" in folder.strip("/"):
        folder = folder.rsplit("/", 1)[0] or "/"
        metadata = f"{folder.rstrip('/')}/metadata"
        if fs.get_file_info(metadata).type == pafs.FileType.Directory:
            infos = fs.get_file_info(pafs.FileSelector(metadata, allow_not_found=True))
            if any(i.path.endswith(".metadata.json") for i in infos):
                return storage.prefix(location, path) + folder
    return None


def is_empty(location: str) -> bool:
    """Whether ``location`` holds no file at any depth (a missing folder is empty)."""
    fs, path = storage.filesystem(location)
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    return not any(i.type == pafs.FileType.File for i in infos)
