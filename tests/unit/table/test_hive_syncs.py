"""The Hive view's bookkeeping without Spark: folder names, which partitions a sync rewrites, and how
long replaced folders stay (arctic_sql/table/records/hive_syncs.py)."""

from __future__ import annotations

import pytest

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.files import storage
from arctic_sql.table.model import properties
from arctic_sql.table.records import hive_syncs
from arctic_sql.table.records.hive_syncs import MINUTE_MS, HivePartition, HiveSync, Replaced


def test_sync_folders_are_named_by_version_and_a_random_token():
    assert hive_syncs.folder_name(7, "0123abcd") == "v7-0123abcd"
    assert hive_syncs.is_sync_folder("v7-0123abcd")
    assert not hive_syncs.is_sync_folder("_syncs")
    assert not hive_syncs.is_sync_folder("v7-0123abc")  # not a token the sync makes


def test_only_partitions_whose_files_changed_are_rewritten():
    previous = HiveSync(3, 0, "db.t", (HivePartition("p=a", "f1", "/a1"), HivePartition("p=b", "f2", "/b1")))
    write, gone = hive_syncs.changed_partitions(previous, {"p=a": "f1", "p=b": "f9", "p=c": "f3"})
    assert (write, gone) == ({"p=b", "p=c"}, set())
    write, gone = hive_syncs.changed_partitions(previous, {"p=a": "f1"})
    assert (write, gone) == (set(), {"p=b"})
    assert hive_syncs.changed_partitions(None, {"": "f"}) == ({""}, set())
    assert (
        hive_syncs.fingerprint(["x", "y"])
        == hive_syncs.fingerprint(["y", "x"])
        != hive_syncs.fingerprint(["x"])
    )


def test_replaced_folders_stay_for_the_retention_then_expire():
    now = 1_000 * MINUTE_MS
    first = HiveSync(1, now, "db.t", (HivePartition("p=a", "f1", "/a1"), HivePartition("p=b", "f2", "/b1")))
    second = hive_syncs.next_sync(
        first, 2, now, "db.t", {"p=a": HivePartition("p=a", "f9", "/a2")}, {"p=b"}, 60
    )
    assert {p.folder for p in second.partitions} == {"/a2"}
    assert set(second.replaced) == {Replaced("/a1", now), Replaced("/b1", now)}
    assert second.kept(now + 59 * MINUTE_MS, 60) == {"/a2", "/a1", "/b1"}
    assert second.kept(now + 60 * MINUTE_MS, 60) == {"/a2"}
    assert hive_syncs.expired_folders(first, second) == []
    # The next sync, past the retention, forgets them: they are the folders it deletes.
    third = hive_syncs.next_sync(second, 3, now + 61 * MINUTE_MS, "db.t", {}, set(), 60)
    assert third.replaced == () and hive_syncs.expired_folders(second, third) == ["/a1", "/b1"]


def test_hive_properties_are_validated_and_bucketing_is_refused():
    assert properties.validate({"hive.compatible": "TRUE", "hive.table": "views.t"}, creating=True) == {
        "hive.compatible": "true",
        "hive.table": "views.t",
    }
    with pytest.raises(InvalidArgumentError, match="'hive.table': must be db.table"):
        properties.validate({"hive.table": "t"}, creating=True)
    with pytest.raises(
        InvalidArgumentError, match="'hive.bucket.num' is refused: the Hive view is not bucketed"
    ):
        properties.validate({"hive.bucket.num": "4"}, creating=True)
    with pytest.raises(InvalidArgumentError, match="'hive.sync.interval'.*-1 for off"):
        properties.validate({"hive.sync.interval": "0"}, creating=False)


def test_the_service_syncs_when_the_interval_passed_and_the_table_moved(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from iceberg_tables import catalog_at, create, write

    from arctic_sql.table.maintenance.hive_sync import due
    from arctic_sql.table.model.identifiers import TableIdentifier
    from arctic_sql.table.writing import commit

    catalog = catalog_at(tmp_path)
    create(catalog, "h", properties={"hive.compatible": "true"})
    table = catalog.load_table(TableIdentifier("db", "h"))
    assert due(table, 5, 0)  # never synced
    commit.commit_change(table, [write(table, [(1, None, "x")])], "insert")
    hive_syncs.save(table, HiveSync(1, 0, "db.h"))
    table = catalog.load_table(TableIdentifier("db", "h"))
    assert not due(table, 5, 10 * MINUTE_MS)  # the view shows the latest version
    commit.commit_change(table, [write(table, [(2, None, "y")])], "insert")
    table = catalog.load_table(TableIdentifier("db", "h"))
    assert not due(table, 5, 4 * MINUTE_MS) and due(table, 5, 5 * MINUTE_MS)


def test_the_newest_record_is_the_last_written_even_at_an_older_version(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from iceberg_tables import catalog_at, create

    from arctic_sql.table.model.identifiers import TableIdentifier

    catalog = catalog_at(tmp_path)
    create(catalog, "h", properties={"hive.compatible": "true"})
    table = catalog.load_table(TableIdentifier("db", "h"))
    hive_syncs.save(table, HiveSync(10, 1_000, "db.h", (HivePartition("", "f10", "/v10"),)))
    # A sync back to version 5 (CALL system.hive_sync(version => 5)): the metastore points at /v5.
    hive_syncs.save(table, HiveSync(5, 2_000, "db.h", (HivePartition("", "f5", "/v5"),)))
    assert hive_syncs.latest(table).partitions[0].folder == "/v5"
    for n in range(hive_syncs.KEEP_RECORDS + 2):  # trimming keeps the last written, whatever their versions
        hive_syncs.save(table, HiveSync(100 - n, 3_000 + n, "db.h"))
    newest = hive_syncs.latest(table)
    assert (newest.version, newest.synced_at_ms) == (
        100 - hive_syncs.KEEP_RECORDS - 1,
        3_000 + hive_syncs.KEEP_RECORDS + 1,
    )
    records = storage.json_records(f"{hive_syncs.hive_root(table)}/{hive_syncs.RECORDS}")
    assert len(records) == hive_syncs.KEEP_RECORDS and min(r["synced_at_ms"] for r in records) == 3_002
