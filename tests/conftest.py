"""Shared fixtures: one local SparkSession for every end-to-end test, a fresh warehouse per test."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from arctic_sql.spark import local_session

    root = tmp_path_factory.mktemp("spark")
    session = local_session(str(root), {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


@pytest.fixture
def warehouse(tmp_path):
    return str(tmp_path / "warehouse")


@pytest.fixture
def arctic(spark, warehouse):
    """An arctic session on the shared SparkSession with its own catalog and warehouse."""
    import arctic_sql

    session = arctic_sql.connect(warehouse=warehouse, spark=spark)
    session.sql("CREATE DATABASE IF NOT EXISTS db")
    yield session
    for view in spark.catalog.listTables():
        if view.isTemporary:
            spark.catalog.dropTempView(view.name)
    spark.sql("USE default")


@pytest.fixture
def spark_jobs(spark):
    """``spark_jobs(run)``: the Spark jobs ``run()`` started, by the call that started each (its last
    stage's name), from Spark's own status tracker."""
    import uuid

    def jobs(run) -> list[str]:  # noqa: ANN001
        group = f"counted-{uuid.uuid4().hex}"
        spark.sparkContext.setJobGroup(group, "counted")
        try:
            run()
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        tracker = spark.sparkContext.statusTracker()
        return [
            tracker.getStageInfo(max(tracker.getJobInfo(j).stageIds)).name.split(" at ")[0]
            for j in tracker.getJobIdsForGroup(group)
        ]

    return jobs


@pytest.fixture
def restore_storage():
    """The process's storage configuration as it was before the test (a catalog opened sets it)."""
    from arctic_sql.table.files import storage

    before = storage.routes()
    yield
    storage.restore(before)
