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


@pytest.fixture
def before_change_load(monkeypatch):
    """``before_change_load(catalog, run)``: make the next load of a change store through ``catalog`` (an
    ArcticCatalog; a ``load_table`` or a store's ``refresh``) first call ``run(other)``, ``other`` another
    ArcticCatalog on the same database: what ``run`` commits lands after the base store was loaded
    and before the change store is, deterministically. Returns ``[True]``, ``[False]`` once it ran."""
    from pyiceberg.catalog import load_catalog

    from arctic_sql.table.catalog import ArcticCatalog
    from arctic_sql.table.model.identifiers import CHANGE_SUFFIX

    def arm(catalog, run) -> list[bool]:  # noqa: ANN001
        other = ArcticCatalog(load_catalog(catalog.iceberg.name, **catalog.iceberg.properties))
        real, armed = catalog.iceberg.load_table, [True]

        def load_table(identifier):  # noqa: ANN001, ANN202
            if armed[0] and tuple(identifier)[-1].endswith(CHANGE_SUFFIX):
                armed[0] = False
                run(other)
            return real(identifier)

        monkeypatch.setattr(catalog.iceberg, "load_table", load_table)
        return armed

    return arm


@pytest.fixture
def fast_forward_on_load(before_change_load):
    """``fast_forward_on_load(catalog, branch, to)``: a whole ``fast_forward`` of db.t's ``branch`` to
    ``to`` run before the next change-store load through ``catalog`` (see ``before_change_load``)."""
    from arctic_sql.table.model.identifiers import TableIdentifier
    from arctic_sql.table.writing import branch_writes

    def arm(catalog, branch: str, to: str) -> list[bool]:  # noqa: ANN001
        return before_change_load(
            catalog,
            lambda other: branch_writes.fast_forward(
                other.load_table(TableIdentifier("db", "t")), branch, to
            ),
        )

    return arm
