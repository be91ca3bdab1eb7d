"""Orphan removal: files the table's own writes made that nothing references, older than a safety
window and than every write in flight (DESIGN "Maintenance"; leases.py protects writes in progress).
"""

from __future__ import annotations

import re

import pyarrow.fs as pafs

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.format.layout import Store
from arctic_sql.table.maintenance.expiration import MINUTE_MS, delete_paths, files_of, now_ms, refresh_stores
from arctic_sql.table.maintenance.ownership import claimed
from arctic_sql.table.maintenance.ownership import normalized as _normalized
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.records import hive_syncs, leases
from arctic_sql.table.records.optimizing_processes import running_processes


def _referenced(table: ArcticTable) -> set[str]:
    """Every file any retained snapshot, the metadata log or a statistics file of either store needs."""
    refs: set[str] = set()
    for store_name, store in ((Store.BASE, table.base), (Store.CHANGE, table.change)):
        if store is None:
            continue
        files = files_of(store, store.snapshots(), store_name)
        refs |= files.data | files.manifests | files.manifest_lists
        refs.add(store.metadata_location)
        refs.update(e.metadata_file for e in store.metadata.metadata_log)
        refs.update(s.statistics_path for s in store.metadata.statistics)
        refs.update(s.statistics_path for s in store.metadata.partition_statistics)
    return {_normalized(p) for p in refs}


# What orphan removal may consider: the folders the table's own writes create under a store's
# data/ (a write id, or an optimizing process's output) and the file kinds pyiceberg writes under
# metadata/. Anything else in those folders was put there by someone else and is not the table's.
_WRITE_FOLDER = re.compile(r"^(?:[0-9a-f]{32}|optimize-[0-9]{13}-[0-9a-f]{8})$")
_METADATA_FILE = re.compile(r"\.(?:metadata\.json|avro|puffin|stats)$")
SAFETY_WINDOW_FLOOR_MS = 60 * MINUTE_MS


def orphan_min_age_ms(table: ArcticTable) -> int:
    return table.settings.clean_orphan_file_min_existing_time_minutes * MINUTE_MS


def safety_window_ms(table: ArcticTable) -> int:
    """Files younger than this are left alone unless forced: ``clean-orphan-file.min-existing-time-minutes``,
    never under an hour."""
    return max(orphan_min_age_ms(table), SAFETY_WINDOW_FLOOR_MS)


def _owned(relative: str) -> bool:
    """Whether a file at ``relative`` (to the store's folder) is of a kind the table writes itself."""
    parts = relative.split("/")
    if parts[0] == "data":  # data/<write folder>/[<column>=<value>/...]<file>: nothing else is the table's
        return len(parts) > 2 and bool(_WRITE_FOLDER.match(parts[1])) and all("=" in p for p in parts[2:-1])
    return parts[0] == "metadata" and len(parts) == 2 and bool(_METADATA_FILE.search(parts[1]))


def orphan_files(table: ArcticTable, older_than_ms: int) -> list[str]:
    """Files the table's writes created under the stores' ``data/`` and ``metadata/`` folders that
    nothing references, last modified before ``older_than_ms`` and before every write in flight.

    Three reads, in this order, so that no write can slip between them:

    1. the files are listed;
    2. the writes in flight (leases) and running optimizes are read;
    3. the metadata is read;
    4. the clones' claims are read (a clone made after step 3 pinned snapshots step 3 saw, or that
       an expiration removed since, which it does only after the clone's claim is written).

    A listed file was written before step 1, by a write that at step 2 was either still in flight
    (its lease keeps every file from its start on) or over: committed before step 3 (so the metadata
    references the file) or failed (a true orphan). Reading the metadata before listing, as this
    did until the chaos test caught it, let a write that began after the leases were read and
    committed before the listing lose its new files, the current metadata file among them, whenever
    ``older_than_ms`` lies ahead of the scan (a forced removal "up to now").
    """
    listed = []  # (location, normalized path, modified ms)
    for store in (table.base, table.change):
        if store is None:
            continue
        root = store.location().rstrip("/")
        fs, inner = storage.filesystem(root)
        scheme = storage.prefix(root, inner)
        for sub in ("data", "metadata"):
            selector = pafs.FileSelector(f"{inner}/{sub}", recursive=True, allow_not_found=True)
            for info in fs.get_file_info(selector):
                if info.type != pafs.FileType.File or info.mtime is None:
                    continue
                if not _owned(info.path[len(inner) + 1 :]):
                    continue
                location = scheme + info.path
                listed.append((location, _normalized(location), info.mtime.timestamp() * 1000))
    listed += _hive_files(table) + _record_temporaries(table)
    running = running_processes(table)
    writes = leases.live_leases(layout.table_root(table.base.location()))
    starts = [w.started_ms for w in writes] + [r.started_at_ms for r in running]
    cutoff = min([older_than_ms, *(start - leases.CLOCK_SKEW_MS for start in starts)])
    # A running optimize names the folder it writes to: kept whatever its files' times say.
    protected = tuple(_normalized(r.output_prefix).rstrip("/") + "/" for r in running)
    refresh_stores(table)
    referenced = _referenced(table) | claimed(table)
    protected += _hive_kept(table)
    return sorted(
        location
        for location, path, modified_ms in listed
        if path not in referenced and not path.startswith(protected) and modified_ms < cutoff
    )


def _record_temporaries(table: ArcticTable) -> list[tuple[str, str, float]]:
    """The temporary files of records (``storage.TEMPORARY``) that writers on a file system left when
    they died before renaming them: in the record folders beside the stores (leases, processes,
    consumers, runs, clones), never referenced by anything."""
    root = layout.table_root(table.base.location())
    fs, inner = storage.filesystem(root)
    scheme = storage.prefix(root, inner)
    stores = {
        table.base.location().rstrip("/"),
        *([table.change.location().rstrip("/")] if table.change else []),
    }
    found = []
    for folder in fs.get_file_info(pafs.FileSelector(inner, allow_not_found=True)):
        if (
            folder.type != pafs.FileType.Directory
            or scheme + folder.path in stores
            or folder.base_name == "hive"
        ):
            continue
        for info in fs.get_file_info(pafs.FileSelector(folder.path, allow_not_found=True)):
            if (
                info.type == pafs.FileType.File
                and info.mtime is not None
                and storage.TEMPORARY.search(info.base_name)
            ):
                location = scheme + info.path
                found.append((location, _normalized(location), info.mtime.timestamp() * 1000))
    return found


def _hive_files(table: ArcticTable) -> list[tuple[str, str, float]]:
    """The files of the Hive view's sync folders (``hive/v{version}-{id}/``; not its records)."""
    root = hive_syncs.hive_root(table)
    fs, inner = storage.filesystem(root)
    scheme = storage.prefix(root, inner)
    found = []
    for info in fs.get_file_info(pafs.FileSelector(inner, recursive=True, allow_not_found=True)):
        relative = info.path[len(inner) + 1 :]
        if info.type != pafs.FileType.File or info.mtime is None:
            continue
        if "/" in relative and hive_syncs.is_sync_folder(relative.split("/", 1)[0]):
            location = scheme + info.path
            found.append((location, _normalized(location), info.mtime.timestamp() * 1000))
    return found


def _hive_kept(table: ArcticTable) -> tuple[str, ...]:
    """The Hive view's folders in use: those the metastore points at and those replaced less than
    ``hive.retention`` ago (a Hive reader may still be listing them)."""
    synced = hive_syncs.latest(table)
    if synced is None:
        return ()
    kept = synced.kept(now_ms(), table.settings.hive_retention)
    return tuple(_normalized(folder).rstrip("/") + "/" for folder in kept)


def remove_orphan_files(
    table: ArcticTable, older_than_ms: int | None = None, dry_run: bool = False, force: bool = False
) -> list[str]:
    """Delete (or with ``dry_run`` only list) the orphan files older than ``older_than_ms`` (default:
    now minus the safety window); return their locations.

    An ``older_than_ms`` inside the safety window (:func:`safety_window_ms`) is refused unless
    ``force``, as Delta's VACUUM refuses a short retention; even forced, files of writes in flight
    stay (see :func:`orphan_files`).
    """
    window = safety_window_ms(table)
    if older_than_ms is None:
        older_than_ms = now_ms() - window
    elif older_than_ms > now_ms() - window and not (force or dry_run):
        raise InvalidArgumentError(
            f"older_than is inside the safety window of {window // MINUTE_MS} minutes "
            "(clean-orphan-file.min-existing-time-minutes, never under 60): files that new may belong to "
            "writes in progress; pass force => true to remove them anyway"
        )
    orphans = orphan_files(table, older_than_ms)
    if not dry_run:
        delete_paths(orphans)
        leases.expire(layout.table_root(table.base.location()))
    return orphans
