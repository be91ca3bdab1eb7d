"""A read whose version expired under it fails with one line naming the version and the file gone
(issue 11, item 7), on both merge-on-read paths."""

from __future__ import annotations

import re

import pytest

from arctic_sql.errors import VersionNotFoundError
from arctic_sql.spark import translate
from arctic_sql.table.maintenance import expiration

pytestmark = pytest.mark.spark


def test_a_read_whose_version_expired_under_it_names_the_version_and_the_file(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")
    arctic.sql("INSERT INTO db.t VALUES (2, 'B')")
    # Merged in Spark tasks, not in the driver (which would read the rows while planning).
    arctic.sql("ALTER TABLE db.t SET TBLPROPERTIES ('merge-on-read.driver-rows-max-bytes' = '0')")
    by_node = arctic.sql("SELECT * FROM db.t VERSION AS OF 1")  # planned and built, not run yet
    as_spark_plan = arctic.read_table(arctic.table("db.t"), version=1, in_memory=False)
    assert "arctic_merge_by_node" in by_node._jdf.queryExecution().toString()
    # Version 1's change files are merged into the base and dropped from the change store; once a
    # newer version is the only one kept, expiration deletes them.
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    assert expiration.expire_change_data(arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1) > 0
    arctic.sql("INSERT INTO db.t VALUES (3, 'c')")
    assert expiration.purge(arctic.table("db.t")).deleted_change_files > 0

    error, raised = _error_of(by_node)
    assert re.fullmatch(
        r"Version 1 of db\.t is no longer readable: file file:/\S+\.parquet was removed by "
        r"snapshot expiration",
        str(error),
    ), str(error)
    assert str(error) in str(raised)  # the Python API shows the same line in Spark's error
    error, _ = _error_of(as_spark_plan)
    assert re.fullmatch(
        r"The version read is no longer readable: file file:/\S+\.parquet was removed by "
        r"snapshot expiration",
        str(error),
    ), str(error)


def _error_of(df) -> tuple[VersionNotFoundError, BaseException]:
    """What running ``df`` raised, translated as the CLI and the Thrift server translate it."""
    with pytest.raises(Exception) as caught:
        df.collect()
    error = translate(caught.value)
    assert isinstance(error, VersionNotFoundError), repr(error)
    return error, caught.value
