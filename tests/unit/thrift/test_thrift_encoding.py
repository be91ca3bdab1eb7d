"""Row sets and JDBC patterns of the Thrift server, without Spark: what goes on the wire for each type."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from pyspark.sql import Row
from pyspark.sql import types as st
from TCLIService import ttypes as tt

from arctic_sql.thrift.metadata import matcher
from arctic_sql.thrift.results import ResultColumn, hive_string, row_set, table_schema

V6, V5 = tt.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6, tt.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V5


def test_columnar_row_set_has_typed_columns_and_lsb_first_null_bitmaps():
    columns = [
        ResultColumn("id", st.LongType()),
        ResultColumn("s", st.StringType()),
        ResultColumn("d", st.DecimalType(10, 2)),
        ResultColumn("b", st.BooleanType()),
    ]
    rows = [(1, "a", Decimal("1.50"), True)] + [(i, None, None, None) for i in range(2, 10)]
    result = row_set(rows, columns, offset=20, protocol=V6)
    assert result.startRowOffset == 20 and result.rows == []
    ids, strings, decimals, flags = result.columns
    assert ids.i64Val.values == list(range(1, 10)) and ids.i64Val.nulls == b"\x00\x00"
    assert strings.stringVal.values[0] == "a" and strings.stringVal.nulls == b"\xfe\x01"  # rows 1..8 null
    assert decimals.stringVal.values[0] == "1.50"
    assert flags.boolVal.values[0] is True


def test_decimals_are_written_at_their_columns_scale():
    """PySpark hands 0.00000001 of a DECIMAL(20,8) over as Decimal('1.0E-8'): it printed 0.000000010."""
    columns = [
        ResultColumn("d8", st.DecimalType(20, 8)),
        ResultColumn("d10", st.DecimalType(38, 10)),
        ResultColumn("d0", st.DecimalType(38, 0)),
    ]
    rows = [(Decimal("1.0E-8"), Decimal("-1.00E-10"), Decimal("99999999999999999999999999999999999999"))]
    for protocol in (V6, V5):
        result = row_set(rows, columns, offset=0, protocol=protocol)
        texts = (
            [c.stringVal.values[0] for c in result.columns]
            if protocol == V6
            else [v.stringVal.value for v in result.rows[0].colVals]
        )
        assert texts == ["0.00000001", "-0.0000000001", "9" * 38]


def test_old_protocols_get_rows():
    result = row_set(
        [(7, None)], [ResultColumn("i", st.IntegerType()), ResultColumn("s", st.StringType())], 0, V5
    )
    assert result.columns is None
    assert result.rows[0].colVals[0].i32Val.value == 7
    assert result.rows[0].colVals[1].stringVal.value is None


def test_values_render_as_spark_thrift_server_renders_them():
    assert hive_string(dt.datetime(2024, 1, 31, 10, 0, 0, 500000)) == "2024-01-31 10:00:00.5"
    assert hive_string(dt.datetime(2024, 1, 31, 10, 0)) == "2024-01-31 10:00:00"
    assert hive_string(dt.date(2024, 1, 31)) == "2024-01-31"
    assert hive_string(Decimal("1E+3")) == "1000"
    assert hive_string([1, None, "x"]) == '[1,null,"x"]'
    assert hive_string({"k": [True]}) == '{"k":[true]}'
    assert hive_string(Row(a=1, b="q")) == '{"a":1,"b":"q"}'
    assert hive_string(None) is None


def test_schema_carries_decimal_precision_and_positions():
    schema = table_schema([ResultColumn("x", st.DecimalType(12, 3)), ResultColumn("t", st.TimestampType())])
    x, t = schema.columns
    entry = x.typeDesc.types[0].primitiveEntry
    assert entry.type == tt.TTypeId.DECIMAL_TYPE
    assert entry.typeQualifiers.qualifiers["precision"].i32Value == 12
    assert entry.typeQualifiers.qualifiers["scale"].i32Value == 3
    assert (x.position, t.position) == (1, 2)
    assert t.typeDesc.types[0].primitiveEntry.type == tt.TTypeId.TIMESTAMP_TYPE


def test_jdbc_patterns():
    assert matcher("ord%").fullmatch("ORDERS")
    assert matcher("o_ders").fullmatch("orders") and not matcher("o_ders").fullmatch("oders")
    assert not matcher(r"a\_b").fullmatch("axb") and matcher(r"a\_b").fullmatch("a_b")
    assert all(matcher(p).fullmatch("anything") for p in (None, "", "*", "%"))


def test_column_type_names_keep_struct_field_names_as_they_are():
    from arctic_sql.thrift.metadata import type_name

    nested = st.StructType(
        [
            st.StructField("x", st.IntegerType()),
            st.StructField("yName", st.StringType()),
            st.StructField("a b", st.ArrayType(st.MapType(st.StringType(), st.DecimalType(5, 2)))),
        ]
    )
    assert type_name(nested) == "STRUCT<x: INT, yName: STRING, `a b`: ARRAY<MAP<STRING, DECIMAL(5,2)>>>"
    assert type_name(st.DecimalType(10, 2)) == "DECIMAL(10,2)"
