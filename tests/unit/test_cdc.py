"""Debezium envelopes: where their parts are, and the order of changes (no Spark needed)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from arctic_sql.cdc import Envelope, sequence_text
from arctic_sql.errors import InvalidArgumentError

ROW = StructType([StructField("id", LongType()), StructField("name", StringType())])
SOURCE = StructType([StructField("ts_ms", LongType()), StructField("lsn", LongType())])
ENVELOPE = StructType(
    [
        StructField("before", ROW),
        StructField("after", ROW),
        StructField("source", SOURCE),
        StructField("op", StringType()),
        StructField("ts_ms", LongType()),
    ]
)


def test_a_bare_envelope_names_its_columns_and_orders_by_source_ts_then_lsn():
    envelope = Envelope.of(ENVELOPE)
    assert envelope == Envelope("", ("id", "name"), True, True, "source.ts_ms", "source.lsn")


def test_an_envelope_under_payload_with_schemas_on():
    wrapped = StructType([StructField("schema", StringType()), StructField("payload", ENVELOPE)])
    assert Envelope.of(wrapped).prefix == "payload."
    assert Envelope.of(wrapped).ts_ms == "payload.source.ts_ms"


def test_without_source_the_envelope_timestamp_orders_and_lsn_is_optional():
    bare = StructType([f for f in ENVELOPE.fields if f.name != "source"])
    envelope = Envelope.of(bare)
    assert (envelope.ts_ms, envelope.lsn) == ("ts_ms", None)


def test_something_else_is_refused_in_one_line():
    with pytest.raises(InvalidArgumentError, match="needs Debezium envelopes"):
        Envelope.of(ROW)


def test_sequence_text_sorts_as_ts_then_lsn():
    changes = [(1700000000001, 5), (1700000000000, 99), (1700000000001, None), (999, 10**18)]
    ordered = sorted(changes, key=lambda c: (c[0], c[1] or 0))
    assert sorted(changes, key=lambda c: sequence_text(*c)) == ordered
    assert sequence_text(None, 5) is None
