"""Data safety (issue 11): a landed commit keeps its files whatever happens after it is sent, a
statement never commits part of what it wrote, and orphan removal never takes the files of a write
in progress, even when forced."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
from host_load import scaled

import arctic_sql
from arctic_sql.errors import CommitStateUnknownError, ExecutionError
from arctic_sql.table.format import layout
from arctic_sql.table.maintenance import expiration, orphan_removal
from arctic_sql.table.records import leases
from arctic_sql.table.writing import arrow_commit, spark_files

pytestmark = pytest.mark.spark


def _rows(session, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in session.sql(sql).collect())


def _parquet(root: str) -> set[str]:
    return {os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".parquet")}


def _versions(session) -> list[int]:
    return [r[0] for r in session.sql("SELECT version FROM db.t.history ORDER BY version").collect()]


def _leases(session) -> list[leases.Lease]:
    return leases.leases(layout.table_root(session.table("db.t").base.location()))


@pytest.fixture
def table(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a')")
    return arctic


def _after_the_commit(monkeypatch, session, then) -> None:
    """Run ``then()`` once, right after the catalog has accepted the next commit and before the
    committer hears back: the moment a lost response, a Ctrl-C or a racing writer strikes."""
    catalog = session.catalog.iceberg
    commit_table = catalog.commit_table
    fired = []

    def committed_then(*args, **kwargs):
        response = commit_table(*args, **kwargs)
        if not fired:
            fired.append(True)
            then()
        return response

    monkeypatch.setattr(catalog, "commit_table", committed_then)


def test_a_landed_commit_keeps_its_files_when_a_purge_expires_it_at_once(table, warehouse, monkeypatch):
    # Writer A commits; before it hears back, writer B commits and a purge expires A's snapshot.
    # The committer used to reload the table, miss A's snapshot and delete A's files, which the
    # table still referenced: every later read failed.
    other = arctic_sql.connect(warehouse=warehouse, spark=table.spark)

    def race() -> None:
        other.sql("INSERT INTO db.t VALUES (3, 'c')")
        other.sql("CALL system.purge('db.t')")

    _after_the_commit(monkeypatch, table, race)
    table.sql("INSERT INTO db.t VALUES (2, 'b')")
    monkeypatch.undo()
    assert _rows(table, "SELECT * FROM db.t") == [(1, "a"), (2, "b"), (3, "c")]
    assert _rows(other, "SELECT * FROM db.t") == [(1, "a"), (2, "b"), (3, "c")]


def test_ctrl_c_once_the_commit_is_sent_keeps_the_files_and_says_the_outcome_is_unknown(table, monkeypatch):
    def interrupt() -> None:
        raise KeyboardInterrupt

    _after_the_commit(monkeypatch, table, interrupt)
    with pytest.raises(CommitStateUnknownError, match=r"may or may not have landed \(KeyboardInterrupt\)"):
        table.sql("INSERT INTO db.t VALUES (2, 'b')")
    monkeypatch.undo()
    # It did land: its files are there and read. The lease stays until it runs out, so orphan
    # removal cannot take the files while nobody knows whether they are referenced.
    assert _rows(table, "SELECT * FROM db.t") == [(1, "a"), (2, "b")]
    assert [lease.operation for lease in _leases(table)] == ["insert"]


def test_a_catalog_error_after_the_commit_landed_is_resolved_by_looking(table, monkeypatch):
    def lost_response() -> None:
        raise sqlite3.OperationalError("disk I/O error")

    _after_the_commit(monkeypatch, table, lost_response)
    table.sql("INSERT INTO db.t VALUES (2, 'b')")  # the commit is found in the table: success
    monkeypatch.undo()
    assert _rows(table, "SELECT * FROM db.t") == [(1, "a"), (2, "b")]
    assert _leases(table) == []


def test_a_file_that_vanishes_before_the_commit_fails_the_statement_and_commits_nothing(table, monkeypatch):
    # A file deleted between the write and the commit (by anyone) used to leave a statement that
    # succeeded with part of its rows. Every file the write's tasks report must be there to commit.
    resolve = arrow_commit.resolve_across_files

    def one_file_lost(plan, files):  # noqa: ANN001, ANN202
        os.remove(files[0].path.removeprefix("file://"))
        return resolve(plan, files)

    versions = _versions(table)
    monkeypatch.setattr(arrow_commit, "resolve_across_files", one_file_lost)
    with pytest.raises(
        ExecutionError, match=r"INSERT into db.t wrote 4 rows in \d+ file\(s\), but .* was gone"
    ):
        table.sql("INSERT INTO db.t VALUES (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')")
    monkeypatch.undo()
    assert _versions(table) == versions
    assert _rows(table, "SELECT * FROM db.t") == [(1, "a")]


def test_a_file_that_vanishes_after_spark_wrote_it_fails_an_append_and_commits_nothing(arctic, monkeypatch):
    # Spark's writer (appends, overwrites) lists what it wrote: the rows its tasks report must all be there.
    arctic.sql("CREATE TABLE db.log (id BIGINT, v STRING)")
    arctic.sql("INSERT INTO db.log VALUES (1, 'a')")
    list_files = spark_files.storage.list_files

    def one_file_lost(location: str, suffix: str = ".parquet") -> list[str]:
        found = list_files(location, suffix)
        os.remove(found[0].removeprefix("file://"))
        return list_files(location, suffix)

    monkeypatch.setattr(spark_files.storage, "list_files", one_file_lost)
    with pytest.raises(ExecutionError, match=r"produced 4 rows but \d file\(s\) holding [0-3] were found"):
        arctic.sql("INSERT INTO db.log VALUES (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')")
    monkeypatch.undo()
    assert _rows(arctic, "SELECT * FROM db.log") == [(1, "a")]


def test_a_live_lease_keeps_what_its_write_made_from_forced_orphan_removal(table, warehouse):
    t = table.table("db.t")
    stray = f"{t.base.location().removeprefix('file://')}/data/{'cd' * 16}/part-0.parquet"
    with leases.writing(t, "insert"):
        os.makedirs(os.path.dirname(stray))
        with open(stray, "wb") as f:
            f.write(b"PAR1")
        far_ahead = expiration.now_ms() + 3_600_000
        assert orphan_removal.remove_orphan_files(t, older_than_ms=far_ahead, force=True) == []
        assert os.path.exists(stray)
    assert _leases(table) == []  # released when the block ended
    removed = orphan_removal.remove_orphan_files(t, older_than_ms=expiration.now_ms() + 1000, force=True)
    assert {p.removeprefix("file://") for p in removed if p.endswith(".parquet")} == {stray}


def test_a_lease_that_ran_out_protects_nothing_and_is_cleared(table):
    t = table.table("db.t")
    root = layout.table_root(t.base.location())
    started = expiration.now_ms()
    dead = leases.Lease("0" * 32, "insert", started, started - 1, "elsewhere", 1)  # its writer died
    leases.save(root, dead)
    stray = f"{t.base.location().removeprefix('file://')}/data/{'ef' * 16}/part-0.parquet"
    os.makedirs(os.path.dirname(stray))
    with open(stray, "wb") as f:
        f.write(b"PAR1")
    removed = orphan_removal.remove_orphan_files(t, older_than_ms=expiration.now_ms() + 1000, force=True)
    assert {p.removeprefix("file://") for p in removed if p.endswith(".parquet")} == {stray}
    assert leases.leases(root) == []


@pytest.mark.parametrize(
    "moment", ["after the listing", "after the leases are read", "after the metadata is read"]
)
def test_a_write_that_commits_during_forced_orphan_removal_loses_nothing(table, monkeypatch, moment):
    # A write that begins and commits while a forced removal (older_than ahead of now) runs: its
    # files, the stores' new current metadata among them, must not be taken for orphans. The scan
    # used to read the metadata before listing; a commit in between lost its files (the chaos test
    # once found a change store whose current metadata file was gone).
    t = table.table("db.t")
    step = {
        "after the listing": (orphan_removal, "running_processes"),
        "after the leases are read": (orphan_removal, "refresh_stores"),
        "after the metadata is read": (orphan_removal, "_referenced"),
    }[moment]
    real = getattr(*step)
    fired = []

    def then_a_write(*args, **kwargs):
        if not fired:
            fired.append(True)
            if step[1] == "running_processes":
                table.sql("INSERT INTO db.t VALUES (2, 'b')")
                return real(*args, **kwargs)
            result = real(*args, **kwargs)
            table.sql("INSERT INTO db.t VALUES (2, 'b')")
            return result
        return real(*args, **kwargs)

    monkeypatch.setattr(*step, then_a_write)
    removed = orphan_removal.remove_orphan_files(t, older_than_ms=expiration.now_ms() + 60_000, force=True)
    monkeypatch.undo()
    assert fired and removed == []
    assert _rows(table, "SELECT * FROM db.t") == [(1, "a"), (2, "b")]
    assert _rows(table, "SELECT * FROM db.t VERSION AS OF 2") == [(1, "a"), (2, "b")]


WRITER = textwrap.dedent(
    """
    import sys
    import arctic_sql
    s = arctic_sql.connect(warehouse=sys.argv[1], spark_conf={"spark.master": "local[1]"})
    print("ready", flush=True)
    for i in range(100, 100 + int(sys.argv[2])):
        s.sql(f"INSERT INTO db.t VALUES ({i}, 'v{i}')")
        print("ack", i, flush=True)
    """
)


def test_forced_orphan_removal_racing_a_writer_process_loses_nothing(table, warehouse):
    # Before leases, a forced removal in this race deleted manifests and data files of commits in
    # flight: tables that no longer read, and INSERTs that returned success without a snapshot.
    statements = 12
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, warehouse, str(statements)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        passes, removed = 0, 0
        deadline = time.monotonic() + scaled(240)  # a bound: longer on a busy host
        while proc.poll() is None and time.monotonic() < deadline:
            t = table.table("db.t")
            removed += len(
                orphan_removal.remove_orphan_files(t, older_than_ms=expiration.now_ms() + 1000, force=True)
            )
            passes += 1
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    acknowledged = [int(line.split()[1]) for line in out.splitlines() if line.startswith("ack")]
    print(
        f"orphan race: {statements} statements acknowledged {len(acknowledged)}, {passes} forced removal "
        f"passes deleted {removed} files"
    )
    assert acknowledged == list(range(100, 100 + statements)) and passes > statements
    expected = [(1, "a")] + [(i, f"v{i}") for i in acknowledged]
    assert _rows(table, "SELECT * FROM db.t") == expected
    versions = _versions(table)  # every version reads, and holds the rows acknowledged up to it
    assert len(versions) == 1 + statements
    for n, version in enumerate(versions, start=1):
        assert _rows(table, f"SELECT * FROM db.t VERSION AS OF {version}") == expected[:n]
