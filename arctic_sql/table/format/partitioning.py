"""Partition specs: built from ``PARTITIONED BY``, computed in Spark, read back from file paths.

Writers add one helper column per partition field holding Iceberg's *internal* partition value
(days since epoch, micros, bucket number, ...), computed in Spark so no row goes through Python
except for the ``bucket`` transform, whose Murmur3 hash Spark lacks. Spark's ``partitionBy`` then
puts each value in the file's directory name, and the committer reads the values back from the path
to build the Iceberg partition record: no footer or row needs to be read for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import unquote

from pyiceberg import types as it
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.typedef import Record

from arctic_sql.errors import InvalidArgumentError

HELPER_PREFIX = "arctic_p_"
SPARK_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
FIRST_PARTITION_FIELD_ID = 1000


@dataclass(frozen=True)
class PartitionTerm:
    """One entry of PARTITIONED BY: a transform name, its source column and an optional width."""

    transform: str  # identity, years, months, days, hours, bucket, truncate
    column: str
    width: int | None = None


_TIME_TRANSFORMS: dict[str, Transform] = {
    "years": YearTransform(),
    "months": MonthTransform(),
    "days": DayTransform(),
    "hours": HourTransform(),
}
_ALIASES = {"year": "years", "month": "months", "day": "days", "hour": "hours", "date": "days"}


def build_spec(terms: list[PartitionTerm], schema: Schema) -> PartitionSpec:
    fields = []
    for position, term in enumerate(terms):
        name = _ALIASES.get(term.transform, term.transform)
        try:
            source = schema.find_field(term.column, case_sensitive=False)
        except ValueError:
            raise InvalidArgumentError(
                f"Partition column '{term.column}' is not a column of the table"
            ) from None
        transform: Transform
        if name == "identity":
            transform, field_name = IdentityTransform(), source.name
        elif name in _TIME_TRANSFORMS:
            transform, field_name = _TIME_TRANSFORMS[name], f"{source.name}_{name[:-1]}"
        elif name == "bucket" and term.width:
            transform, field_name = BucketTransform(term.width), f"{source.name}_bucket"
        elif name == "truncate" and term.width:
            transform, field_name = TruncateTransform(term.width), f"{source.name}_trunc"
        elif name in ("bucket", "truncate"):
            what = "number of buckets" if name == "bucket" else "width"
            shown = (
                f"{name}({term.width}, {source.name})" if term.width is not None else f"{name}({source.name})"
            )
            raise InvalidArgumentError(
                f"Partition transform {shown} needs a positive {what}, not {term.width}"
            )
        else:
            raise InvalidArgumentError(f"Unknown partition transform '{term.transform}'")
        if not transform.can_transform(source.field_type):
            raise InvalidArgumentError(
                f"Partition transform {name} cannot apply to column '{source.name}' of type {source.field_type}"
            )
        if isinstance(transform, TruncateTransform) and isinstance(source.field_type, it.DecimalType):
            raise InvalidArgumentError("Partition transform truncate on a decimal column is not supported")
        fields.append(
            PartitionField(source.field_id, FIRST_PARTITION_FIELD_ID + position, transform, field_name)
        )
    return PartitionSpec(*fields)


def helper_name(position: int) -> str:
    return f"{HELPER_PREFIX}{position}"


def helper_columns(spec: PartitionSpec, schema: Schema):  # -> list[Column]
    """Spark columns with Iceberg's internal partition values, named ``arctic_p_<position>``."""
    from pyspark.sql import functions as F

    columns = []
    for position, field in enumerate(spec.fields):
        source = schema.find_field(field.source_id)
        col = F.col(f"`{source.name}`")
        transform, source_type = field.transform, source.field_type
        is_tz = isinstance(source_type, it.TimestamptzType)
        is_ts = is_tz or isinstance(source_type, it.TimestampType)
        # Iceberg's time transforms work on UTC; Spark renders TIMESTAMP in the session time zone.
        utc = F.expr(f"to_utc_timestamp(`{source.name}`, current_timezone())") if is_tz else col
        if isinstance(transform, IdentityTransform):
            if isinstance(source_type, it.DateType):
                value = F.expr(f"unix_date(`{source.name}`)")
            elif is_ts:
                value = _micros(source.name, is_tz)
            else:
                value = col
        elif isinstance(transform, YearTransform):
            value = F.year(utc) - 1970
        elif isinstance(transform, MonthTransform):
            value = (F.year(utc) - 1970) * 12 + F.month(utc) - 1
        elif isinstance(transform, DayTransform):
            if isinstance(source_type, it.DateType):
                value = F.expr(f"unix_date(`{source.name}`)")
            else:
                value = F.floor(_micros(source.name, is_tz) / 86_400_000_000).cast("int")
        elif isinstance(transform, HourTransform):
            value = F.floor(_micros(source.name, is_tz) / 3_600_000_000).cast("int")
        elif isinstance(transform, TruncateTransform):
            w = transform.width
            value = (
                F.substring(col, 1, w)
                if isinstance(source_type, it.StringType)
                else col - F.pmod(col, F.lit(w))
            )
        elif isinstance(transform, BucketTransform):
            from arctic_sql.table.format.bucket_udf import bucket_udf

            value = bucket_udf(source_type, transform.num_buckets)(col)
        else:  # pragma: no cover - build_spec admits no other transform
            raise InvalidArgumentError(f"Unsupported partition transform {transform}")
        columns.append(value.alias(helper_name(position)))
    return columns


def _micros(column: str, is_tz: bool):
    from pyspark.sql import functions as F

    if is_tz:
        return F.expr(f"unix_micros(`{column}`)")
    return F.expr(f"unix_micros(to_utc_timestamp(cast(`{column}` as timestamp), current_timezone()))")


def record_from_path(path: str, spec: PartitionSpec, schema: Schema) -> Record:
    """The partition record of a file written with the helper columns, from its directory names."""
    if not spec.fields:
        return Record()
    found: dict[str, str] = {}
    for segment in path.split("/"):
        if segment.startswith(HELPER_PREFIX) and "=" in segment:
            name, text = segment.split("=", 1)
            found[name] = text
    values = []
    for position, field in enumerate(spec.fields):
        raw = found.get(helper_name(position))
        if raw is None:
            raise ValueError(f"file {path} has no partition directory for {field.name}")
        values.append(_parse_value(unquote(raw), field, schema))
    return Record(*values)


def _parse_value(text: str, field: PartitionField, schema: Schema) -> object:
    if text == SPARK_NULL_PARTITION:
        return None
    result_type = field.transform.result_type(schema.find_field(field.source_id).field_type)
    if isinstance(
        result_type, (it.IntegerType, it.LongType, it.DateType, it.TimestampType, it.TimestamptzType)
    ):
        return int(text)
    if isinstance(result_type, it.BooleanType):
        return text == "true"
    if isinstance(result_type, (it.FloatType, it.DoubleType)):
        return float(text)
    if isinstance(result_type, it.DecimalType):
        return Decimal(text)
    return text


def partition_path(spec: PartitionSpec, schema: Schema, record: Record) -> str:
    """A stable, readable key of a partition (``""`` when unpartitioned), used for watermarks."""
    if not spec.fields:
        return ""
    return spec.partition_to_path(record, schema)
