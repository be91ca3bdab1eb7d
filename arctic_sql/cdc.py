"""Change-data-capture feeds turned into rows the arctic sink takes.

Debezium's JSON envelope is what most CDC users have: ``op`` (``c`` create, ``u`` update, ``d``
delete, ``r`` snapshot read), ``before`` and ``after`` (the row's images), ``source.ts_ms`` and,
from some connectors, ``source.lsn``. With its converter's schemas on, the envelope sits under
``payload``. :func:`debezium` turns such a DataFrame (batch or stream) into the row's columns,
``_change_type`` and ``_cdc_sequence``, the order of changes (``ts_ms``, then ``lsn``)::

    changes = spark.readStream.schema(envelope_schema).json("/landing/orders")
    (arctic_sql.cdc.debezium(changes).writeStream.format("arctic")
        .option("sequenceColumn", arctic_sql.cdc.SEQUENCE)
        .option("checkpointLocation", "/checkpoints/orders").start("db.orders"))

Debezium writes dates and timestamps as numbers (days, epoch micros...); cast them after this if the
table's columns are dates or timestamps. Truncate (``t``) and message (``m``) events carry no row and
are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from arctic_sql.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

SEQUENCE = "_cdc_sequence"
CHANGE_TYPE = "_change_type"
_ROW_OPS = ("c", "u", "d", "r")


@dataclass(frozen=True)
class Envelope:
    """Where an envelope schema keeps what :func:`debezium` needs (paths as Spark column names)."""

    prefix: str  # "payload." or ""
    columns: tuple[str, ...]  # the captured table's columns
    has_before: bool
    has_after: bool
    ts_ms: str | None  # source.ts_ms, else the envelope's own ts_ms
    lsn: str | None

    @classmethod
    def of(cls, schema: StructType) -> Envelope:
        """Read the layout from a schema alone (no Spark job, no JVM)."""
        from pyspark.sql.types import StructType

        top = {f.name: f.dataType for f in schema.fields}
        prefix = ""
        payload = top.get("payload")
        if isinstance(payload, StructType):
            top, prefix = {f.name: f.dataType for f in payload.fields}, "payload."
        images = [top.get(n) for n in ("after", "before")]
        if "op" not in top or not any(isinstance(t, StructType) for t in images):
            raise InvalidArgumentError(
                "debezium() needs Debezium envelopes: columns op, before and after "
                "(at the top level or under payload)"
            )
        image = next(t for t in images if isinstance(t, StructType))
        source = top.get("source")
        source_fields = {f.name for f in source.fields} if isinstance(source, StructType) else set()
        ts = (
            f"{prefix}source.ts_ms"
            if "ts_ms" in source_fields
            else (f"{prefix}ts_ms" if "ts_ms" in top else None)
        )
        lsn = f"{prefix}source.lsn" if "lsn" in source_fields else None
        return cls(
            prefix,
            tuple(f.name for f in image.fields),
            isinstance(top.get("before"), StructType),
            isinstance(top.get("after"), StructType),
            ts,
            lsn,
        )


def sequence_text(ts_ms: int | None, lsn: int | None) -> str | None:
    """The order of a change as text that sorts as (ts_ms, lsn) do: what ``_cdc_sequence`` holds."""
    return None if ts_ms is None else f"{ts_ms:020d}{lsn or 0:020d}"


def _sequence(envelope: Envelope) -> Column:
    from pyspark.sql import functions as F

    if envelope.ts_ms is None:
        return F.lit(None).cast("string")
    ts = F.col(envelope.ts_ms).cast("long")
    lsn = F.coalesce(F.col(envelope.lsn).cast("long"), F.lit(0)) if envelope.lsn else F.lit(0)
    return F.when(ts.isNull(), F.lit(None).cast("string")).otherwise(F.format_string("%020d%020d", ts, lsn))


def debezium(df: DataFrame) -> DataFrame:
    """Debezium JSON envelopes (at the top level or under ``payload``) as rows with the captured
    table's columns, ``_change_type`` (``upsert`` or ``delete``) and ``_cdc_sequence``.

    >>> arctic_sql.cdc.debezium(spark.read.json("changes/")).columns
    ['id', 'name', '_change_type', '_cdc_sequence']
    """
    from pyspark.sql import functions as F

    envelope = Envelope.of(df.schema)
    p = envelope.prefix
    op = F.col(f"{p}op")
    columns = []
    for name in envelope.columns:
        after = F.col(f"{p}after.`{name}`") if envelope.has_after else F.lit(None)
        before = F.col(f"{p}before.`{name}`") if envelope.has_before else F.lit(None)
        columns.append(F.when(op == "d", before).otherwise(after).alias(name))
    kind = F.when(op == "d", F.lit("delete")).otherwise(F.lit("upsert")).alias(CHANGE_TYPE)
    return df.where(op.isin(*_ROW_OPS)).select(*columns, kind, _sequence(envelope).alias(SEQUENCE))
