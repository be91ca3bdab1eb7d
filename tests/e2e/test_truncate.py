"""TRUNCATE TABLE on arctic tables: a new version without rows; earlier versions stay readable."""

from __future__ import annotations

import pytest

from arctic_sql.errors import InvalidArgumentError

pytestmark = pytest.mark.spark


def _rows(arctic, sql):
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def _versions(arctic, name):
    return [r[0] for r in arctic.sql(f"SELECT version FROM {name}.history").collect()]


def test_truncate_a_primary_key_table_keeps_history(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT OVERWRITE db.t VALUES (1, 'a'), (2, 'b')")
    arctic.sql("INSERT INTO db.t VALUES (2, 'B'), (3, 'c')")  # change data above the base
    before = _versions(arctic, "db.t")
    arctic.sql("TRUNCATE TABLE db.t")
    after = _versions(arctic, "db.t")
    assert len(after) == len(before) + 1 and after[-1] > before[-1]
    assert _rows(arctic, "SELECT * FROM db.t") == []
    assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {before[-1]}") == [(1, "a"), (2, "B"), (3, "c")]
    arctic.sql("INSERT INTO db.t VALUES (2, 'x')")  # writes after the truncate are read again
    assert _rows(arctic, "SELECT * FROM db.t") == [(2, "x")]


def test_truncate_one_partition(arctic):
    arctic.sql(
        "CREATE TABLE db.p (id BIGINT, region STRING, PRIMARY KEY (id, region)) PARTITIONED BY (region)"
    )
    arctic.sql("INSERT OVERWRITE db.p VALUES (1, 'eu'), (2, 'us')")
    arctic.sql("INSERT INTO db.p VALUES (3, 'eu'), (4, 'us')")
    arctic.sql("TRUNCATE TABLE db.p PARTITION (region = 'eu')")
    assert _rows(arctic, "SELECT * FROM db.p") == [(2, "us"), (4, "us")]
    assert [r[0] for r in arctic.sql("SHOW PARTITIONS db.p").collect()] == ["region=us"]


def test_truncate_an_append_only_table(arctic):
    arctic.sql("CREATE TABLE db.log (msg STRING)")
    arctic.sql("INSERT INTO db.log VALUES ('a'), ('b')")
    before = _versions(arctic, "db.log")
    arctic.sql("TRUNCATE TABLE db.log")
    assert _rows(arctic, "SELECT * FROM db.log") == []
    assert _rows(arctic, f"SELECT * FROM db.log VERSION AS OF {before[-1]}") == [("a",), ("b",)]
    with pytest.raises(InvalidArgumentError, match="not partitioned"):
        arctic.sql("TRUNCATE TABLE db.log PARTITION (msg = 'a')")
