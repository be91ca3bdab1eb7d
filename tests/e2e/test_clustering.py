"""Clustering (issue 34): with WRITE ORDERED BY or CLUSTER BY, major and full optimizing write each
tree node's rows in that order, so a filter on the ordered columns opens only the files whose
bounds overlap it. Files read are asserted from the read's own plan (EXPLAIN), never from timing.
"""

from __future__ import annotations

import datetime
import re

import pytest
from pyspark.sql import datasource as sds

from arctic_sql.datasource import partitions
from arctic_sql.datasource.source import ArcticDataSource, CatalogSpec
from arctic_sql.errors import ArcticError

pytestmark = pytest.mark.spark

ROWS = 4000
START = datetime.date(2026, 1, 1)
# 8 nodes; files of 100 rows (target-size / the writer's assumed 48 bytes a row): ~5 files a node.
PROPERTIES = (
    "'base.file-index.hash-bucket' = '8', 'change.file-index.hash-bucket' = '2', "
    "'self-optimizing.target-size' = '4800', 'self-optimizing.enabled' = 'false'"
)
ALL = "SELECT id, day, customer, amount FROM db.c"
DAYS = "day BETWEEN DATE'2026-03-01' AND DATE'2026-03-04'"  # 4 of 365 days: about 1% of the rows
CUSTOMERS = "customer BETWEEN 'c010' AND 'c012'"  # 3 of 100 customers


def _create(arctic, extra: str = "") -> None:
    arctic.sql(
        "CREATE TABLE db.c (id BIGINT, day DATE, customer STRING, amount BIGINT, PRIMARY KEY (id)) "
        f"TBLPROPERTIES ({PROPERTIES}{extra})"
    )
    # Days and customers scattered over the keys: every node holds every day.
    arctic.sql(
        f"INSERT INTO db.c SELECT id, date_add(DATE'{START}', CAST(id * 7919 % 365 AS INT)), "
        f"concat('c', lpad(CAST(id * 31 % 100 AS STRING), 3, '0')), id * 3 FROM range({ROWS})"
    )


def _files_read(arctic, where: str) -> int:
    """The files a query with ``where`` opens, by its plan (a base-only read is a Parquet scan)."""
    plan = arctic.sql(f"EXPLAIN {ALL} WHERE {where}").collect()[0][0]
    merged = re.findall(r"base_files=(\d+), change_files=(\d+)\]", plan)
    scanned = re.findall(r"InMemoryFileIndex\((\d+) paths?\)", plan)
    assert merged or scanned, plan
    return sum(int(b) + int(c) for b, c in merged) + sum(int(n) for n in scanned)


def _overlapping(arctic, low: str, high: str, column: int = 0) -> int:
    """Base files whose bounds of the ``column``-th clustering column overlap [low, high]."""
    rows = arctic.sql("SELECT cluster_min, cluster_max FROM db.c.files WHERE store = 'base'").collect()
    return sum(
        1
        for r in rows
        if r.cluster_min.split(", ")[column] <= high and low <= r.cluster_max.split(", ")[column]
    )


def _base_files(arctic) -> int:
    return arctic.sql("SELECT count(*) FROM db.c.files WHERE store = 'base'").collect()[0][0]


def _rows(arctic, where: str = "true") -> list[tuple]:
    return sorted(tuple(r) for r in arctic.sql(f"{ALL} WHERE {where}").collect())


def test_an_ordered_table_skips_the_files_a_date_filter_cannot_match(arctic):
    _create(arctic)
    arctic.sql("ALTER TABLE db.c COMPACT FULL")
    everything, unordered = _rows(arctic), _rows(arctic, DAYS)
    without = _files_read(arctic, DAYS)
    assert without >= 0.9 * _base_files(arctic) >= 32  # key order: almost every file spans the year

    arctic.sql("ALTER TABLE db.c WRITE ORDERED BY (day)")
    arctic.sql("ALTER TABLE db.c COMPACT FULL")
    opened = _files_read(arctic, DAYS)
    assert 0 < opened <= _overlapping(arctic, "2026-03-01", "2026-03-04") and opened * 3 < without
    assert _rows(arctic, DAYS) == unordered and _rows(arctic) == everything
    described = {r[0]: r[1] for r in arctic.sql("DESCRIBE EXTENDED db.c").collect()}
    assert described["Clustering"] == "WRITE ORDERED BY (day)"
    assert "'write.cluster.columns' = 'day'" in arctic.sql("SHOW CREATE TABLE db.c").collect()[0][0]

    # format("arctic") with the filters Spark pushes skips the same files, and returns the same rows.
    low, high = datetime.date(2026, 3, 1), datetime.date(2026, 3, 4)
    pushed = [sds.GreaterThanOrEqual(("day",), low), sds.LessThanOrEqual(("day",), high)]
    assert _dataframe_files_read(arctic, pushed) == opened
    assert _dataframe_files_read(arctic, []) == _base_files(arctic)
    df = arctic.spark.read.format("arctic").load("db.c").where(f"day BETWEEN DATE'{low}' AND DATE'{high}'")
    assert sorted(tuple(r) for r in df.select("id", "day", "customer", "amount").collect()) == unordered

    # Back to key order: the next full optimize reads every file for the filter again.
    arctic.sql("ALTER TABLE db.c WRITE UNORDERED")
    arctic.sql("INSERT INTO db.c VALUES (0, DATE'2026-03-02', 'c000', 0)")
    arctic.sql("ALTER TABLE db.c COMPACT FULL")
    assert "Clustering" not in {r[0] for r in arctic.sql("DESCRIBE EXTENDED db.c").collect()}
    assert _files_read(arctic, DAYS) >= 0.9 * _base_files(arctic)


def _dataframe_files_read(arctic, pushed: list) -> int:
    """The files format("arctic") plans with ``pushed`` filters: the reader Spark gets, planned here."""
    source = type("ArcticDataSource", (ArcticDataSource,), {"spec": CatalogSpec.of(arctic.catalog.iceberg)})
    instance = source({"path": "db.c"})
    reader = instance.reader(instance.schema())
    assert list(reader.pushFilters(pushed)) == pushed  # every filter goes back to Spark
    return partitions.file_count(reader.partitions())


@pytest.mark.parametrize("spark_query", [False, True], ids=["in-memory", "spark-query"])
def test_z_order_on_two_columns_lets_a_filter_on_either_skip(arctic, spark_query):
    # A Spark query merges nodes larger than execute.in-memory-max-bytes: 0 sends every node there.
    _create(arctic, ", 'self-optimizing.execute.in-memory-max-bytes' = '0'" if spark_query else "")
    arctic.sql("ALTER TABLE db.c COMPACT FULL")
    expected = {w: _rows(arctic, w) for w in (DAYS, CUSTOMERS)}
    before = {w: _files_read(arctic, w) for w in (DAYS, CUSTOMERS)}
    arctic.sql("ALTER TABLE db.c CLUSTER BY (day, customer)")
    arctic.sql("ALTER TABLE db.c COMPACT FULL")
    for column, (where, low, high) in enumerate(
        [(DAYS, "2026-03-01", "2026-03-04"), (CUSTOMERS, "c010", "c012")]
    ):
        opened = _files_read(arctic, where)
        assert 0 < opened <= _overlapping(arctic, low, high, column) and opened < before[where] * 0.75, (
            where,
            opened,
            before[where],
        )
        assert _rows(arctic, where) == expected[where]
    assert _rows(arctic).__len__() == ROWS


def test_minor_keeps_key_order_and_changes_still_merge(arctic):
    _create(arctic)
    arctic.sql("ALTER TABLE db.c WRITE LOCALLY ORDERED BY (customer, day)")
    arctic.sql("ALTER TABLE db.c COMPACT FULL")
    arctic.sql("UPDATE db.c SET amount = -1 WHERE id % 7 = 0")
    arctic.sql("DELETE FROM db.c WHERE id % 11 = 0")
    arctic.sql("ALTER TABLE db.c COMPACT MINOR")
    expected = sorted(
        (
            i,
            START + datetime.timedelta(days=i * 7919 % 365),
            f"c{i * 31 % 100:03d}",
            -1 if i % 7 == 0 else i * 3,
        )
        for i in range(ROWS)
        if i % 11
    )
    assert _rows(arctic) == expected
    arctic.sql("ALTER TABLE db.c COMPACT FULL")
    assert _rows(arctic) == expected


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("ALTER TABLE db.c WRITE ORDERED BY (nope)", "Cannot order db.c by 'nope': no such column"),
        ("ALTER TABLE db.c CLUSTER BY (id)", "Cannot order db.c by its primary key only"),
        ("ALTER TABLE db.c CLUSTER BY (st)", "Cannot order db.c by 'st': a struct"),
        ("ALTER TABLE db.c WRITE ORDERED BY (day, day)", "Cannot order db.c by 'day' twice"),
        ("ALTER TABLE db.c SET TBLPROPERTIES ('write.cluster.columns' = 'nope')", "no such column"),
        (
            "ALTER TABLE db.c SET TBLPROPERTIES ('write.cluster.mode' = 'hilbert')",
            "must be one of sort, z-order",
        ),
        ("ALTER TABLE db.c WRITE SORTED BY (day)", "Expecting [LOCALLY] ORDERED BY or UNORDERED"),
        (
            "ALTER TABLE db.c DROP COLUMN day",
            "Cannot drop column 'day' of db.c: optimizing orders its files by it",
        ),
    ],
)
def test_bad_orders_are_refused_in_one_line_and_change_nothing(arctic, statement, message):
    arctic.sql(
        "CREATE TABLE db.c (id BIGINT, day DATE, st STRUCT<x: BIGINT>, PRIMARY KEY (id)) "
        "TBLPROPERTIES ('write.cluster.columns' = 'DAY')"
    )
    before = arctic.sql("SHOW TBLPROPERTIES db.c").collect()
    assert ("write.cluster.columns", "day") in {tuple(r) for r in before}  # spelled as the schema does
    with pytest.raises(ArcticError, match=re.escape(message)) as raised:
        arctic.sql(statement)
    assert "\n" not in str(raised.value)
    assert arctic.sql("SHOW TBLPROPERTIES db.c").collect() == before


def test_an_order_at_create_is_checked(arctic):
    with pytest.raises(ArcticError, match="Cannot order db.c by 'nope': no such column"):
        arctic.sql(
            "CREATE TABLE db.c (id BIGINT, day DATE, PRIMARY KEY (id)) "
            "TBLPROPERTIES ('write.cluster.columns' = 'nope')"
        )
    with pytest.raises(ArcticError, match="a table with a primary key"):
        arctic.sql("CREATE TABLE db.c (id BIGINT, day DATE) TBLPROPERTIES ('write.cluster.columns' = 'day')")
    assert not [r for r in arctic.sql("SHOW TABLES IN db").collect() if r.tableName == "c"]


def test_cluster_by_at_create_and_a_rename_carry_the_order(arctic):
    """Delta's ``CREATE TABLE ... CLUSTER BY (...)`` sets the Z-order ALTER's CLUSTER BY does, and
    renaming an ordered column renames it in the order, in the rename's own commit."""
    arctic.sql(
        "CREATE TABLE db.c (id BIGINT, day DATE, region STRING, PRIMARY KEY (id)) CLUSTER BY (DAY, region)"
    )
    props = {r[0]: r[1] for r in arctic.sql("SHOW TBLPROPERTIES db.c").collect()}
    assert (props["write.cluster.columns"], props["write.cluster.mode"]) == ("day,region", "z-order")
    arctic.sql("ALTER TABLE db.c RENAME COLUMN day TO d")
    props = {r[0]: r[1] for r in arctic.sql("SHOW TBLPROPERTIES db.c").collect()}
    assert props["write.cluster.columns"] == "d,region"
    described = {r[0]: r[1] for r in arctic.sql("DESCRIBE TABLE EXTENDED db.c").collect()}
    assert described["Clustering"] == "CLUSTER BY (d, region)"
    with pytest.raises(ArcticError, match=r"^CREATE TABLE db.e orders its files twice"):
        arctic.sql(
            "CREATE TABLE db.e (id BIGINT, day DATE, PRIMARY KEY (id)) CLUSTER BY (day) "
            "TBLPROPERTIES ('write.cluster.columns' = 'day')"
        )
    with pytest.raises(ArcticError, match=r"^Cannot order db.e by 'nope': no such column"):
        arctic.sql("CREATE TABLE db.e (id BIGINT, day DATE, PRIMARY KEY (id)) CLUSTER BY (nope)")
    assert not [r for r in arctic.sql("SHOW TABLES IN db").collect() if r.tableName == "e"]
