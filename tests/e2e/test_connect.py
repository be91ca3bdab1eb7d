"""connect(): an existing SparkSession with any pyiceberg catalog, by properties or config file."""

from __future__ import annotations

import pytest

import arctic_sql
from arctic_sql.errors import NoSuchDatabaseError

pytestmark = pytest.mark.spark


def test_catalog_from_properties_and_from_a_config_file_see_the_same_tables(spark, tmp_path):
    uri = f"sqlite:///{tmp_path}/shared-catalog.db"
    properties = {"type": "sql", "uri": uri, "warehouse": f"file://{tmp_path}/lake"}
    first = arctic_sql.connect(spark=spark, catalog_name="lake", catalog_properties=properties)
    first.sql("CREATE DATABASE sales")
    first.sql("CREATE TABLE sales.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    first.sql("INSERT INTO sales.t VALUES (1, 'a')")

    config = tmp_path / "catalogs.yaml"
    config.write_text(
        f"catalog:\n  lake:\n    type: sql\n    uri: {uri}\n    warehouse: file://{tmp_path}/lake\n"
    )
    second = arctic_sql.connect(spark=spark, catalog_name="lake", config_file=str(config), database="sales")
    assert [tuple(r) for r in second.sql("SELECT * FROM t").collect()] == [(1, "a")]
    assert (tmp_path / "lake" / "sales" / "t" / "base").is_dir()
    assert (tmp_path / "lake" / "sales" / "t" / "change").is_dir()


def test_connect_refuses_an_unknown_database(spark, tmp_path):
    with pytest.raises(NoSuchDatabaseError, match="nope"):
        arctic_sql.connect(warehouse=str(tmp_path), spark=spark, database="nope")
