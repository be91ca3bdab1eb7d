"""The Hive view (docs/design.md, "The Hive view"): a plain Spark with Hive support and no arctic-sql,
in another process, reads through a shared Hive metastore the rows arctic-sql reads at the synced
version; a sync rewrites only the partitions whose files changed; orphan removal keeps the folders the
view uses; PURGE takes the Hive table and its folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from arctic_sql.errors import CommitConflictError, InvalidArgumentError
from arctic_sql.optimizer.service import Service
from arctic_sql.table.maintenance import hive_sync, orphan_removal
from arctic_sql.table.maintenance.expiration import now_ms
from arctic_sql.table.maintenance.hive_metastore import URIS, Metastore
from arctic_sql.table.records import hive_syncs, leases

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hive_metastore_server import metastore_server  # noqa: E402

pytestmark = pytest.mark.spark

READER = Path(__file__).with_name("hive_reader_driver.py")


@pytest.fixture(scope="module")
def metastore_uris(tmp_path_factory):
    with metastore_server(tmp_path_factory.mktemp("hms")) as uris:
        yield uris


@pytest.fixture
def hive(arctic, metastore_uris):
    """The arctic session pointed at the shared metastore for this test only."""
    arctic.spark.conf.set(URIS, metastore_uris)
    yield arctic
    arctic.spark.conf.unset(URIS)


def _read_with_plain_spark(uris: str, *tables: str) -> dict[str, list[tuple]]:
    done = subprocess.run(
        [sys.executable, str(READER), uris, *tables],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONSAFEPATH": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            read = json.loads(line)
            order = [read["columns"].index(c) for c in sorted(read["columns"])]
            found[read["table"]] = sorted(tuple(str(row[i]) for i in order) for row in read["rows"])
    return found


def _rows(arctic, query: str) -> list[tuple]:
    frame = arctic.sql(query)
    names = sorted(frame.columns)
    return sorted(tuple(str(row[n]) for n in names) for row in frame.collect())


def _folders(arctic, name: str) -> dict[str, str]:
    return {p.partition: p.folder for p in hive_syncs.latest(arctic.context.table(name)).partitions}


def _local(location: str) -> str:
    return location.removeprefix("file://").removeprefix("file:")


def test_a_plain_hive_spark_reads_the_synced_rows_and_only_changed_partitions_move(hive, metastore_uris):
    hive.sql(
        "CREATE TABLE db.t (id BIGINT, p STRING, amount DOUBLE, day DATE, PRIMARY KEY (id, p)) "
        "PARTITIONED BY (p) TBLPROPERTIES ('hive.compatible' = 'true', 'hive.retention' = '0')"
    )
    hive.sql(
        "INSERT INTO db.t VALUES (1, 'a', 1.5, DATE'2024-01-01'), (2, 'b', 2.5, NULL), (3, 'c', 3.5, NULL), "
        "(4, 'a', 4.5, DATE'2024-01-04')"
    )
    hive.sql("UPDATE db.t SET amount = 10.0 WHERE id = 2")
    hive.sql("DELETE FROM db.t WHERE id = 4")
    # Full optimizing syncs the view itself.
    hive.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    synced = hive_syncs.latest(hive.context.table("db.t"))
    assert synced is not None and {p.partition for p in synced.partitions} == {"p=a", "p=b", "p=c"}
    before = _folders(hive, "db.t")

    hive.sql("INSERT INTO db.t VALUES (5, 'a', 5.5, NULL)")  # only partition a changes
    hive.sql("DELETE FROM db.t WHERE p = 'c'")  # partition c empties
    result = hive.sql("CALL system.hive_sync(table => 'db.t')").collect()[0]
    assert (result.written_partitions, result.dropped_partitions, result.unchanged_partitions) == (1, 1, 1)
    after = _folders(hive, "db.t")
    assert after["p=b"] == before["p=b"] and after["p=a"] != before["p=a"] and "p=c" not in after
    # hive.retention 0: the replaced folders are gone; the one kept is still there.
    assert not os.path.exists(_local(before["p=a"])) and not os.path.exists(_local(before["p=c"]))
    assert os.path.exists(_local(after["p=b"]))

    # Written node by node in pyarrow (Spark's Parquet writer would leave a _SUCCESS file).
    assert not any(Path(_local(f)).parent.joinpath("_SUCCESS").exists() for f in after.values())

    # An unpartitioned table: its view is one folder, the table's location. Merging in memory off,
    # its sync writes through Spark's merge-on-read plan and Parquet writer.
    hive.sql(
        "CREATE TABLE db.u (id INT, name STRING, PRIMARY KEY (id)) TBLPROPERTIES "
        "('hive.compatible' = 'true', 'hive.table' = 'views.u_hive', 'merge-on-read.in-memory-max-bytes' = '0')"
    )
    hive.sql("INSERT INTO db.u VALUES (1, 'x'), (2, 'y'), (3, 'z')")
    hive.sql("UPDATE db.u SET name = 'yy' WHERE id = 2")
    hive.sql("DELETE FROM db.u WHERE id = 3")
    u_synced = hive.sql("CALL system.hive_sync('db.u')").collect()[0].synced_version
    assert Path(_local(_folders(hive, "db.u")[""])).joinpath("_SUCCESS").exists()
    hive.sql("INSERT INTO db.u VALUES (4, 'not synced yet')")
    described = {r.col_name: (r.data_type, r.comment) for r in hive.sql("DESCRIBE EXTENDED db.u").collect()}
    assert described["Hive View"] == ("views.u_hive", f"version {u_synced}, 1 version(s) behind")

    read = _read_with_plain_spark(metastore_uris, "db.t", "views.u_hive")
    assert read["db.t"] == _rows(hive, "SELECT * FROM db.t")
    assert read["views.u_hive"] == _rows(hive, f"SELECT * FROM db.u VERSION AS OF {u_synced}")
    assert read["views.u_hive"] != _rows(hive, "SELECT * FROM db.u")


def test_orphan_removal_keeps_the_views_folders_and_purge_drops_the_view(hive, warehouse):
    hive.sql(
        "CREATE TABLE db.t2 (id BIGINT, p INT, PRIMARY KEY (id, p)) PARTITIONED BY (p) "
        "TBLPROPERTIES ('hive.compatible' = 'true', 'hive.retention' = '600', 'hive.sync.interval' = '5')"
    )
    hive.sql("INSERT INTO db.t2 VALUES (1, 1), (2, 2)")
    # The optimizer service syncs a view that is due (never synced, or hive.sync.interval ago and behind).
    Service(hive.spark, hive.catalog).run_once()
    assert hive_syncs.latest(hive.context.table("db.t2")).version == 1
    first = _folders(hive, "db.t2")
    hive.sql("INSERT INTO db.t2 VALUES (3, 1)")
    hive.sql("CALL system.hive_sync('db.t2')")
    current = _folders(hive, "db.t2")
    assert current["p=1"] != first["p=1"]
    # A sync that died before recording its folder left this behind.
    stray = Path(_local(current["p=1"])).parent.parent / "v99-deadbeef" / "p=1" / "part-0.parquet"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"left by a crashed sync")

    table = hive.context.table("db.t2")
    removed = {
        _local(p)
        for p in orphan_removal.remove_orphan_files(table, older_than_ms=now_ms() + 1000, force=True)
    }
    assert str(stray) in removed
    assert os.path.exists(_local(first["p=1"]))  # replaced 0 minutes ago, retention 600 minutes
    assert all(os.path.exists(_local(f)) for f in current.values())

    hive.sql("ALTER TABLE db.t2 SET TBLPROPERTIES ('hive.retention' = '0')")
    table = hive.context.table("db.t2")
    removed = {
        _local(p)
        for p in orphan_removal.remove_orphan_files(table, older_than_ms=now_ms() + 1000, force=True)
    }
    assert any(p.startswith(_local(first["p=1"])) for p in removed)
    assert not any(p.startswith(_local(f)) for p in removed for f in current.values())
    assert all(os.path.exists(_local(f)) for f in current.values())

    with Metastore.of(hive.spark) as hms:
        assert hms.table("db", "t2") is not None
    root = Path(_local(hive_syncs.hive_root(table)))
    hive.sql("DROP TABLE db.t2 PURGE")
    with Metastore.of(hive.spark) as hms:
        assert hms.table("db", "t2") is None
    assert not root.exists()


def test_bad_hive_settings_are_refused_in_one_line(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, ts TIMESTAMP, PRIMARY KEY (id, ts)) PARTITIONED BY (days(ts))")
    with pytest.raises(InvalidArgumentError, match=r"^Table db.t has no Hive view; set TBLPROPERTIES") as e:
        arctic.sql("CALL system.hive_sync('db.t')")
    assert "\n" not in str(e.value)
    arctic.sql("ALTER TABLE db.t SET TBLPROPERTIES ('hive.compatible' = 'true')")
    with pytest.raises(
        InvalidArgumentError, match="transform day, and Hive partitions only by column values$"
    ):
        arctic.sql("CALL system.hive_sync('db.t')")
    with pytest.raises(
        InvalidArgumentError, match="'hive.bucket.columns' is refused: the Hive view is not bucketed"
    ):
        arctic.sql("ALTER TABLE db.t SET TBLPROPERTIES ('hive.bucket.columns' = 'id')")
    with pytest.raises(InvalidArgumentError, match="'hive.table': must be db.table"):
        arctic.sql("ALTER TABLE db.t SET TBLPROPERTIES ('hive.table' = 'a.b.c')")
    assert "hive.bucket.columns" not in arctic.context.table("db.t").properties


def _view_rows(hive, db: str, name: str) -> list[tuple]:
    """The rows a Hive reader gets: every partition the metastore lists, read from its folder, which
    must exist."""
    with Metastore.of(hive.spark) as hms:
        locations = hms.partition_locations(db, name)
    assert locations
    rows = []
    for values, location in locations.items():
        assert os.path.isdir(_local(location)), (values, location)
        frame = hive.spark.read.option("basePath", location.rsplit("/", 1)[0]).parquet(location)
        rows += [tuple(str(row[c]) for c in sorted(frame.columns)) for row in frame.collect()]
    return sorted(rows)


def _racing_table(hive, name: str) -> None:
    hive.sql(
        f"CREATE TABLE db.{name} (id BIGINT, p STRING, v INT, PRIMARY KEY (id, p)) PARTITIONED BY (p) "
        "TBLPROPERTIES ('hive.compatible' = 'true', 'hive.retention' = '0')"
    )
    hive.sql(f"INSERT INTO db.{name} VALUES (1, 'a', 1), (2, 'b', 2)")
    hive.sql(f"CALL system.hive_sync('db.{name}')")
    hive.sql(f"INSERT INTO db.{name} VALUES (3, 'a', 3), (4, 'b', 4)")  # both partitions change


def _during_the_write(monkeypatch, then) -> None:
    """Run ``then()`` once, right after the first sync wrote its folder (before it records or switches)."""
    write = hive_sync._write_rows
    calls = []

    def write_then(*args, **kwargs):
        written = write(*args, **kwargs)
        if not calls:
            calls.append(1)
            then()
        return written

    monkeypatch.setattr(hive_sync, "_write_rows", write_then)


def test_a_second_sync_while_one_runs_gives_up_and_the_first_finishes(hive, monkeypatch):
    _racing_table(hive, "race1")
    refused = []

    def second_sync():
        with pytest.raises(CommitConflictError, match="another Hive sync of it is running") as e:
            hive_sync.sync(hive.spark, hive.context.table("db.race1"))
        refused.append(str(e.value))

    _during_the_write(monkeypatch, second_sync)
    result = hive_sync.sync(hive.spark, hive.context.table("db.race1"))
    assert refused and "\n" not in refused[0] and result.written_partitions == 2
    assert _view_rows(hive, "db", "race1") == _rows(hive, "SELECT * FROM db.race1")


def test_a_sync_whose_record_changed_under_it_never_switches(hive, monkeypatch, warehouse):
    """The first sync's lease ran out (a stalled process): a second sync runs whole while the first
    is writing. The first finds the record moved, publishes nothing, and deletes only its own folder."""
    _racing_table(hive, "race2")
    table = hive.context.table("db.race2")
    root = Path(_local(hive_syncs.hive_root(table)))

    def lease_lost_and_another_sync():
        for lease in leases.live_leases(str(root.parent)):
            leases.release(str(root.parent), lease.lease_id)
        hive_sync.sync(hive.spark, hive.context.table("db.race2"))

    _during_the_write(monkeypatch, lease_lost_and_another_sync)
    with pytest.raises(CommitConflictError, match="another Hive sync recorded the view while this one ran"):
        hive_sync.sync(hive.spark, table)
    synced = hive_syncs.latest(hive.context.table("db.race2"))
    holding_files = {
        f.name for f in root.iterdir() if hive_syncs.is_sync_folder(f.name) and any(f.rglob("*.parquet"))
    }
    # The first sync's folder is gone; the second's, which the metastore points at, stays.
    assert holding_files == {Path(_local(p.folder)).parent.name for p in synced.partitions}
    assert not any(f.name.startswith("v2-") and f.name not in holding_files for f in root.iterdir())
    assert _view_rows(hive, "db", "race2") == _rows(hive, "SELECT * FROM db.race2")


def test_two_syncs_racing_in_threads_leave_every_partition_readable(hive):
    _racing_table(hive, "race3")
    start = threading.Barrier(2)
    outcomes: list[object] = []

    def run():
        table = hive.context.table("db.race3")
        start.wait()
        try:
            outcomes.append(hive_sync.sync(hive.spark, table).synced_version)
        except CommitConflictError as e:
            outcomes.append(str(e))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 2
    version = hive_syncs.latest(hive.context.table("db.race3")).version
    assert _view_rows(hive, "db", "race3") == _rows(hive, f"SELECT * FROM db.race3 VERSION AS OF {version}")
    # And a sync after them brings the view to the latest.
    hive_sync.sync(hive.spark, hive.context.table("db.race3"))
    assert _view_rows(hive, "db", "race3") == _rows(hive, "SELECT * FROM db.race3")
