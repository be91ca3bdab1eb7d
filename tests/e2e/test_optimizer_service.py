"""The background optimizer in its own process while a writer commits in a loop (DESIGN invariant 4):
nothing committed is lost, nothing deleted comes back, and every version still reads as it was."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from test_reference_model import Model, _rows, _values

from arctic_sql.table.records import optimizing_processes as state

pytestmark = pytest.mark.spark

ROWS = "SELECT id, p, v, s FROM db.t"
MIN_COMMITS, MAX_COMMITS = 12, 60


def _batch(rng: random.Random, model: Model, i: int) -> str:
    if model.rows and rng.random() < 0.3:
        doomed = rng.sample(sorted(model.rows), k=min(len(model.rows), rng.randint(1, 4)))
        for key in doomed:
            del model.rows[key]
        return f"DELETE FROM db.t WHERE id IN ({', '.join(str(k[0]) for k in doomed)})"
    rows = [(rng.randrange(200), "a", i, f"w{i}") for _ in range(rng.randint(1, 10))]
    rows = list({r[0]: r for r in rows}.values())
    model.upsert(rows)
    return f"INSERT INTO db.t VALUES {_values(rows)}"


def test_writer_loop_with_the_optimizer_in_another_process(arctic, warehouse, tmp_path):
    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, p STRING, v BIGINT, s STRING, PRIMARY KEY (id)) TBLPROPERTIES ("
        "'base.file-index.hash-bucket' = '2', 'change.file-index.hash-bucket' = '2', "
        "'self-optimizing.minor.trigger.file-count' = '2')"
    )
    log_path = tmp_path / "optimizer.log"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(log_path, "w") as log:
        service = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "arctic_sql.frontends.cli",
                "optimizer",
                "--warehouse",
                warehouse,
                "--interval",
                "0.5",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    rng, model = random.Random(7), Model(False)
    states: dict[int, list[tuple]] = {}
    table = arctic.table("db.t")
    try:
        for i in range(MAX_COMMITS):
            arctic.sql(_batch(rng, model, i))
            version = arctic.sql("SELECT max(version) FROM db.t.history").collect()[0][0]
            states[version] = model.sorted()
            done = [r for r in state.processes(table) if r.status == state.SUCCESS]
            if i + 1 >= MIN_COMMITS and len(done) >= 2:
                break
            assert service.poll() is None, log_path.read_text()[-3000:]
        # Let the optimizer finish what it is doing: wait for a round that finds nothing running.
        deadline = time.monotonic() + 300
        while any(r.is_running for r in state.processes(table)) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=120)
    log_text = log_path.read_text()
    assert service.returncode == 0, log_text[-3000:]

    records = state.processes(table)
    assert sum(r.status == state.SUCCESS and r.trigger == "service" for r in records) >= 2, log_text[-3000:]
    assert "needs minor optimizing" in log_text and "optimizer stopped" in log_text
    assert _rows(arctic, ROWS) == model.sorted()
    for version, expected in states.items():
        assert _rows(arctic, f"{ROWS} VERSION AS OF {version}") == expected, version
