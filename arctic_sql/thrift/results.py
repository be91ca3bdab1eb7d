"""Result sets on the wire: Spark types as HiveServer2 type descriptors, rows as ``TRowSet``.

Types and value renderings follow Spark's own Thrift server (``SparkExecuteStatementOperation`` and
``HiveResult.toHiveString``): numbers and booleans travel as typed columns; decimals, dates and
timestamps as strings (``2024-01-31 10:00:00.5``); arrays, maps and structs as JSON-like strings; binary
as bytes. Protocol V6 and later get columnar row sets with LSB-first null bitmaps, older clients rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

from pyspark.sql import types as st
from TCLIService import ttypes as tt

COLUMNAR_SINCE = tt.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6


@dataclass(frozen=True)
class ResultColumn:
    name: str
    data_type: st.DataType
    comment: str | None = None


def columns_of(schema: st.StructType) -> list[ResultColumn]:
    return [ResultColumn(f.name, f.dataType, (f.metadata or {}).get("comment")) for f in schema.fields]


# types -------------------------------------------------------------------------------------------
_SIMPLE_TYPE_IDS: dict[type, int] = {
    st.NullType: tt.TTypeId.NULL_TYPE,
    st.BooleanType: tt.TTypeId.BOOLEAN_TYPE,
    st.ByteType: tt.TTypeId.TINYINT_TYPE,
    st.ShortType: tt.TTypeId.SMALLINT_TYPE,
    st.IntegerType: tt.TTypeId.INT_TYPE,
    st.LongType: tt.TTypeId.BIGINT_TYPE,
    st.FloatType: tt.TTypeId.FLOAT_TYPE,
    st.DoubleType: tt.TTypeId.DOUBLE_TYPE,
    st.StringType: tt.TTypeId.STRING_TYPE,
    st.DecimalType: tt.TTypeId.DECIMAL_TYPE,
    st.DateType: tt.TTypeId.DATE_TYPE,
    st.TimestampType: tt.TTypeId.TIMESTAMP_TYPE,
    st.TimestampNTZType: tt.TTypeId.TIMESTAMP_TYPE,
    st.BinaryType: tt.TTypeId.BINARY_TYPE,
    st.DayTimeIntervalType: tt.TTypeId.INTERVAL_DAY_TIME_TYPE,
    st.YearMonthIntervalType: tt.TTypeId.INTERVAL_YEAR_MONTH_TYPE,
    st.ArrayType: tt.TTypeId.ARRAY_TYPE,
    st.MapType: tt.TTypeId.MAP_TYPE,
    st.StructType: tt.TTypeId.STRUCT_TYPE,
    st.CharType: tt.TTypeId.CHAR_TYPE,
    st.VarcharType: tt.TTypeId.VARCHAR_TYPE,
}


def type_id(data_type: st.DataType) -> int:
    for spark_class, tid in _SIMPLE_TYPE_IDS.items():
        if isinstance(data_type, spark_class):
            return tid
    return tt.TTypeId.STRING_TYPE  # calendar intervals, variants, ...: rendered as text


def _type_desc(data_type: st.DataType) -> tt.TTypeDesc:
    qualifiers = None
    if isinstance(data_type, st.DecimalType):
        qualifiers = tt.TTypeQualifiers(
            qualifiers={
                "precision": tt.TTypeQualifierValue(i32Value=data_type.precision),
                "scale": tt.TTypeQualifierValue(i32Value=data_type.scale),
            }
        )
    elif isinstance(data_type, (st.CharType, st.VarcharType)):
        qualifiers = tt.TTypeQualifiers(
            qualifiers={
                "characterMaximumLength": tt.TTypeQualifierValue(i32Value=data_type.length),
            }
        )
    entry = tt.TPrimitiveTypeEntry(type=type_id(data_type), typeQualifiers=qualifiers)
    return tt.TTypeDesc(types=[tt.TTypeEntry(primitiveEntry=entry)])


def table_schema(columns: Sequence[ResultColumn]) -> tt.TTableSchema:
    return tt.TTableSchema(
        columns=[
            tt.TColumnDesc(
                columnName=c.name, typeDesc=_type_desc(c.data_type), position=i + 1, comment=c.comment or ""
            )
            for i, c in enumerate(columns)
        ]
    )


# values ------------------------------------------------------------------------------------------
def _timestamp_text(value: dt.datetime) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{value.microsecond:06d}".rstrip("0") if value.microsecond else text


_WIDE = Context(prec=80)  # room for any DECIMAL(38, s) value at its scale


def _decimal_text(value: Decimal, scale: int | None = None) -> str:
    """Plain digits, at the column's scale when known (Spark's ``toPlainString``): PySpark hands
    0.00000001 of a DECIMAL(20,8) over as 1.0E-8, which would print with a digit too many."""
    if scale is not None and value.is_finite():
        value = value.quantize(Decimal(1).scaleb(-scale), context=_WIDE)
    return format(value, "f")


def hive_string(value: Any, nested: bool = False) -> str | None:
    """A value as Spark's Thrift server renders it in a string column (``None`` stays NULL)."""
    if value is None:
        return "null" if nested else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' if nested else value
    if isinstance(value, dt.datetime):
        text = _timestamp_text(value)
    elif isinstance(value, dt.date):
        text = value.isoformat()
    elif isinstance(value, Decimal):
        return _decimal_text(value)
    elif isinstance(value, (bytes, bytearray)):
        text = bytes(value).decode("utf-8", "replace")
    elif isinstance(value, st.Row) and hasattr(value, "__fields__"):
        return "{" + ",".join(f'"{k}":{hive_string(v, True)}' for k, v in zip(value.__fields__, value)) + "}"
    elif isinstance(value, dict):
        return (
            "{" + ",".join(f"{hive_string(k, True)}:{hive_string(v, True)}" for k, v in value.items()) + "}"
        )
    elif isinstance(value, (list, tuple)):
        return "[" + ",".join(hive_string(v, True) or "null" for v in value) + "]"
    else:
        return str(value)
    return f'"{text}"' if nested else text


@dataclass(frozen=True)
class _Encoding:
    column_field: str  # the TColumn field, e.g. "i64Val"
    column_class: type
    value_field: str  # the TColumnValue field for row-based results
    value_class: type
    placeholder: Any  # what a NULL slot holds in a typed column
    convert: Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


def _text(value: Any) -> Any:
    return hive_string(value)


_ENCODINGS: dict[type, _Encoding] = {
    st.BooleanType: _Encoding("boolVal", tt.TBoolColumn, "boolVal", tt.TBoolValue, False, bool),
    st.ByteType: _Encoding("byteVal", tt.TByteColumn, "byteVal", tt.TByteValue, 0, int),
    st.ShortType: _Encoding("i16Val", tt.TI16Column, "i16Val", tt.TI16Value, 0, int),
    st.IntegerType: _Encoding("i32Val", tt.TI32Column, "i32Val", tt.TI32Value, 0, int),
    st.LongType: _Encoding("i64Val", tt.TI64Column, "i64Val", tt.TI64Value, 0, int),
    st.FloatType: _Encoding("doubleVal", tt.TDoubleColumn, "doubleVal", tt.TDoubleValue, 0.0, float),
    st.DoubleType: _Encoding("doubleVal", tt.TDoubleColumn, "doubleVal", tt.TDoubleValue, 0.0, float),
    st.BinaryType: _Encoding("binaryVal", tt.TBinaryColumn, "stringVal", tt.TStringValue, b"", bytes),
}
_STRING = _Encoding("stringVal", tt.TStringColumn, "stringVal", tt.TStringValue, "", _text)


def _encoding(data_type: st.DataType) -> _Encoding:
    if isinstance(data_type, st.DecimalType):
        scale = data_type.scale
        return dataclasses.replace(_STRING, convert=lambda value: _decimal_text(value, scale))
    for spark_class, encoding in _ENCODINGS.items():
        if isinstance(data_type, spark_class):
            return encoding
    return _STRING


def _null_bitmap(values: Sequence[Any]) -> bytes:
    bitmap = bytearray((len(values) + 7) // 8)
    for i, value in enumerate(values):
        if value is None:
            bitmap[i >> 3] |= 1 << (i & 7)
    return bytes(bitmap)


def row_set(
    rows: Sequence[Sequence[Any]], columns: Sequence[ResultColumn], offset: int, protocol: int
) -> tt.TRowSet:
    """``rows`` (tuples in column order) as a row set starting at row ``offset``."""
    encodings = [_encoding(c.data_type) for c in columns]
    if protocol < COLUMNAR_SINCE:
        return tt.TRowSet(
            startRowOffset=offset,
            rows=[tt.TRow(colVals=[_value(e, v) for e, v in zip(encodings, row)]) for row in rows],
        )
    by_column = list(zip(*rows)) if rows else [() for _ in columns]
    result = []
    for encoding, values in zip(encodings, by_column):
        converted = [encoding.placeholder if v is None else encoding.convert(v) for v in values]
        column = encoding.column_class(values=converted, nulls=_null_bitmap(values))
        result.append(tt.TColumn(**{encoding.column_field: column}))
    return tt.TRowSet(startRowOffset=offset, rows=[], columns=result)


def _value(encoding: _Encoding, value: Any) -> tt.TColumnValue:
    if encoding.value_class is tt.TStringValue:
        text = None if value is None else encoding.convert(value)
        return tt.TColumnValue(stringVal=tt.TStringValue(value=text))
    converted = None if value is None else encoding.convert(value)
    return tt.TColumnValue(**{encoding.value_field: encoding.value_class(value=converted)})


def empty_log(protocol: int) -> tt.TRowSet:
    """The operation log (FetchResults with fetchType 1): one string column, no lines."""
    return row_set([], [ResultColumn("operation_log", st.StringType())], 0, protocol)
