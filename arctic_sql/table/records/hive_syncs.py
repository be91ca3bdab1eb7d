"""The Hive view's bookkeeping: which folder each Hive partition points at, which folders a sync
replaced and since when, and the version the view shows (docs/design.md, "The Hive view").

Each sync writes its rows under one new folder ``{table}/hive/v{version}-{8 hex}/`` (a partitioned
table's partitions below it as ``col=value/...``) and then one whole record,
``{table}/hive/_syncs/{version:020d}-{ms:013d}.json``. The newest record is the state: orphan
removal keeps every folder it names (current, or replaced less than ``hive.retention`` ago) and PURGE
deletes the whole ``hive/`` folder. The newest is the last written (by ``synced_at_ms``): a sync may
bring the view back to an older version. Older records are trimmed to :data:`KEEP_RECORDS`.

>>> folder_name(12, "0123abcd")
'v12-0123abcd'
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from arctic_sql.table.files import storage
from arctic_sql.table.format import layout

if TYPE_CHECKING:
    from arctic_sql.table.model.table import ArcticTable

KEEP_RECORDS = 10
HIVE_FOLDER = "hive"
RECORDS = "_syncs"
_SYNC_FOLDER = re.compile(r"^v(\d+)-[0-9a-f]{8}$")
MINUTE_MS = 60_000


@dataclass(frozen=True)
class HivePartition:
    """One partition of the view: its arctic partition path ("" unpartitioned), the fingerprint of
    the files its rows came from, and the folder the metastore points at."""

    partition: str
    fingerprint: str
    folder: str


@dataclass(frozen=True)
class Replaced:
    folder: str
    since_ms: int  # when the metastore stopped pointing at it


@dataclass(frozen=True)
class HiveSync:
    version: int
    synced_at_ms: int
    hive_table: str
    partitions: tuple[HivePartition, ...] = ()
    replaced: tuple[Replaced, ...] = field(default=())

    def current(self) -> dict[str, HivePartition]:
        return {p.partition: p for p in self.partitions}

    def kept(self, now_ms: int, retention_minutes: int) -> set[str]:
        """The folders that must stay: current ones and those replaced within the retention."""
        recent = {r.folder for r in self.replaced if now_ms - r.since_ms < retention_minutes * MINUTE_MS}
        return {p.folder for p in self.partitions} | recent


def folder_name(version: int, token: str) -> str:
    return f"v{version}-{token}"


def is_sync_folder(name: str) -> bool:
    return bool(_SYNC_FOLDER.match(name))


def fingerprint(paths: list[str]) -> str:
    """What a partition's rows are made of: its live files. Any write or optimize of the partition
    changes it; a partition nothing touched keeps it, so its folder is not rewritten."""
    return hashlib.sha256("\n".join(sorted(paths)).encode()).hexdigest()[:16]


def changed_partitions(previous: HiveSync | None, fingerprints: dict[str, str]) -> tuple[set[str], set[str]]:
    """(partitions to write, partitions gone) between the last sync and the files now."""
    before = {} if previous is None else {p.partition: p.fingerprint for p in previous.partitions}
    write = {p for p, f in fingerprints.items() if before.get(p) != f}
    return write, set(before) - set(fingerprints)


def next_sync(
    previous: HiveSync | None,
    version: int,
    now_ms: int,
    hive_table: str,
    written: dict[str, HivePartition],
    gone: set[str],
    retention_minutes: int,
) -> HiveSync:
    """The state after a sync: written partitions take their new folders, gone ones leave; the
    folders they left join the replaced ones; replaced folders past the retention are forgotten
    (the sync deletes them)."""
    current = {} if previous is None else previous.current()
    replaced = [] if previous is None else list(previous.replaced)
    for partition in set(written) | gone:
        if partition in current:
            replaced.append(Replaced(current.pop(partition).folder, now_ms))
    current.update(written)
    keep_after = now_ms - retention_minutes * MINUTE_MS
    replaced = [r for r in replaced if r.since_ms > keep_after]
    return HiveSync(
        version,
        now_ms,
        hive_table,
        tuple(sorted(current.values(), key=lambda p: p.partition)),
        tuple(replaced),
    )


def expired_folders(previous: HiveSync | None, after: HiveSync) -> list[str]:
    """Folders the previous state still kept that the new one no longer names."""
    if previous is None:
        return []
    before = {p.folder for p in previous.partitions} | {r.folder for r in previous.replaced}
    now = {p.folder for p in after.partitions} | {r.folder for r in after.replaced}
    return sorted(before - now)


def _from_json(data: dict) -> HiveSync:
    return HiveSync(
        int(data["version"]),
        int(data["synced_at_ms"]),
        str(data["hive_table"]),
        tuple(HivePartition(**p) for p in data["partitions"]),
        tuple(Replaced(**r) for r in data["replaced"]),
    )


def hive_root(table: ArcticTable) -> str:
    return f"{layout.table_root(table.base.location())}/{HIVE_FOLDER}"


def latest(table: ArcticTable) -> HiveSync | None:
    records = storage.json_records(f"{hive_root(table)}/{RECORDS}")
    if not records:
        return None
    # The last written, not the highest version: a sync may bring the view back to an older version.
    return _from_json(max(records, key=lambda r: (r["synced_at_ms"], r["version"])))


def _written_order(path: str) -> tuple[int, int]:
    """A record's (ms, version) from its name ``{version:020d}-{ms:013d}.json``, as :func:`latest` orders."""
    version, ms = path.rsplit("/", 1)[-1].removesuffix(".json").split("-")
    return int(ms), int(version)


def save(table: ArcticTable, sync: HiveSync) -> None:
    folder = f"{hive_root(table)}/{RECORDS}"
    storage.replace_file(
        f"{folder}/{sync.version:020d}-{sync.synced_at_ms:013d}.json",
        json.dumps(asdict(sync), sort_keys=True).encode(),
    )
    fs, path = storage.filesystem(folder)
    names = sorted(
        (
            i.path
            for i in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
            if i.type == pafs.FileType.File and i.base_name.endswith(".json")
        ),
        key=_written_order,
    )
    for old in names[:-KEEP_RECORDS]:
        fs.delete_file(old)
