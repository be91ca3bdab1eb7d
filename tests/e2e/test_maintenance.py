"""Maintenance: expiration, change-data TTL, orphan removal, rollback and purge never delete what a
retained version, a reader or a running optimize needs; a crash mid-expiration leaves a readable table."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arctic_sql.errors import InvalidArgumentError, NoSuchTableError, VersionNotFoundError
from arctic_sql.optimizer import committer, executor, planner, process
from arctic_sql.optimizer.inputs import Settings
from arctic_sql.table.maintenance import expiration, orphan_removal
from arctic_sql.table.reading.scan import live_files
from arctic_sql.table.records import optimizing_processes as state

pytestmark = pytest.mark.spark


def _rows(arctic, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def _local(path: str) -> str:
    return path.removeprefix("file://")


def _referenced(arctic, name: str = "db.t") -> set[str]:
    """Every data file, manifest and manifest list a snapshot of either store still references."""
    table = arctic.table(name)
    paths = set()
    for store, store_name in ((table.base, "base"), (table.change, "change")):
        if store is None:
            continue
        for snap in store.snapshots():
            paths.add(snap.manifest_list)
            paths.update(m.manifest_path for m in snap.manifests(store.io))
            paths.update(f.path for f in live_files(store, snap, store_name))
    return {_local(p) for p in paths}


def _parquet_files(root: str) -> set[str]:
    return {os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".parquet")}


def _age(root: str, seconds: int = 2 * 3600) -> None:
    """Make every file under ``root`` look ``seconds`` old, as files left by a crash a while ago are."""
    then = os.path.getmtime(root) - seconds
    for d, _, names in os.walk(root):
        for n in names:
            os.utime(os.path.join(d, n), (then, then))


def _versions(arctic, name: str = "db.t") -> list[int]:
    return [r[0] for r in arctic.sql(f"SELECT version FROM {name}.history ORDER BY version").collect()]


def _states(arctic, name: str = "db.t") -> dict[int, list[tuple]]:
    return {v: _rows(arctic, f"SELECT * FROM {name} VERSION AS OF {v}") for v in _versions(arctic, name)}


def _ms(arctic, version: int) -> int:
    return arctic.sql(
        f"SELECT unix_millis(committed_at) FROM db.t.history WHERE version = {version}"
    ).collect()[0][0]


@pytest.fixture
def table_with_history(arctic):
    """Five versions; a full optimize between 2 and 3 makes version 3's base snapshot older than it."""
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")  # 1
    arctic.sql("INSERT INTO db.t VALUES (2, 'B'), (3, 'c')")  # 2
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    arctic.sql("DELETE FROM db.t WHERE id = 1")  # 3
    arctic.sql("INSERT INTO db.t VALUES (4, 'd')")  # 4
    arctic.sql("UPDATE db.t SET v = 'x' WHERE id = 3")  # 5
    return arctic


def test_expiration_keeps_what_retained_versions_and_readers_need(table_with_history, warehouse):
    arctic = table_with_history
    states = _states(arctic)
    assert sorted(states) == [1, 2, 3, 4, 5]
    held = arctic.sql("SELECT * FROM db.t VERSION AS OF 3")  # a reader holding an old, retained version
    changes = _rows(arctic, "SELECT * FROM db.t VERSION BETWEEN 3 AND 5")
    # Optimizing again replaces the base files version 3 reads; only its older base snapshot has them.
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    # Keep the versions committed at or after version 3; its base snapshot (the optimize) is older.
    result = arctic.sql(
        f"CALL system.expire_snapshots(table => 'db.t', older_than => timestamp_millis("
        f"{_ms(arctic, 3)}), retain_last => 1)"
    ).collect()[0]
    assert result.oldest_version == 3 and result.expired_snapshots_count >= 2
    # Fast appends keep their parents' manifests, so only manifest lists and metadata files go here.
    assert result.deleted_metadata_files_count > 0 and result.deleted_manifest_files_count == 0
    assert _versions(arctic) == [3, 4, 5]
    assert sorted(tuple(r) for r in held.collect()) == states[3]
    for version in (3, 4, 5):
        assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {version}") == states[version]
    assert _rows(arctic, "SELECT * FROM db.t VERSION BETWEEN 3 AND 5") == changes
    assert all(os.path.exists(p) for p in _referenced(arctic))
    with pytest.raises(VersionNotFoundError, match=r"Version 2 of db.t has expired.*oldest version 3"):
        arctic.sql("SELECT * FROM db.t VERSION AS OF 2")
    with pytest.raises(
        VersionNotFoundError, match="changes after version 1 have expired; start at version 3"
    ):
        arctic.sql("SELECT * FROM db.t VERSION BETWEEN 1 AND 5")
    with pytest.raises(VersionNotFoundError, match="oldest version 3"):
        arctic.sql(f"SELECT * FROM db.t TIMESTAMP AS OF timestamp_millis({_ms(arctic, 3) - 1})")


def test_defaults_come_from_table_properties(table_with_history):
    arctic = table_with_history
    # Every commit is younger than the default snapshot.keep.duration (12 hours): nothing expires.
    assert arctic.sql("CALL system.expire_snapshots('db.t')").collect()[0].expired_snapshots_count == 0
    assert _versions(arctic) == [1, 2, 3, 4, 5]
    arctic.sql("ALTER TABLE db.t SET TBLPROPERTIES ('snapshot.keep.min-count' = '2')")
    arctic.sql("CALL system.expire_snapshots('db.t', current_timestamp())")
    assert _versions(arctic) == [4, 5]
    with pytest.raises(InvalidArgumentError, match="retain_last must be 1 or more"):
        arctic.sql("CALL system.expire_snapshots('db.t', retain_last => 0)")
    with pytest.raises(NoSuchTableError):
        arctic.sql("CALL system.expire_snapshots('db.nope')")


def _planned_optimize(arctic):
    """A real optimize of db.t planned and executed, not yet committed: a running process."""
    table = arctic.table("db.t")
    snap = process.gather(table)
    plan = planner.plan(process.decide(table, snap, "full", Settings.of(table)), Settings.of(table))
    record = state.new_record(table, "full", "test", snap.base_snapshot_id, snap.change_snapshot_id)
    state.save(table, record)
    tasks = [t for p in plan.partitions for t in p.tasks]
    execution = executor.run_tasks(arctic.spark, table, tasks, record.output_prefix, retries=0)
    from arctic_sql.table.writing.commit import data_files

    outputs = {"": data_files(table.base, execution.paths)}
    return table, plan, outputs, record


def test_expiration_and_orphan_removal_while_an_optimize_runs(table_with_history, warehouse):
    arctic = table_with_history
    table, plan, outputs, record = _planned_optimize(arctic)
    arctic.sql("INSERT INTO db.t VALUES (5, 'e')")  # 6, while the optimize runs
    expected = _rows(arctic, "SELECT * FROM db.t")
    state.heartbeat(table, record)
    expiration.expire_snapshots(arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1, retain_last=1)
    _age(warehouse)  # even old files of a running optimize stay
    orphans = orphan_removal.remove_orphan_files(
        arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1, force=True
    )
    written = {_local(f.file_path) for f in outputs[""]}
    assert written and all(os.path.exists(p) for p in written)
    assert not any(_local(p) in written for p in orphans)
    kept = {s.snapshot_id for s in arctic.table("db.t").base.snapshots()}
    assert record.base_snapshot_id in kept
    assert record.change_snapshot_id in {s.snapshot_id for s in arctic.table("db.t").change.snapshots()}
    # The optimize finishes and commits; nothing it read or wrote went missing.
    outcome = committer.commit_plan(arctic.table("db.t"), plan.partitions, outputs, record.process_id, "full")
    assert outcome.committed == [""]
    state.transition(table, record, state.EXECUTING)
    state.transition(table, record, state.COMMITTING)
    state.transition(table, record, state.SUCCESS)
    assert _rows(arctic, "SELECT * FROM db.t") == expected
    # Once it has finished, the next expiration may take its input snapshots.
    expiration.expire_snapshots(arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1, retain_last=1)
    assert record.base_snapshot_id not in {s.snapshot_id for s in arctic.table("db.t").base.snapshots()}
    assert _rows(arctic, "SELECT * FROM db.t") == expected
    assert all(os.path.exists(p) for p in _referenced(arctic))


def test_orphan_removal_deletes_only_old_unreferenced_files(table_with_history, warehouse):
    arctic = table_with_history
    table = arctic.table("db.t")
    states = _states(arctic)
    stray = f"{_local(table.base.location())}/data/{'ab' * 16}/part-0.parquet"  # a crashed writer's folder
    os.makedirs(os.path.dirname(stray))
    pq.write_table(pa.table({"id": [9], "v": ["lost"]}), stray)
    stray_metadata = f"{_local(table.change.location())}/metadata/00099-crashed.metadata.json"
    with open(stray_metadata, "w") as f:
        f.write("{}")
    record_file = f"{os.path.dirname(_local(table.base.location()))}/optimizing/notes.txt"
    os.makedirs(os.path.dirname(record_file), exist_ok=True)
    with open(record_file, "w") as f:
        f.write("{}")
    # Files the table's writes never make are not its own, however old: someone else's.
    # Nor are files below a write folder in a folder the writers never make (only column=value ones),
    # such as another table a client put there.
    foreign = [
        f"{_local(table.base.location())}/data/exports/report.parquet",
        f"{_local(table.base.location())}/data/{'cd' * 16}/nested/base/data/x=1/part-0.parquet",
        f"{_local(table.base.location())}/data/notes.txt",
        f"{_local(table.change.location())}/metadata/README.txt",
    ]
    for path in foreign:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("not the table's")
    # The default minimum age (clean-orphan-file.min-existing-time-minutes, 2 days) protects new files.
    assert arctic.sql("CALL system.remove_orphan_files('db.t')").collect() == []
    _age(warehouse)
    now = "timestamp_millis(unix_millis(current_timestamp()) + 1000)"
    # An older_than inside the safety window is refused unless forced, and nothing is deleted.
    with pytest.raises(InvalidArgumentError, match="safety window of 2880 minutes.*force => true"):
        arctic.sql(f"CALL system.remove_orphan_files(table => 'db.t', older_than => {now})")
    assert os.path.exists(stray)
    listed = [
        r[0] for r in arctic.sql(f"CALL system.remove_orphan_files('db.t', {now}, dry_run => true)").collect()
    ]
    assert {_local(p) for p in listed} >= {stray, stray_metadata}
    assert not {_local(p) for p in listed} & set(foreign)
    assert os.path.exists(stray)  # a dry run deletes nothing
    referenced = _referenced(arctic)
    assert not {_local(p) for p in listed} & referenced
    removed = [
        r[0]
        for r in arctic.sql(
            f"CALL system.remove_orphan_files(table => 'db.t', older_than => {now}, force => true)"
        ).collect()
    ]
    assert sorted(removed) == sorted(listed)
    assert not os.path.exists(stray) and not os.path.exists(stray_metadata) and os.path.exists(record_file)
    assert all(os.path.exists(p) for p in foreign)
    assert all(os.path.exists(p) for p in referenced)
    assert _states(arctic) == states


def test_change_data_ttl_drops_merged_change_files_only(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")  # 1
    arctic.sql("INSERT INTO db.t VALUES (2, 'B')")  # 2
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")  # merges 1 and 2
    arctic.sql("DELETE FROM db.t WHERE id = 1")  # 3, not merged
    states = _states(arctic)
    changes = _rows(arctic, "SELECT * FROM db.t VERSION BETWEEN 0 AND 3")
    merged = arctic.sql("SELECT count(*) FROM db.t.files WHERE store = 'change' AND merged").collect()[0][0]
    assert merged > 0
    # The default TTL (change.data.ttl.minutes, 7 days) keeps young files.
    assert arctic.sql("CALL system.expire_change_data('db.t')").collect()[0][0] == 0
    dropped = arctic.sql(
        "CALL system.expire_change_data('db.t', timestamp_millis(unix_millis(current_timestamp()) + 1000))"
    ).collect()[0][0]
    assert dropped == merged
    files = arctic.sql("SELECT sequence_number, merged FROM db.t.files WHERE store = 'change'").collect()
    assert files and all(r.sequence_number == 3 and not r.merged for r in files)
    assert _states(arctic) == states
    assert _rows(arctic, "SELECT * FROM db.t VERSION BETWEEN 0 AND 3") == changes
    assert _versions(arctic) == [1, 2, 3]  # the TTL commit is not a version


def test_rollback_is_a_new_commit_and_keeps_history(table_with_history):
    arctic = table_with_history
    states = _states(arctic)
    # Version 2 is the optimized base alone: its files are committed again as they are.
    row = arctic.sql("CALL system.rollback_to_version('db.t', 2)").collect()[0]
    assert (row.previous_version, row.restored_version) == (5, 2) and row.current_version > 5
    assert _rows(arctic, "SELECT * FROM db.t") == states[2]
    assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {row.current_version}") == states[2]
    assert _states(arctic) == {**states, row.current_version: states[2]}
    assert (
        arctic.sql("SELECT operation FROM db.t.history ORDER BY version DESC LIMIT 1").collect()[0][0]
        == "rollback"
    )
    with pytest.raises(VersionNotFoundError, match="crosses the ROLLBACK"):
        arctic.sql(f"SELECT * FROM db.t VERSION BETWEEN 4 AND {row.current_version}")
    arctic.sql("INSERT INTO db.t VALUES (7, 'g')")
    assert (7, "g") in _rows(arctic, "SELECT * FROM db.t")
    # By timestamp, with an expression argument: version 4 is change data over that base, written again.
    at = arctic.sql(
        f"CALL system.rollback_to_timestamp(table => 'db.t', timestamp => timestamp_millis({_ms(arctic, 4)}))"
    ).collect()[0]
    assert at.restored_version == 4 and _rows(arctic, "SELECT * FROM db.t") == states[4]
    last = arctic.sql("CALL system.rollback_to_version('db.t', get_latest_version('db.t', 2))").collect()[0]
    assert (7, "g") in _rows(arctic, "SELECT * FROM db.t") and last.restored_version == at.previous_version
    before = _rows(arctic, "SELECT * FROM db.t")
    with pytest.raises(VersionNotFoundError, match="Cannot roll db.t back to version 99"):
        arctic.sql("CALL system.rollback_to_version('db.t', 99)")
    assert _rows(arctic, "SELECT * FROM db.t") == before


def test_rollback_and_purge_of_an_append_only_table(arctic):
    arctic.sql("CREATE TABLE db.log (id BIGINT, v STRING)")
    arctic.sql("INSERT INTO db.log VALUES (1, 'a')")
    arctic.sql("INSERT INTO db.log VALUES (2, 'b')")
    arctic.sql("DELETE FROM db.log WHERE id = 1")
    first = _versions(arctic, "db.log")[0]
    row = arctic.sql(f"CALL system.rollback_to_version('db.log', {first})").collect()[0]
    assert _rows(arctic, "SELECT * FROM db.log") == [(1, "a")]
    assert row.current_version == _versions(arctic, "db.log")[-1]
    result = arctic.sql("CALL system.purge('db.log')").collect()[0]
    assert result.expired_snapshots_count == 3 and result.deleted_data_files_count >= 1
    assert _versions(arctic, "db.log") == [row.current_version]
    assert _rows(arctic, "SELECT * FROM db.log") == [(1, "a")]


def test_purge_keeps_only_the_current_version(table_with_history):
    arctic = table_with_history
    current = _rows(arctic, "SELECT * FROM db.t")
    result = arctic.sql("CALL system.purge(table => 'db.t')").collect()[0]
    assert result.oldest_version == 5 and result.expired_snapshots_count > 0
    assert _versions(arctic) == [5]
    assert _rows(arctic, "SELECT * FROM db.t") == current
    assert all(os.path.exists(p) for p in _referenced(arctic))
    with pytest.raises(VersionNotFoundError, match="oldest version 5"):
        arctic.sql("SELECT * FROM db.t VERSION AS OF 4")


CRASHING_EXPIRY = textwrap.dedent(
    """
    import sys
    from arctic_sql.options import load_catalog
    from arctic_sql.table.maintenance import expiration, orphan_removal
    from arctic_sql.table.catalog import ArcticCatalog
    from arctic_sql.table.model.identifiers import TableIdentifier
    catalog = ArcticCatalog(load_catalog(sys.argv[1], "arctic", None, None))
    table = catalog.load_table(TableIdentifier("db", "t"))
    expiration.expire_snapshots(table, older_than_ms=expiration.now_ms() + 1, retain_last=1)
    """
)


@pytest.mark.parametrize("fault", ["expire-between-stores", "expire-before-delete", "expire-mid-delete"])
def test_crash_during_expiration_leaves_a_readable_table(table_with_history, warehouse, fault):
    arctic = table_with_history
    states = _states(arctic)
    env = {**os.environ, "ARCTIC_FAULT": fault}
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_EXPIRY, warehouse],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 86, done.stderr[-2000:]
    left = _versions(arctic)
    assert left and left[-1] == 5
    for version in left:
        assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {version}") == states[version]
    assert all(os.path.exists(p) for p in _referenced(arctic))
    # Finishing the job afterwards: expiration again, then the orphans the crash left.
    expiration.expire_snapshots(arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1, retain_last=1)
    _age(warehouse)
    orphan_removal.remove_orphan_files(
        arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1000, force=True
    )
    assert _versions(arctic) == [5]
    assert _rows(arctic, "SELECT * FROM db.t") == states[5]
    assert _parquet_files(warehouse) == {p for p in _referenced(arctic) if p.endswith(".parquet")}
