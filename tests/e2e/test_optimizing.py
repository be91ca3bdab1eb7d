"""Self-optimizing end to end: reads never change, inputs that moved are dropped, crashes leave orphans only.

The reference model (test_reference_model.Model) runs random statements with optimizing of every mode
interleaved; every statement's result, every version's rows and random incremental reads must match
the model, before and after each optimize (DESIGN invariants 2, 3, 4 and 5).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

import pytest
from test_reference_model import Log, Model, _rows, _step, check_incremental_reads

from arctic_sql.optimizer import committer, executor, planner, process
from arctic_sql.optimizer.inputs import Settings
from arctic_sql.table.records import optimizing_processes as state

pytestmark = pytest.mark.spark

ROWS = "SELECT id, p, v, s FROM db.t"


def _create(arctic, buckets: int, change_buckets: int, partitioned: bool, extra: str = "") -> None:
    key = "PRIMARY KEY (id, p)" if partitioned else "PRIMARY KEY (id)"
    arctic.sql(
        f"CREATE TABLE db.t (id BIGINT, p STRING, v BIGINT, s STRING, {key}) "
        f"{'PARTITIONED BY (p)' if partitioned else ''} "
        f"TBLPROPERTIES ('base.file-index.hash-bucket' = '{buckets}', "
        f"'change.file-index.hash-bucket' = '{change_buckets}'{extra})"
    )


def _version(arctic) -> int:
    return arctic.sql("SELECT coalesce(max(version), 0) FROM db.t.history").collect()[0][0]


# Change files below the target node merge in memory (node_merge); change files above it (one change
# bucket under two base buckets) and any task over in-memory-max-bytes (0: all) run as a Spark query.
# An order set at a random step (issue 34) makes major and full write each node's rows in it, by
# Z-order in a Spark query (seed 11) and by a sort in memory (seed 12): readers still see the model.
@pytest.mark.parametrize(
    ("buckets", "change_buckets", "partitioned", "seed", "in_memory_max_bytes", "order"),
    [
        (4, 8, False, 11, 0, "CLUSTER BY (v, s)"),
        (2, 1, True, 12, None, "WRITE ORDERED BY (s, v)"),
        (2, 4, True, 13, None, None),
    ],
)
def test_optimizing_interleaved_never_changes_what_readers_see(
    arctic, buckets, change_buckets, partitioned, seed, in_memory_max_bytes, order
):
    rng = random.Random(seed)
    order_at = random.Random(seed + 500).randint(0, 8)  # its own generator: the statements stay the seed's
    extra = (
        ""
        if in_memory_max_bytes is None
        else f", 'self-optimizing.execute.in-memory-max-bytes' = '{in_memory_max_bytes}'"
    )
    _create(arctic, buckets, change_buckets, partitioned, extra)
    model = Model(partitioned)
    states: dict[int, list[tuple]] = {}
    log, previous = Log(), 0
    committed_modes = set()
    for step in range(12):
        if order is not None and step == order_at:
            arctic.sql(f"ALTER TABLE db.t {order}")
        sql = _step(rng, model)
        arctic.sql(sql)
        states[_version(arctic)] = model.sorted()
        if max(states) > previous:
            log.record(max(states), model)
            previous = max(states)
        if step % 3 == 2:
            mode = ("minor", "major", "minor", "full")[step // 3]
            result = arctic.sql(f"CALL system.optimize(table => 'db.t', mode => '{mode}')").collect()
            committed_modes.update(r["mode"] for r in result if r["committed"])
            assert _rows(arctic, ROWS) == model.sorted(), f"after {mode} optimize"
    assert "full" in committed_modes and len(committed_modes) >= 2, committed_modes
    # A full optimize leaves no change data in scope.
    assert arctic.sql("SELECT sum(change_files) FROM db.t.partitions").collect()[0][0] in (0, None)
    for version, expected in states.items():
        assert _rows(arctic, f"{ROWS} VERSION AS OF {version}") == expected, version
    # Incremental reads see the same changes whatever optimizing rewrote (invariant 3).
    check_incremental_reads(arctic, rng, model, states, log)
    statuses = [r["status"] for r in arctic.sql("SELECT status FROM db.t.optimizing").collect()]
    assert statuses and set(statuses) == {"SUCCESS"}


def test_minor_leaves_segments_outside_the_changed_key_ranges_alone(arctic):
    _create(arctic, 1, 1, False)
    arctic.sql("INSERT INTO db.t SELECT id, 'a', id, 'x' FROM range(0, 1000)")
    arctic.sql("CALL system.optimize('db.t', 'full')")
    segment = {r["path"] for r in arctic.sql("SELECT path FROM db.t.files WHERE store = 'base'").collect()}
    # New keys above the old range: the old base file's range overlaps no change file.
    arctic.sql("INSERT INTO db.t SELECT id, 'a', id, 'y' FROM range(1000, 1010)")
    arctic.sql("INSERT INTO db.t SELECT id, 'a', id, 'z' FROM range(1010, 1020)")
    result = arctic.sql("CALL system.optimize('db.t', 'minor')").collect()
    assert [(r["input_files_count"], r["committed"]) for r in result] == [(2, True)]
    after = {r["path"] for r in arctic.sql("SELECT path FROM db.t.files WHERE store = 'base'").collect()}
    assert segment < after
    assert arctic.sql("SELECT count(*), sum(v) FROM db.t").collect()[0][:] == (1020, sum(range(1020)))


def test_dry_run_plans_without_writing(arctic):
    _create(arctic, 2, 2, False)
    arctic.sql("INSERT INTO db.t VALUES (1, 'a', 1, 'x'), (2, 'a', 2, 'y')")
    files_before = arctic.sql("SELECT count(*) FROM db.t.files").collect()[0][0]
    plan = arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full', dry_run => true)").collect()
    assert [(r["mode"], r["committed"], r["output_files_count"]) for r in plan] == [("full", False, None)]
    assert plan[0]["input_files_count"] == files_before
    assert arctic.sql("SELECT count(*) FROM db.t.files").collect()[0][0] == files_before
    assert arctic.sql("SELECT count(*) FROM db.t.optimizing").collect()[0][0] == 0


def _planned(arctic, mode: str = "full"):
    """Plan and execute an optimize of db.t without committing it."""
    table = arctic.table("db.t")
    snap = process.gather(table)
    plan = planner.plan(process.decide(table, snap, mode, Settings.of(table)), Settings.of(table))
    record = state.new_record(table, mode, "test", snap.base_snapshot_id, snap.change_snapshot_id)
    tasks = [t for p in plan.partitions for t in p.tasks]
    execution = executor.run_tasks(arctic.spark, table, tasks, record.output_prefix, retries=0)
    from arctic_sql.table.format.partitioning import partition_path
    from arctic_sql.table.writing.commit import data_files

    outputs: dict[str, list] = {}
    for f in data_files(table.base, execution.paths):
        outputs.setdefault(partition_path(table.spec, table.schema, f.partition), []).append(f)
    return table, plan, outputs, record


def test_partition_whose_watermark_moved_is_dropped_not_committed(arctic):
    _create(arctic, 2, 2, True)
    arctic.sql("INSERT INTO db.t VALUES (1, 'a', 1, 'x'), (2, 'b', 2, 'y')")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a', 10, 'x2'), (3, 'b', 3, 'z')")
    table, plan, outputs, record = _planned(arctic)
    # An overwrite of partition a lands between execution and commit.
    arctic.sql("INSERT OVERWRITE db.t VALUES (7, 'a', 7, 'o')")
    outcome = committer.commit_plan(table, plan.partitions, outputs, record.process_id, "full")
    assert outcome.committed == ["p=b"] and list(outcome.dropped) == ["p=a"]
    assert "watermark moved" in outcome.dropped["p=a"]
    assert _rows(arctic, ROWS) == [(2, "b", 2, "y"), (3, "b", 3, "z"), (7, "a", 7, "o")]
    dropped_paths = [f.file_path.removeprefix("file://") for f in outputs["p=a"]]
    assert dropped_paths and not any(os.path.exists(p) for p in dropped_paths)


def test_change_committed_during_optimize_stays_visible(arctic):
    _create(arctic, 2, 4, False)
    arctic.sql("INSERT INTO db.t VALUES (1, 'a', 1, 'x'), (2, 'a', 2, 'y')")
    arctic.sql("DELETE FROM db.t WHERE id = 2")
    table, plan, outputs, record = _planned(arctic)
    arctic.sql("INSERT INTO db.t VALUES (2, 'a', 22, 'back'), (1, 'a', 11, 'new')")  # after the plan's inputs
    outcome = committer.commit_plan(table, plan.partitions, outputs, record.process_id, "full")
    assert outcome.committed == [""]
    assert _rows(arctic, ROWS) == [(1, "a", 11, "new"), (2, "a", 22, "back")]
    assert _rows(arctic, f"{ROWS} VERSION AS OF 2") == [(1, "a", 1, "x")]


CRASHING_OPTIMIZER = textwrap.dedent(
    """
    import sys, arctic_sql
    s = arctic_sql.connect(warehouse=sys.argv[1], spark_conf={"spark.master": "local[1]"})
    s.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    """
)


def test_crash_between_execute_and_commit_leaves_the_table_as_it_was(arctic, warehouse):
    _create(arctic, 2, 2, False)
    arctic.sql("INSERT INTO db.t VALUES (1, 'a', 1, 'x'), (2, 'a', 2, 'y')")
    arctic.sql("UPDATE db.t SET v = 5 WHERE id = 1")
    before = _rows(arctic, ROWS)
    snapshots_before = len(arctic.table("db.t").base.snapshots())
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "ARCTIC_FAULT": "before-commit"}
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_OPTIMIZER, warehouse],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 86, done.stderr[-2000:]

    table = arctic.table("db.t")
    assert len(table.base.snapshots()) == snapshots_before
    assert _rows(arctic, ROWS) == before
    [record] = state.processes(table)
    assert record.status == state.COMMITTING  # it died there; after the heartbeat timeout: ABANDONED
    written = [
        os.path.join(d, n)
        for d, _, names in os.walk(record.output_prefix.removeprefix("file://"))
        for n in names
        if n.endswith(".parquet")
    ]
    live = {r["path"].removeprefix("file://") for r in arctic.sql("SELECT path FROM db.t.files").collect()}
    assert written and not set(written) & live  # what it wrote is unreferenced: orphans only
    # The next optimize does the work.
    result = arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')").collect()
    assert [r["committed"] for r in result] == [True]
    assert _rows(arctic, ROWS) == before


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("CALL system.optimize(table => 'db.t', mode => 'huge')", "Unknown optimizing mode 'huge'"),
        ("CALL system.optimize(table => 'db.t', where => 'id = 1')", "is not partitioned"),
        ("CALL system.optimize(table => 'db.nope')", "db.nope"),
        ("CALL system.optimize(mode => 'full')", "needs the parameter 'table'"),
        ("ALTER TABLE db.nope COMPACT FULL", "db.nope"),
    ],
)
def test_bad_optimize_calls_fail_clearly_and_change_nothing(arctic, statement, message):
    from arctic_sql.errors import ArcticError

    _create(arctic, 2, 2, False)
    arctic.sql("INSERT INTO db.t VALUES (1, 'a', 1, 'x')")
    files_before = arctic.sql("SELECT count(*) FROM db.t.files").collect()[0][0]
    with pytest.raises(ArcticError, match=message) as raised:
        arctic.sql(statement)
    assert "\n" not in str(raised.value)
    assert arctic.sql("SELECT count(*) FROM db.t.files").collect()[0][0] == files_before
