"""The Hive view's sync: the merged rows of a version, written as plain Parquet into new folders for
the partitions whose files changed, then the metastore switched to them partition by partition, so a
Hive reader sees each partition whole, old or new (docs/design.md, "The Hive view").

>>> sync(spark, table)  # doctest: +SKIP
HiveSyncResult(hive_table='db.t', synced_version=7, written_partitions=1, ...)
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import unquote, unquote_plus

import pyarrow.fs as pafs

from arctic_sql.errors import CommitConflictError, InvalidArgumentError
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.maintenance import hive_files
from arctic_sql.table.maintenance.expiration import refresh_stores
from arctic_sql.table.maintenance.hive_metastore import Metastore
from arctic_sql.table.reading.merge_on_read import merged_dataframe
from arctic_sql.table.reading.scan import ReadPlan, latest_version, plan_read
from arctic_sql.table.records import hive_syncs, leases
from arctic_sql.table.records.hive_syncs import HivePartition, HiveSync, Replaced
from arctic_sql.table.records.optimizing_processes import now_ms

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arctic_sql.table.model.table import ArcticTable

# How Spark and Hive name the folder of a NULL partition value.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
SYNCING = "hive-sync"  # the operation of a sync's write lease, which the next sync looks for


@dataclass(frozen=True)
class HiveSyncResult:
    hive_table: str
    synced_version: int
    written_partitions: int
    dropped_partitions: int
    unchanged_partitions: int
    removed_folders: int


def hive_name(table: ArcticTable) -> tuple[str, str]:
    """The Hive view's database and table: ``hive.table``, else the table's own db.t."""
    named = table.settings.hive_table
    if named:
        db, name = named.lower().split(".")
        return db, name
    return table.identifier.database, table.identifier.name


def partition_columns(table: ArcticTable) -> list[str]:
    """The columns of the Hive partitions: the sources of the table's identity partition fields.
    A transform (bucket, days, truncate ...) has no Hive column to hold it: refused, in one line."""
    columns = []
    for spec_field in table.spec.fields:
        if str(spec_field.transform) != "identity":
            raise InvalidArgumentError(
                f"Table {table.identifier} cannot have a Hive view: partition field '{spec_field.name}' uses "
                f"the transform {spec_field.transform}, and Hive partitions only by column values"
            )
        columns.append(table.schema.find_field(spec_field.source_id).name)
    return columns


def check_compatible(table: ArcticTable) -> list[str]:
    if not table.settings.hive_compatible:
        raise InvalidArgumentError(
            f"Table {table.identifier} has no Hive view; set TBLPROPERTIES ('hive.compatible' = 'true') first"
        )
    return partition_columns(table)


def _fingerprints(plan: ReadPlan) -> dict[str, str]:
    paths: dict[str, list[str]] = {}
    for f in plan.base_files + plan.change_files:
        paths.setdefault(f.partition, []).extend([f.path, *(d.file_path for d in f.deletes)])
    return {p: hive_syncs.fingerprint(found) for p, found in paths.items()}


def _values(path: str, decode: str) -> tuple[str | None, ...]:
    """A partition path's values: pyiceberg's (``decode='plus'``, ``null``) or Spark's folders."""
    values: list[str | None] = []
    for part in path.split("/"):
        raw = part.split("=", 1)[1]
        value = unquote_plus(raw) if decode == "plus" else unquote(raw)
        values.append(None if value in ("null" if decode == "plus" else HIVE_NULL,) else value)
    return tuple(values)


def _written_folders(folder: str, depth: int) -> dict[tuple[str | None, ...], str]:
    """The partition folders Spark wrote under ``folder``: values -> folder."""
    fs, path = storage.filesystem(folder)
    head = storage.prefix(folder, path)
    found = {}
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True)):
        relative = info.path[len(path) + 1 :]
        if info.type == pafs.FileType.Directory and relative.count("/") == depth - 1:
            found[_values(relative, "spark")] = head + info.path
    return found


def _hive_value(value: str | None) -> str:
    return HIVE_NULL if value is None else value


def sync(spark: SparkSession, table: ArcticTable, *, version: int | None = None) -> HiveSyncResult:
    """Bring the Hive view to ``version`` (default: the latest) of ``table``.

    One sync of a table at a time: each takes a write lease (which also keeps orphan removal off the
    folders it is writing) and gives up, in one line, if another sync holds one. Before it records
    its folders and before it moves the metastore it checks that the view's record is still the one
    it started from; if not, it never publishes, deletes only its own new folder, and gives up."""
    keys = check_compatible(table)
    root = layout.table_root(table.base.location())
    with leases.writing(table, SYNCING) as lease:
        running = leases.others(root, SYNCING, lease.lease_id)
        if running:
            raise _conflict(
                table, f"another Hive sync of it is running (on {running[0].host}, pid {running[0].pid})"
            )
        return _sync(spark, table, keys, version)


def _sync(spark: SparkSession, table: ArcticTable, keys: list[str], version: int | None) -> HiveSyncResult:
    db, name = hive_name(table)
    refresh_stores(table)  # after an optimize the caller's stores may predate its commit
    plan = plan_read(table, version)
    loaded = previous = hive_syncs.latest(table)
    if previous is not None and previous.hive_table != f"{db}.{name}":
        previous = replace(previous, partitions=())  # renamed view: every partition is new there
    prints = _fingerprints(plan)
    write, gone = hive_syncs.changed_partitions(previous, prints)
    if not keys and not prints:
        write, gone = {""}, set()  # an empty unpartitioned table still gets its (empty) folder
    started = now_ms()
    folder = f"{hive_syncs.hive_root(table)}/{hive_syncs.folder_name(plan.version, uuid.uuid4().hex[:8])}"
    written = _write_rows(spark, table, plan, keys, folder, write, prints) if write else {}
    gone |= set(write) - set(written)  # every row of it deleted: the Hive partition goes
    gone &= set(() if previous is None else previous.current())
    if hive_syncs.latest(table) != loaded:
        # Another sync recorded the view since this one read it. This one's folder is named by no
        # record and no metastore partition (a fresh token, not yet switched): it deletes it.
        storage.delete_tree(folder)
        raise _conflict(table, "another Hive sync recorded the view while this one ran")
    # Before the metastore moves, a record naming the new folders (as replaced ones, kept for the
    # retention): a sync cut short between the two leaves nothing orphan removal could take while
    # a partition may point at it, and the next sync rewrites those partitions (fingerprints unchanged).
    if previous is not None and written:
        pending = replace(
            previous,
            synced_at_ms=started,
            replaced=previous.replaced + tuple(Replaced(p.folder, started) for p in written.values()),
        )
        hive_syncs.save(table, pending)
        previous = pending
        if hive_syncs.latest(table) != pending:  # recorded and not switched: the retention keeps it
            raise _conflict(table, "another Hive sync recorded the view while this one ran")
    _switch(spark, table, db, name, keys, written, gone, previous)
    after = hive_syncs.next_sync(
        previous, plan.version, now_ms(), f"{db}.{name}", written, gone, table.settings.hive_retention
    )
    current = {p.folder for p in after.partitions}  # the pending record's new folders are current now
    after = replace(after, replaced=tuple(r for r in after.replaced if r.folder not in current))
    hive_syncs.save(table, after)
    expired = hive_syncs.expired_folders(previous, after)
    for old in expired:
        storage.delete_tree(old)
    return HiveSyncResult(
        f"{db}.{name}", plan.version, len(written), len(gone), len(prints) - len(write), len(expired)
    )


def _conflict(table: ArcticTable, why: str) -> CommitConflictError:
    return CommitConflictError(
        f"Hive sync of {table.identifier} gave up: {why}; the view is unchanged, try again when it ends"
    )


def _write_rows(
    spark: SparkSession,
    table: ArcticTable,
    plan: ReadPlan,
    keys: list[str],
    folder: str,
    write: set[str],
    prints: dict[str, str],
) -> dict[str, HivePartition]:
    """Write the merged rows of the partitions in ``write`` under ``folder``: the partitions written
    (one left out had no rows left). Node by node in pyarrow (hive_files) when every node group fits
    in memory, else through Spark's merge-on-read plan and Parquet writer."""
    chosen = replace(
        plan,
        base_files=tuple(f for f in plan.base_files if f.partition in write),
        change_files=tuple(f for f in plan.change_files if f.partition in write),
    )
    if keys:
        names = hive_files.folder_names(spark, keys, {p: _values(p, "plus") for p in write})
        folders = {p: f"{folder}/{names[p]}" for p in write}
    else:
        folders = {"": folder}
    files = hive_files.write_by_node(spark, table, chosen, keys, folders)
    if files is not None and (keys or files):  # (an empty unpartitioned view still gets its folder)
        return {
            p: HivePartition(p, prints.get(p, hive_syncs.fingerprint([])), folders[p]) for p in sorted(files)
        }
    columns = [f"`{f.name}`" for f in table.schema.fields]
    rows = merged_dataframe(spark, table, chosen).select(*columns)  # no hidden columns
    writer = rows.write.mode("errorifexists")
    if not keys:
        writer.parquet(storage.spark_path(folder))
        return {"": HivePartition("", prints.get("", hive_syncs.fingerprint([])), folder)}
    writer.partitionBy(*keys).parquet(storage.spark_path(folder))
    by_values = _written_folders(folder, len(keys))
    written = {}
    for partition in write:
        at = by_values.get(_values(partition, "plus"))
        if at is not None:
            written[partition] = HivePartition(partition, prints[partition], at)
    return written


def _switch(
    spark: SparkSession,
    table: ArcticTable,
    db: str,
    name: str,
    keys: list[str],
    written: dict[str, HivePartition],
    gone: set[str],
    previous: HiveSync | None,
) -> None:
    """Register the view and point the written partitions at their folders: the moved ones in one
    metastore call, the new ones in another (each one transaction in the metastore)."""
    types = {f.name: f.dataType.simpleString() for f in table.spark_schema.fields}
    columns = [(c, t) for c, t in types.items() if c not in keys]
    root = hive_syncs.hive_root(table)
    database_location = f"{(spark.conf.get('spark.sql.warehouse.dir') or '').rstrip('/')}/{db}.db"
    first = written.get("") if not keys else None
    with Metastore.of(spark) as hms:
        location = first.folder if first is not None else root
        hms.ensure_table(db, name, columns, [(k, types[k]) for k in keys], location, database_location, root)
        if not keys:
            if first is not None and previous is not None:
                hms.set_table_location(db, name, first.folder)
            return
        hms.switch_partitions(
            db,
            name,
            keys,
            {tuple(_hive_value(v) for v in _values(p, "plus")): written[p].folder for p in sorted(written)},
        )
        for partition in sorted(gone):
            hms.drop_partition(db, name, [_hive_value(v) for v in _values(partition, "plus")])


def drop_view(spark: SparkSession, table: ArcticTable) -> bool:
    """Drop the view's Hive table (PURGE; its folders go with the table's files). False if the
    table never had a view."""
    synced = hive_syncs.latest(table)
    if synced is None:
        return False
    db, name = synced.hive_table.split(".")
    with Metastore.of(spark) as hms:
        return hms.drop_table(db, name, hive_syncs.hive_root(table))


def due(table: ArcticTable, interval_minutes: int, now: int) -> bool:
    """Whether the optimizer service syncs now: ``interval_minutes`` since the last sync, and the
    table has a version the view does not show."""
    synced = hive_syncs.latest(table)
    if synced is None:
        return True
    if now - synced.synced_at_ms < interval_minutes * hive_syncs.MINUTE_MS:
        return False
    return latest_version(table) > synced.version


def lag(table: ArcticTable, latest_version: int) -> tuple[int | None, int | None]:
    """(the view's version, how many versions it is behind) for DESCRIBE and the service."""
    synced = hive_syncs.latest(table)
    if synced is None:
        return None, None
    return synced.version, max(latest_version - synced.version, 0)
