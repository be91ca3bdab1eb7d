"""Which versions a table still has, before and after expiration (pyiceberg on SQLite, no Spark).

Commits here carry no files: the versions, watermarks and snapshots are what is under test.
"""

from __future__ import annotations

import threading
import time

import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from arctic_sql.table.catalog import ArcticCatalog
from arctic_sql.table.format import versions
from arctic_sql.table.maintenance import expiration
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.reading.changes import Range, change_files, version_at
from arctic_sql.table.writing import commit


@pytest.fixture
def table(tmp_path):
    iceberg = load_catalog(
        "t", type="sql", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}"
    )
    catalog = ArcticCatalog(iceberg)
    catalog.create_database("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "v", StringType()),
        identifier_field_ids=[1],
    )
    return catalog.create_table(TableIdentifier("db", "t"), schema, UNPARTITIONED_PARTITION_SPEC, {})


def _optimize(table, watermark: int) -> None:
    commit.commit_base(
        table,
        lambda store: commit.BaseChange(
            watermarks={"": watermark}, summary={versions.OPERATION: versions.OPTIMIZE}
        ),
        [],
    )


def _history(table) -> versions.History:
    table.base.refresh()
    table.change.refresh()
    return versions.history(table.base, table.change)


def test_versions_are_data_commits_and_history_starts_complete(table):
    for _ in range(3):
        commit.commit_change(table, [], "insert")
    _optimize(table, 2)
    history = _history(table)
    assert [c.version for c in history.commits] == [1, 2, 3]
    assert history.complete and history.first_start == 0 and (history.oldest, history.latest) == (1, 3)
    assert versions.base_snapshot_for(table.base, 1) is None
    assert versions.merged_point(versions.base_snapshot_for(table.base, 3)) == 2
    times = [c.committed_at_ms for c in history.commits]
    assert version_at(history, times[1] * 1000) == 2
    assert version_at(history, times[0] * 1000 - 1) is None
    assert "oldest version 1" in history.describe() and "newest version 3" in history.describe()


def test_expiration_keeps_the_base_snapshot_the_oldest_kept_version_reads(table):
    for _ in range(2):
        commit.commit_change(table, [], "insert")
    _optimize(table, 2)  # base snapshot of versions 2 and later
    for _ in range(2):
        commit.commit_change(table, [], "insert")  # 3, 4
    result = expiration.expire_snapshots(table, older_than_ms=expiration.now_ms() + 1, retain_last=2)
    assert result.oldest_version == 3 and result.expired_snapshots == 2
    history = _history(table)
    assert [c.version for c in history.commits] == [3, 4]
    assert not history.complete and history.first_start == 3
    assert len(table.base.snapshots()) == 1  # the optimize is older than every kept commit, and kept
    assert change_files(table, Range(2, 4)) == ()  # commits without files: nothing to read, nothing refused


def test_oldest_kept_version_before_the_first_base_snapshot_keeps_all_of_it(table):
    commit.commit_change(table, [], "insert")  # 1
    commit.commit_change(table, [], "insert")  # 2
    _optimize(table, 1)
    _optimize(table, 2)
    expiration.expire_snapshots(table, older_than_ms=expiration.now_ms() + 1, retain_last=2)
    assert [c.version for c in _history(table).commits] == [1, 2]
    assert len(table.base.snapshots()) == 2


def test_a_store_expired_alone_hides_the_versions_it_can_no_longer_serve(table):
    """What a crash between expiring the change store and the base store leaves behind."""
    for _ in range(3):
        commit.commit_change(table, [], "insert")
    chain = versions.snapshots_in_order(table.change)
    table.change.maintenance.expire_snapshots().by_ids([chain[0].snapshot_id, chain[1].snapshot_id]).commit()
    history = _history(table)
    assert [c.version for c in history.commits] == [3]
    assert not history.complete


def test_the_change_data_ttl_drops_merged_files_whose_snapshots_expired_before_it(tmp_path):
    # snapshot.keep.duration (12 h) is shorter than the change-data TTL (7 days): a change file's
    # snapshot expires long before its TTL. The file then looked as young as the oldest snapshot
    # kept, so a stream's merged change files were never dropped (benchmarks/disk_bounded.py).
    from iceberg_tables import catalog_at, create, write

    from arctic_sql.table.format.layout import Store
    from arctic_sql.table.reading.scan import live_files

    table = create(catalog_at(tmp_path))
    first, second = write(table, [(1, None, "a")]), write(table, [(2, None, "b")])
    commit.commit_change(table, [first], "insert")
    commit.commit_change(table, [second], "insert")
    _optimize(table, 2)  # both merged into the base
    table.change.refresh()
    first_ms = versions.snapshots_in_order(table.change)[0].timestamp_ms
    expiration.expire_snapshots(table, older_than_ms=expiration.now_ms() + 1, retain_last=1, change_ttl=False)
    table.change.refresh()
    assert [s.sequence_number for s in table.change.snapshots()] == [2]  # the first file's snapshot is gone
    assert expiration.commit_times_of(table.change) == [(1, first_ms)]
    # The TTL reaches the first commit only: its file goes, the second's stays.
    assert expiration.expire_change_data(table, older_than_ms=first_ms + 1) == 1
    table.change.refresh()
    live = [
        f.data_file.file_path for f in live_files(table.change, table.change.current_snapshot(), Store.CHANGE)
    ]
    assert [p.removeprefix("file://") for p in live] == [second.removeprefix("file://")]


def test_an_append_waits_for_an_announced_maintenance_commit_and_a_stale_announcement_holds_nothing(
    tmp_path, monkeypatch
):
    # The change-data TTL's commit takes seconds; a stream appending every second won every race
    # against it, so it never landed. Appends now wait while it is announced on the change store.
    from iceberg_tables import catalog_at, create, write

    table = create(catalog_at(tmp_path))
    commit.announce_maintenance(table.change)
    waits = []
    # time.sleep is patched for the whole process: other tests' threads (heartbeats) keep sleeping.
    this_thread, real_sleep = threading.current_thread(), time.sleep

    def maintenance_lands(seconds: float) -> None:  # the first wait: the maintenance commit lands meanwhile
        if threading.current_thread() is not this_thread:
            return real_sleep(seconds)
        waits.append(seconds)
        other = load_catalog(
            "t", type="sql", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}"
        )
        commit.set_properties(
            other.load_table(table.change.name()), removals=[commit.MAINTENANCE_PENDING_KEY]
        )

    monkeypatch.setattr(commit.time, "sleep", maintenance_lands)
    commit.commit_change(table, [write(table, [(1, None, "a")])], "insert")
    assert len(waits) == 1 and commit.MAINTENANCE_PENDING_KEY not in table.change.properties
    # An announcement whose time has passed (its process died) is ignored.
    commit.set_properties(table.change, {commit.MAINTENANCE_PENDING_KEY: str(expiration.now_ms() - 1)})
    commit.commit_change(table, [write(table, [(2, None, "b")])], "insert")
    assert len(waits) == 1 and len(table.change.snapshots()) == 2


def test_the_change_data_ttl_withdraws_its_announcement_whatever_it_finds(tmp_path):
    from iceberg_tables import catalog_at, create, write

    table = create(catalog_at(tmp_path))
    commit.commit_change(table, [write(table, [(1, None, "a")])], "insert")
    idle = table.change.metadata_location
    assert expiration.expire_change_data(table, older_than_ms=expiration.now_ms() + 1) == 0  # nothing merged
    table.change.refresh()
    assert table.change.metadata_location == idle  # an idle run commits nothing, no announcement either
    _optimize(table, 1)
    assert expiration.expire_change_data(table, older_than_ms=expiration.now_ms() + 1) == 1
    table.change.refresh()
    assert commit.MAINTENANCE_PENDING_KEY not in table.change.properties
