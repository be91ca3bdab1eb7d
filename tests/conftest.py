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
def restore_storage():
    """The process's storage configuration as it was before the test (a catalog opened sets it)."""
    from arctic_sql.table import storage

    before = storage.active()
    yield
    storage.configure(before)
