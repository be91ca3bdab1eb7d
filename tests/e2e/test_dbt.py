"""dbt-spark (method: thrift) against the Thrift server: examples/dbt seeds, runs (twice, the second an
incremental upsert) and tests, then the results are checked through PyHive. The commands run one after
another in one dbt process (dbt_session.py), as an orchestrator's dbtRunner would run them. Also the statements dbt
sends for its relation cache and materialisations, on arctic tables, in-process."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from thrift_harness import rows, shared_server

pytestmark = pytest.mark.spark

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "dbt"
SCHEMA = "arctic_shop"
COMMAND_TIMEOUT_S = 900


class DbtSession:
    """dbt commands against one server, run in one long-lived process (dbt_session.py)."""

    def __init__(self, port: int, log: Path) -> None:
        env = {
            **os.environ,
            "ARCTIC_THRIFT_HOST": "127.0.0.1",
            "ARCTIC_THRIFT_PORT": str(port),
            "ARCTIC_DBT_SCHEMA": SCHEMA,
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        }
        read, self._write = os.pipe()
        self._log = open(log, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("dbt_session.py")), str(self._write)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            text=True,
            env=env,
            pass_fds=(self._write,),
        )
        os.close(self._write)
        self._replies = os.fdopen(read)

    def __call__(self, project: Path, *args: str, succeeds: bool = True) -> str:
        """dbt ``args`` on ``project``; its output, once it exited as ``succeeds`` says."""
        command = [*args, "--project-dir", str(project), "--profiles-dir", str(project)]
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self._replies], [], [], COMMAND_TIMEOUT_S)
        assert ready, f"dbt {' '.join(args)} did not finish in {COMMAND_TIMEOUT_S} s"
        line = self._replies.readline()
        assert line, f"the dbt process exited with {self.process.wait()}"
        reply = json.loads(line)
        assert reply["success"] == succeeds, (
            f"dbt {' '.join(args)}: success {reply['success']}:\n{reply['output'][-6000:]}"
        )
        return reply["output"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self._replies.close()
        self._log.close()


@pytest.fixture(scope="module")
def dbt(tmp_path_factory):
    session = DbtSession(shared_server().port, tmp_path_factory.mktemp("dbt-log") / "dbt.log")
    yield session
    session.close()


@pytest.fixture(scope="module")
def dbt_project(tmp_path_factory) -> Path:
    """A copy of examples/dbt, so dbt's target/ and logs/ stay out of the repository."""
    project = tmp_path_factory.mktemp("dbt") / "arctic_shop"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("target", "logs"))
    return project


def test_dbt_seed_run_and_test_against_the_thrift_server(dbt, dbt_project):
    server = shared_server()
    dbt(dbt_project, "seed")
    dbt(dbt_project, "run")
    _write_audit_publish(dbt, dbt_project, server)
    second = dbt(dbt_project, "run", "--vars", "{batch: 2}")  # incremental: upserts batch 2
    assert "Completed successfully" in second
    tested = dbt(dbt_project, "test")
    assert "PASS=6" in tested, tested[-3000:]

    with server.connect(database=SCHEMA) as conn:
        cur = conn.cursor()
        cur.execute("SHOW TABLE EXTENDED LIKE '*'")
        providers = {r[1]: r[3] for r in rows(cur)}
        assert "Provider: arctic" in providers["order_status"]
        assert "Primary Key: order_id" in providers["order_status"]
        assert "Primary Key: customer_id" in providers["customer_revenue"]
        cur.execute("SELECT order_id, status, batch FROM order_status ORDER BY order_id")
        assert rows(cur) == [(100, "paid", 2), (101, "new", 1), (102, "cancelled", 2), (103, "new", 2)]
        cur.execute("SELECT order_id, status FROM order_status VERSION AS OF 1 ORDER BY order_id")
        assert rows(cur) == [(100, "new"), (101, "new"), (102, "new")]
        assert "Type: VIEW" in providers["open_orders"]
        cur.execute("SELECT order_id FROM open_orders ORDER BY order_id")  # the view: batch 2 applied
        assert rows(cur) == [(101,), (103,)]
        cur.execute("SELECT customer_id, orders, revenue FROM customer_revenue ORDER BY customer_id")
        assert rows(cur) == [(1, 2, 10.0), (2, 1, 25.5), (3, 1, 99.0)]
        # the post_hook's CALL system.optimize ran: the change data is merged into the base store
        cur.execute("SELECT count(*) FROM customer_revenue.snapshots WHERE store = 'base'")
        base_snapshots = rows(cur)[0][0]
        assert base_snapshots >= 1
    _materialized_view(dbt, dbt_project, server)


def _materialized_view(dbt: DbtSession, project: Path, server) -> None:
    """macros/materialized_view.sql: status_totals was created by the first run and refreshed by the
    later ones (its first version still holds batch 1's totals); a changed query creates it again."""
    batch_2 = [("cancelled", 1, 7.25), ("new", 2, 124.5), ("paid", 1, 10.0)]
    with server.connect(database=SCHEMA) as conn:
        cur = conn.cursor()
        cur.execute("SELECT status, orders, amount FROM status_totals ORDER BY status")
        assert rows(cur) == batch_2
        cur.execute("SELECT status, orders, amount FROM status_totals VERSION AS OF 1")
        assert rows(cur) == [("new", 3, 42.75)]  # created at batch 1, then refreshed: not replaced
        cur.execute(f"DESCRIBE MATERIALIZED VIEW {SCHEMA}.status_totals")
        assert ("refresh", "incremental") in [tuple(r[:2]) for r in rows(cur)]
    model = project / "models" / "status_totals.sql"
    model.write_text(
        model.read_text().replace("group by status", "where status <> 'cancelled'\ngroup by status")
    )
    dbt(project, "run", "--select", "status_totals")
    with server.connect(database=SCHEMA) as conn:
        cur = conn.cursor()
        cur.execute("SELECT status, orders, amount FROM status_totals ORDER BY status")
        assert rows(cur) == batch_2[1:]
        cur.execute("SELECT status, orders, amount FROM status_totals VERSION AS OF 1 ORDER BY status")
        assert rows(cur) == batch_2[1:]  # a new view, made from the new query


def _write_audit_publish(dbt: DbtSession, project: Path, server) -> None:
    """macros/wap.sql and the profile's `audit` target: batch 2 is written to the branch `audit` of
    order_status and tested there, unseen on main until it is published."""
    dbt(project, "run-operation", "wap_begin", "--args", "{branch: audit}")
    dbt(project, "run", "--select", "order_status", "--vars", "{batch: 2}", "--target", "audit")
    batch_1 = [(100, "new"), (101, "new"), (102, "new")]
    batch_2 = [(100, "paid"), (101, "new"), (102, "cancelled"), (103, "new")]
    with server.connect(database=SCHEMA) as conn:
        cur = conn.cursor()
        cur.execute("SELECT order_id, status FROM order_status ORDER BY order_id")
        assert rows(cur) == batch_1  # main: as before the run
        cur.execute(f"SELECT order_id, status FROM {SCHEMA}.order_status.branch_audit ORDER BY order_id")
        assert rows(cur) == batch_2
        # a bad row on the branch: dbt's tests fail there (every session of the run on the branch)
        cur.execute(f"INSERT INTO {SCHEMA}.order_status.branch_audit VALUES (104, 3, 'lost', 1.0, 2)")
        failed = dbt(project, "test", "--select", "order_status", "--target", "audit", succeeds=False)
        assert "Failure in test accepted_values_order_status_status" in failed, failed[-3000:]
        cur.execute(f"DELETE FROM {SCHEMA}.order_status.branch_audit WHERE order_id = 104")
    passed = dbt(project, "test", "--select", "order_status", "--target", "audit")
    assert "PASS=3" in passed, passed[-3000:]
    dbt(project, "run-operation", "wap_publish", "--args", "{branch: audit}")
    with server.connect(database=SCHEMA) as conn:
        cur = conn.cursor()
        cur.execute("SELECT order_id, status FROM order_status ORDER BY order_id")
        assert rows(cur) == batch_2
        cur.execute("SELECT name FROM order_status.refs")
        assert rows(cur) == [("main",)]


# what dbt-spark sends, on arctic tables (in-process) ------------------------------------------------
def test_show_table_extended_lists_arctic_and_spark_tables(arctic):
    arctic.sql("CREATE TABLE db.keyed (id BIGINT, v STRING, PRIMARY KEY (id)) PARTITIONED BY (id)")
    arctic.sql("CREATE TABLE db.plain USING parquet AS SELECT 1 AS x")
    arctic.sql("CREATE VIEW db.a_view AS SELECT 1 AS y")
    try:
        result = arctic.sql("show table extended in db like '*'")
        assert result.columns == ["namespace", "tableName", "isTemporary", "information"]
        info = {r.tableName: r.information for r in result.collect()}
        assert set(info) >= {"keyed", "plain", "a_view"}
        assert "Type: MANAGED" in info["keyed"] and "Provider: arctic" in info["keyed"]
        assert "Primary Key: id" in info["keyed"] and "Partition Columns: [`id`]" in info["keyed"]
        assert " |-- id: bigint (nullable = false)" in info["keyed"]
        assert "Provider: parquet" in info["plain"] and "Type: VIEW" in info["a_view"]
        only = arctic.sql("SHOW TABLE EXTENDED IN db LIKE 'kE*'").collect()
        assert [r.tableName for r in only] == ["keyed"]
    finally:
        arctic.sql("DROP VIEW db.a_view")
        arctic.sql("DROP TABLE db.plain")


def test_create_table_primary_key_as_select_and_create_or_replace(arctic):
    arctic.sql("CREATE TABLE db.ctas PRIMARY KEY (id) USING arctic AS SELECT id, 'v' AS v FROM range(3)")
    table = arctic.table("db.ctas")
    assert table.primary_key == ["id"]
    arctic.sql("INSERT INTO db.ctas VALUES (1, 'upserted')")
    assert sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.ctas").collect()) == [
        (0, "v"),
        (1, "upserted"),
        (2, "v"),
    ]
    arctic.sql("CREATE OR REPLACE TABLE db.ctas PRIMARY KEY (k) AS SELECT 7 AS k, 'new' AS w")
    assert [tuple(r) for r in arctic.sql("SELECT * FROM db.ctas").collect()] == [(7, "new")]
    assert arctic.table("db.ctas").primary_key == ["k"]
    from arctic_sql.errors import ArcticError

    with pytest.raises(ArcticError, match="no_such_column"):  # a failing replacement keeps the old table
        arctic.sql("CREATE OR REPLACE TABLE db.ctas AS SELECT no_such_column FROM range(1)")
    assert [tuple(r) for r in arctic.sql("SELECT * FROM db.ctas").collect()] == [(7, "new")]
    with pytest.raises(ArcticError, match="cannot read db.ctas itself"):
        arctic.sql("CREATE OR REPLACE TABLE db.ctas AS SELECT k + 1 AS k FROM db.ctas")
    assert [tuple(r) for r in arctic.sql("SELECT * FROM db.ctas").collect()] == [(7, "new")]


def test_create_and_drop_schema_as_dbt_sends_them(arctic):
    arctic.sql('/* {"app": "dbt"} */\ncreate schema if not exists dbt_schema')
    assert "dbt_schema" in [r[0] for r in arctic.sql("show databases").collect()]
    arctic.sql("CREATE TABLE dbt_schema.t (id INT, PRIMARY KEY (id))")
    arctic.sql("drop schema if exists dbt_schema cascade")
    assert "dbt_schema" not in [r[0] for r in arctic.sql("show databases").collect()]


def test_show_table_extended_parses_into_show_tables():
    from arctic_sql.parser import parse, statements

    parsed = parse("show table extended in db like '*'")[0].expression
    assert isinstance(parsed, statements.ShowTables) and parsed.args.get("extended")
    with_partition = parse("SHOW TABLE EXTENDED IN db LIKE 't' PARTITION (p = 1)")[0].expression
    assert not isinstance(with_partition, statements.ShowTables)  # Spark's own form, passed through
