"""Cancelling a running optimizing process through the REST API (Amoro's
``POST .../optimizing-processes/{id}/cancel``), against the real ``arctic-sql service`` process.

The service runs with ``ARCTIC_FAULT=stall:optimize-task-wrote``: its optimize task writes its first
file and then hangs for ten minutes, as a task on slow storage would. The cancel must stop that Spark
job (the test gives it two minutes, far less than the stall), commit nothing, leave every row
readable, and record the process as CANCELLED; what the task wrote is referenced by nothing and
``remove_orphan_files`` leaves no file of it behind.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from service_harness import TOKEN, service_process, token_file

pytestmark = pytest.mark.spark

AUTH = {"Authorization": f"Bearer {TOKEN}"}
ROWS = 400


def _local(path: str) -> Path:
    return Path(path.removeprefix("file://"))


def _wait(what: str, seconds: float, check):  # noqa: ANN001 - a predicate returning a value or None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    pytest.fail(f"{what} within {seconds:.0f} s")


def test_a_cancel_stops_a_running_optimize_and_commits_nothing(spark, tmp_path):
    import arctic_sql

    warehouse = str(tmp_path / "warehouse")
    s = arctic_sql.connect(warehouse=warehouse, spark=spark)
    s.sql("CREATE DATABASE IF NOT EXISTS db")
    s.sql(
        "CREATE TABLE db.busy (id BIGINT, v STRING, PRIMARY KEY (id)) "
        "TBLPROPERTIES ('self-optimizing.execute.num-retries' = '2')"
    )  # a retry would undo a cancel
    s.sql(f"INSERT INTO db.busy SELECT id, CAST(id AS STRING) FROM range({ROWS})")
    s.sql("INSERT INTO db.busy SELECT id, 'updated' FROM range(0, 100)")
    expected = sorted(tuple(r) for r in s.sql("SELECT id, v FROM db.busy").collect())

    with (
        service_process(
            warehouse,
            "--token-file",
            token_file(str(tmp_path)),
            "--master",
            "local[1]",
            env={"ARCTIC_FAULT": "stall:optimize-task-wrote", "ARCTIC_FAULT_STALL_S": "600"},
        ) as running,
        httpx.Client(base_url=running.url, timeout=60) as client,
    ):
        before = client.get("/api/v1/tables/db/busy").json()
        started = client.post("/api/v1/tables/db/busy/optimize", json={"mode": "full"}, headers=AUTH)
        assert started.status_code == 202, started.text

        def stalled_after_writing() -> dict | None:
            for r in client.get("/api/v1/tables/db/busy/optimizing").json()["items"]:
                detail = client.get(f"/api/v1/tables/db/busy/optimizing/{r['process_id']}").json()
                folder = _local(detail["output_prefix"])
                if (
                    r["status"] == "EXECUTING"
                    and folder.exists()
                    and any(p.is_file() for p in folder.rglob("*"))
                ):
                    return detail
            return None

        # Spark starts inside the service process first: slow on a busy 2-core machine.
        process = _wait("the optimize task wrote a file", 300, stalled_after_writing)
        pid = process["process_id"]
        assert client.get("/api/v1/tables/db/busy").json()["optimizing_status"] == "full"
        assert (
            client.post(f"/api/v1/tables/db/busy/optimizing/{pid}/cancel").status_code == 401
        )  # token needed
        cancel = client.post(f"/api/v1/tables/db/busy/optimizing/{pid}/cancel", headers=AUTH)
        assert cancel.status_code == 202 and cancel.json()["cancelling"] is True, cancel.text

        def ended() -> dict | None:
            detail = client.get(f"/api/v1/tables/db/busy/optimizing/{pid}").json()
            return detail if detail["status"] not in ("PLANNED", "EXECUTING", "COMMITTING") else None

        done = _wait("the cancelled optimize ended (the stall lasts 600 s)", 120, ended)
        assert done["status"] == "CANCELLED" and "cancelled" in done["failure_reason"]
        assert done["output_files"] == 0 and done["retries"] == 0
        again = client.post(f"/api/v1/tables/db/busy/optimizing/{pid}/cancel", headers=AUTH)
        assert again.status_code == 409 and "already ended (CANCELLED)" in again.json()["error"]

        after = client.get("/api/v1/tables/db/busy").json()
        assert after["snapshots"] == before["snapshots"]  # nothing committed to either store
        assert after["base_files"] == 0 and after["latest_version"] == before["latest_version"]
        assert (
            after["optimizing_status"] != "failed" and after["last_failure"] is None
        )  # cancelled is not failed
        referenced = {
            f["path"]
            for f in client.get("/api/v1/tables/db/busy/files", params={"page_size": 1000}).json()["items"]
        }
        assert not [p for p in referenced if p.startswith(process["output_prefix"])]

    assert sorted(tuple(r) for r in s.sql("SELECT id, v FROM db.busy").collect()) == expected
    # Whatever the killed task left under its folder is an orphan: forced cleaning takes it all.
    s.sql(
        "CALL system.remove_orphan_files(table => 'db.busy', older_than => TIMESTAMP '2100-01-01 00:00:00', "
        "force => true)"
    ).collect()
    folder = _local(process["output_prefix"])
    assert not folder.exists() or not any(p.is_file() for p in folder.rglob("*"))
    assert sorted(tuple(r) for r in s.sql("SELECT id, v FROM db.busy").collect()) == expected
