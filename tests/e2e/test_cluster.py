"""arctic-sql on a Spark standalone cluster: a master and two workers on 127.0.0.1 (cluster_harness.py).

The driver runs in a subprocess (one SparkContext per JVM; this process has the suite's local
session) and connects with ``master="spark://..."``: a seeded reference-model run of upserts,
deletes and merges with minor, major and full optimizes, checked against a Python model after every
step (cluster_workload.py). The test then proves the work ran on the cluster: the master lists the
application, the driver saw two executors, and each worker's executor logs finished tasks of it.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
from cluster_harness import StandaloneCluster, executor_logs, run_driver

WORKLOAD = Path(__file__).with_name("cluster_workload.py")
FINISHED_TASK = re.compile(r"Finished task \S+ in stage")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1, memory="768m") as running:
        yield running


def test_a_reference_model_run_and_optimizes_on_a_two_worker_cluster(cluster, tmp_path):
    started = time.monotonic()
    command = [sys.executable, str(WORKLOAD), cluster.master_url, str(tmp_path / "warehouse"), "12"]
    result = run_driver(command, timeout_s=400, env={"ARCTIC_DRIVER_MEMORY": "1g", "SPARK_LOCAL_IP": "127.0.0.1"})
    print(result.stdout)  # each step with its time, shown when the test fails (or with -s)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["master"] == cluster.master_url
    assert summary["versions"] == 8 and summary["rows"] > 0  # the data commits; optimizing makes no version
    # Block managers: the driver and one executor per worker.
    assert len(summary["block_managers"]) == 3, summary

    apps = {app["id"]: app for app in cluster.state()["completedapps"]}
    assert summary["app_id"] in apps, f"the master does not know the application: {sorted(apps)}"
    for work_dir in cluster.worker_dirs:
        logs = executor_logs(work_dir, summary["app_id"])
        assert logs, f"{work_dir.name} ran no executor of the application"
        finished = sum(len(FINISHED_TASK.findall(log.read_text(errors="replace"))) for log in logs)
        assert finished > 0, f"{work_dir.name}'s executor finished no task"
    print(f"cluster run: {time.monotonic() - started:.1f} s, {summary}")
