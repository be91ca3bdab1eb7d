"""Arrow rows handed to Spark lose no batch: pyspark's createDataFrame stops at the first empty one."""

from __future__ import annotations

import pyarrow as pa

from arctic_sql.table.reading.local_rows import without_empty_batches


def _table(*parts: list[int]) -> pa.Table:
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False)])
    return pa.Table.from_batches(
        [pa.record_batch([pa.array(p, pa.int64())], schema=schema) for p in parts], schema
    )


def test_empty_batches_go_and_every_row_stays_in_order():
    rows = without_empty_batches(_table([], [0], [], [1, 2], []))
    assert [b.num_rows for b in rows.to_batches()] == [1, 2]
    assert rows.column("a").to_pylist() == [0, 1, 2]
    assert rows.schema.field("a").nullable is False


def test_a_table_of_no_rows_keeps_its_schema():
    rows = without_empty_batches(_table([], []))
    assert rows.num_rows == 0 and rows.to_batches() == [] and rows.schema.names == ["a"]
