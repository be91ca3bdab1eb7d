"""Invariants 1 and 4: two processes commit to one table at once; readers see whole commits, and
nothing is lost.

Each writer is a separate Python process with its own Spark driver, sharing only the warehouse and
its SQLite catalog, like two jobs on one lake. Writer A upserts its keys; writer B upserts its own
keys and, in between, runs UPDATEs over them, which must re-read and re-run whenever A's commits
land underneath them rather than commit a stale result.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.spark

WRITER = textwrap.dedent(
    """
    import sys, arctic_sql
    warehouse, first, commits, update = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    s = arctic_sql.connect(warehouse=warehouse, spark_conf={"spark.master": "local[1]",
                                                          "spark.sql.shuffle.partitions": "2"})
    for c in range(commits):
        rows = ", ".join(f"({first + c * 5 + i}, 0)" for i in range(5))
        s.sql(f"INSERT INTO db.t VALUES {rows}")
        if update:
            s.sql(f"UPDATE db.t SET v = v + 1 WHERE id >= {first}")
    print("done", flush=True)
    """
)


def test_two_writer_processes_lose_nothing(arctic, warehouse):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v BIGINT, PRIMARY KEY (id))")
    commits = 4
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, warehouse, str(first), str(commits), update],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for first, update in ((0, "0"), (1000, "1"))
    ]
    # Invariant 1 while they write: every read sees whole commits. Each commit of a writer adds five
    # keys, and each UPDATE of writer B moves all its keys at once, so in any consistent read a
    # writer's key count is a multiple of five and B's keys from one commit share one value.
    reads = 0
    while any(w.poll() is None for w in writers) and reads < 200:
        rows = dict(tuple(r) for r in arctic.sql("SELECT id, v FROM db.t").collect())
        a_keys = [k for k in rows if k < 1000]
        b_keys = [k for k in rows if k >= 1000]
        assert len(a_keys) % 5 == 0 and len(b_keys) % 5 == 0, rows
        for c in range(commits):
            values = {rows[k] for k in b_keys if (k - 1000) // 5 == c}
            assert len(values) <= 1, rows
            if values and c + 1 < commits and any((k - 1000) // 5 == c + 1 for k in b_keys):
                assert values == {rows[1000 + (c + 1) * 5] + 1}, rows
        reads += 1
    for writer in writers:
        out, err = writer.communicate(timeout=900)
        assert writer.returncode == 0, err[-2000:]
        assert out.strip().endswith("done")

    rows = dict(tuple(r) for r in arctic.sql("SELECT id, v FROM db.t").collect())
    expected = {i: 0 for i in range(commits * 5)}
    # Writer B's keys inserted by commit c were then updated by UPDATEs c..commits-1.
    expected |= {1000 + c * 5 + i: commits - c for c in range(commits) for i in range(5)}
    assert rows == expected
    operations = [r[0] for r in arctic.sql("SELECT operation FROM db.t.history").collect()]
    assert operations.count("insert") == 2 * commits and operations.count("update") == commits


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("INSERT OVERWRITE db.race VALUES (2, 100), (5, 100)", [(2, 100), (5, 100)]),
        ("TRUNCATE TABLE db.race", []),
    ],
)
def test_a_change_landing_inside_an_overwrite_comes_before_it(arctic, monkeypatch, statement, expected):
    # An overwrite reserves its version in the change store, then commits to the base store. A blind
    # upsert that lands in between carries a higher number: it must not win over the overwrite's
    # rows. The overwrite takes a new number and comes after it.
    from arctic_sql.table.writing import commit

    arctic.sql("CREATE TABLE db.race (k INT, v INT, PRIMARY KEY (k))")
    arctic.sql("INSERT INTO db.race VALUES (1, 1), (2, 1), (3, 1)")
    reserve, raced = commit.reserve_transaction, []

    def reserve_then_race(table, operation):  # noqa: ANN001, ANN202
        txn = reserve(table, operation)
        if not raced:
            raced.append(txn)
            arctic.sql("INSERT INTO db.race VALUES (2, 50)")
        return txn

    monkeypatch.setattr(commit, "reserve_transaction", reserve_then_race)
    arctic.sql(statement)
    assert sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.race").collect()) == expected
    operations = [
        r[0] for r in arctic.sql("SELECT operation FROM db.race.history ORDER BY version").collect()
    ]
    assert operations[-2] == "insert" and operations[-1] in ("overwrite", "truncate")


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("INSERT OVERWRITE db.held VALUES (2, 100), (5, 100)", [(2, 110), (5, 100)]),
        ("TRUNCATE TABLE db.held", []),
    ],
)
def test_an_update_made_while_an_overwrite_lands_runs_again_after_it(
    arctic, monkeypatch, statement, expected
):
    """The overwrite has looked at the change store for the last time and its base commit is on its
    way: an UPDATE that read the version before must not commit then (its row, numbered above the
    overwrite's, brought back what the overwrite removed). It waits for the overwrite and runs
    again on its rows: the serial order OVERWRITE, then UPDATE."""
    import threading

    from arctic_sql.table.writing import commit

    arctic.sql("CREATE TABLE db.held (k INT, v INT, PRIMARY KEY (k))")
    arctic.sql("INSERT INTO db.held VALUES (1, 1), (2, 1), (3, 1)")
    looked, pending = commit._data_committed_after, commit.reservation_pending
    in_flight, held = threading.Event(), threading.Event()

    def look_then_hold(change, txn):  # noqa: ANN001, ANN202
        found = looked(change, txn)
        if not found and not in_flight.is_set():
            in_flight.set()
            assert held.wait(120), "the UPDATE never met the pending reservation"
        return found

    def seen(base, change, after):  # noqa: ANN001, ANN202
        answer = pending(base, change, after)
        if answer:
            held.set()
        return answer

    monkeypatch.setattr(commit, "_data_committed_after", look_then_hold)
    monkeypatch.setattr(commit, "reservation_pending", seen)
    errors: list = []

    def update() -> None:
        in_flight.wait(120)
        try:
            arctic.sql("UPDATE db.held SET v = v + 10 WHERE k IN (1, 2)")
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    updater = threading.Thread(target=update)
    updater.start()
    arctic.sql(statement)
    updater.join(300)
    assert not updater.is_alive() and errors == [] and held.is_set()
    assert sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.held").collect()) == expected
