"""Spark <-> Iceberg schemas.

Spark-written Parquet carries no Iceberg field ids unless the Spark schema says so. arctic-sql
puts each Iceberg field id into the Spark field metadata (``parquet.field.id``) on write and reads
with ``spark.sql.parquet.fieldId.read.enabled``, so renamed and dropped columns resolve by id and
old files stay readable after schema evolution, as in Iceberg.
"""

from __future__ import annotations

from pyiceberg import types as it
from pyiceberg.schema import Schema
from pyspark.sql import types as st

from arctic_sql.errors import InvalidArgumentError

FIELD_ID_KEY = "parquet.field.id"

_PRIMITIVE_TO_ICEBERG: dict[type, it.IcebergType] = {
    st.BooleanType: it.BooleanType(),
    st.ByteType: it.IntegerType(),
    st.ShortType: it.IntegerType(),
    st.IntegerType: it.IntegerType(),
    st.LongType: it.LongType(),
    st.FloatType: it.FloatType(),
    st.DoubleType: it.DoubleType(),
    st.StringType: it.StringType(),
    st.VarcharType: it.StringType(),
    st.CharType: it.StringType(),
    st.BinaryType: it.BinaryType(),
    st.DateType: it.DateType(),
    st.TimestampType: it.TimestamptzType(),
    st.TimestampNTZType: it.TimestampType(),
}


class _Ids:
    def __init__(self) -> None:
        self.last = 0

    def next(self) -> int:
        self.last += 1
        return self.last


def to_iceberg_type(data_type: st.DataType, ids: _Ids, where: str) -> it.IcebergType:
    if isinstance(data_type, st.DecimalType):
        return it.DecimalType(data_type.precision, data_type.scale)
    if isinstance(data_type, st.StructType):
        fields = [
            it.NestedField(
                ids.next(), f.name, to_iceberg_type(f.dataType, ids, f"{where}.{f.name}"), required=False
            )
            for f in data_type.fields
        ]
        return it.StructType(*fields)
    if isinstance(data_type, st.ArrayType):
        element_id = ids.next()
        element = to_iceberg_type(data_type.elementType, ids, where)
        return it.ListType(element_id, element, element_required=False)
    if isinstance(data_type, st.MapType):
        key_id, value_id = ids.next(), ids.next()
        return it.MapType(
            key_id,
            to_iceberg_type(data_type.keyType, ids, where),
            value_id,
            to_iceberg_type(data_type.valueType, ids, where),
            value_required=False,
        )
    for spark_type, iceberg_type in _PRIMITIVE_TO_ICEBERG.items():
        if isinstance(data_type, spark_type):
            return iceberg_type
    raise InvalidArgumentError(
        f"Column '{where}' has type {data_type.simpleString()}, which tables cannot store"
    )


def iceberg_schema(
    spark_schema: st.StructType, required: set[str], identifier: list[str], docs: dict[str, str] | None = None
) -> Schema:
    """An Iceberg schema for a Spark schema, with ``required`` columns not null, key fields set and
    ``docs`` (column comments) as the fields' docs."""
    ids = _Ids()
    top = [ids.next() for _ in spark_schema.fields]
    fields = [
        it.NestedField(
            fid,
            f.name,
            to_iceberg_type(f.dataType, ids, f.name),
            required=f.name in required,
            doc=(docs or {}).get(f.name),
        )
        for fid, f in zip(top, spark_schema.fields, strict=True)
    ]
    by_name = {f.name: f.field_id for f in fields}
    return Schema(*fields, identifier_field_ids=[by_name[k] for k in identifier])


def to_spark_type(iceberg_type: it.IcebergType) -> st.DataType:
    if isinstance(iceberg_type, it.StructType):
        return st.StructType([_spark_field(f) for f in iceberg_type.fields])
    if isinstance(iceberg_type, it.ListType):
        return st.ArrayType(to_spark_type(iceberg_type.element_type), containsNull=True)
    if isinstance(iceberg_type, it.MapType):
        return st.MapType(to_spark_type(iceberg_type.key_type), to_spark_type(iceberg_type.value_type), True)
    if isinstance(iceberg_type, it.DecimalType):
        return st.DecimalType(iceberg_type.precision, iceberg_type.scale)
    simple: dict[type, st.DataType] = {
        it.BooleanType: st.BooleanType(),
        it.IntegerType: st.IntegerType(),
        it.LongType: st.LongType(),
        it.FloatType: st.FloatType(),
        it.DoubleType: st.DoubleType(),
        it.StringType: st.StringType(),
        it.BinaryType: st.BinaryType(),
        it.DateType: st.DateType(),
        it.TimestamptzType: st.TimestampType(),
        it.TimestampType: st.TimestampNTZType(),
        it.UUIDType: st.StringType(),
        it.FixedType: st.BinaryType(),
    }
    for iceberg_class, spark_type in simple.items():
        if isinstance(iceberg_type, iceberg_class):
            return spark_type
    raise InvalidArgumentError(f"Iceberg type {iceberg_type} has no Spark equivalent")


def _spark_field(field: it.NestedField, force_nullable: bool = False) -> st.StructField:
    return st.StructField(
        field.name,
        to_spark_type(field.field_type),
        nullable=force_nullable or not field.required,
        metadata={FIELD_ID_KEY: field.field_id, **({"comment": field.doc} if field.doc else {})},
    )


def spark_schema(schema: Schema, *, all_nullable: bool = False) -> st.StructType:
    """The Spark schema (with field ids in metadata) of an Iceberg schema."""
    return st.StructType([_spark_field(f, all_nullable) for f in schema.fields])


def type_string(iceberg_type: it.IcebergType) -> str:
    """How DESCRIBE shows a column type: Spark's names, as Spark users know them."""
    return to_spark_type(iceberg_type).simpleString()


def prunable_columns(schema: Schema) -> list[str]:
    """The top-level columns whose file and row-group bounds may prune a filter: all but FLOAT and
    DOUBLE. Spark orders NaN above every number and equal to itself, while Parquet statistics and
    Iceberg bounds leave NaN out, so ``d > 1.0`` or ``d = NaN`` would skip a file that holds a NaN."""
    return [f.name for f in schema.fields if not isinstance(f.field_type, it.FloatType | it.DoubleType)]


_DATETIMES = (st.DateType, st.TimestampType, st.TimestampNTZType)


def store_assignable(source: st.DataType, target: st.DataType) -> bool:
    """Whether a value of ``source`` may be written into a column of ``target``: Spark's ANSI store
    assignment (what ``INSERT`` and ``insertInto`` allow), so a DataFrame written to an arctic table
    is held to what a Spark table would take: numbers into numbers (overflow fails at run time), any
    atomic value into a string, dates and timestamps into one another; never a string into a number
    or a date, or a boolean into a number."""
    if source == target or isinstance(source, st.NullType):
        return True
    if isinstance(source, st.NumericType) and isinstance(target, st.NumericType):
        return True
    if isinstance(target, st.StringType):
        return isinstance(source, st.AtomicType)
    if isinstance(source, _DATETIMES) and isinstance(target, _DATETIMES):
        return True
    if isinstance(source, st.ArrayType) and isinstance(target, st.ArrayType):
        return store_assignable(source.elementType, target.elementType)
    if isinstance(source, st.MapType) and isinstance(target, st.MapType):
        return store_assignable(source.keyType, target.keyType) and store_assignable(
            source.valueType, target.valueType
        )
    if isinstance(source, st.StructType) and isinstance(target, st.StructType):
        return len(source.fields) == len(target.fields) and all(
            store_assignable(s.dataType, t.dataType)
            for s, t in zip(source.fields, target.fields, strict=True)
        )
    if isinstance(source, st.DayTimeIntervalType | st.YearMonthIntervalType):
        return type(source) is type(target)
    return False
