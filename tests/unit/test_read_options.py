"""The arctic format's read options and pushed filters, without Spark: parsing, refusals, and the
conversion of Spark's pushed filters into inclusive pyiceberg filters."""

from __future__ import annotations

import datetime

import pytest
from pyiceberg import expressions as ie
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType
from pyspark.sql import datasource as sds

from arctic_sql.datasource import filters
from arctic_sql.datasource.read_options import parse
from arctic_sql.errors import InvalidArgumentError


def test_options_are_typed_whatever_their_case():
    options = parse(
        {"PATH": "db.t", "readchangefeed": "TRUE", "startingVersion": " 3 ", "maxRowsPerTrigger": "10"}
    )
    assert (options.table, options.read_change_feed, options.starting_version, options.max_rows) == (
        "db.t",
        True,
        3,
        10,
    )
    assert options.has_rate_limit and options.has_start
    assert parse({"startingVersion": "Latest"}).starting_latest


def test_a_word_in_a_version_option_names_a_tag_and_latest_stays_the_streams_word():
    options = parse({"readChangeFeed": "true", "startingVersion": " q3 ", "endingVersion": "5"})
    assert (options.starting_version, options.ending_version, options.starting_latest) == ("q3", 5, False)
    assert parse({"startingVersion": "latest"}).starting_version is None
    with pytest.raises(
        InvalidArgumentError, match="Option startingVersion must be a whole number of at least 0"
    ):
        parse({"startingVersion": "3.5"})


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1048576", 1 << 20),
        (" 512k ", 512 << 10),
        ("64m", 64 << 20),
        ("1g", 1 << 30),
        ("2 GB", 2 << 30),
        ("10b", 10),
    ],
)
def test_max_bytes_per_trigger_takes_sizes_as_spark_writes_them(text, size):
    options = parse({"maxBytesPerTrigger": text})
    assert options.max_bytes == size and options.has_rate_limit


def test_timestamps_without_an_offset_are_utc():
    micros = parse({"timestampAsOf": "2026-01-31 10:00:00"}).timestamp_as_of
    assert micros == int(datetime.datetime(2026, 1, 31, 10, tzinfo=datetime.UTC).timestamp()) * 1_000_000
    assert parse({"timestampAsOf": "2026-01-31T11:00:00+01:00"}).timestamp_as_of == micros
    assert parse({"timestampAsOf": "2026-01-31 10:00:00Z"}).timestamp_as_of == micros


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bogus": "1"}, "Unknown option bogus"),
        ({"maxFilesPerTrigger": "0"}, "maxFilesPerTrigger must be a whole number of at least 1"),
        ({"maxRowsPerTrigger": "-5"}, "maxRowsPerTrigger must be a whole number of at least 1"),
        ({"versionAsOf": "1.5"}, "versionAsOf must be a whole number"),
        ({"maxBytesPerTrigger": "0"}, "maxBytesPerTrigger must be a size of at least 1 byte"),
        ({"maxBytesPerTrigger": "1.5g"}, "maxBytesPerTrigger must be a size"),
        ({"maxBytesPerTrigger": "10 parsecs"}, "maxBytesPerTrigger must be a size"),
        ({"skipOverwrites": "maybe"}, "skipOverwrites must be true or false"),
        ({"startingVersion": "1", "startingTimestamp": "2026-01-01"}, "exclude each other"),
        ({"consumerId": "../x"}, "consumerId must be letters"),
        ({"readChangeFeed": "true", "versionAsOf": "2"}, "readChangeFeed reads a range of versions"),
    ],
)
def test_bad_options_are_one_line_errors(options, message):
    with pytest.raises(InvalidArgumentError, match=message) as caught:
        parse(options)
    assert "\n" not in str(caught.value)


def test_an_unknown_name_passes_schema_but_not_a_reader():
    assert parse({"mergeSchema": "true"}, strict=False).table is None  # a writer's option
    with pytest.raises(InvalidArgumentError, match="Unknown option mergeschema"):
        parse({"mergeSchema": "true"})


def test_batch_and_stream_refuse_each_others_options():
    with pytest.raises(InvalidArgumentError, match="only a stream"):
        parse({"maxVersionsPerTrigger": "2"}).check_batch()
    with pytest.raises(InvalidArgumentError, match="a stream does not take"):
        parse({"readChangeFeed": "true", "endingVersion": "2"}).check_stream("db.t")
    with pytest.raises(InvalidArgumentError, match="readChangeFeed"):
        parse({}).check_stream("db.t")
    with pytest.raises(InvalidArgumentError, match="need readChangeFeed"):
        parse({"startingVersion": "2"}).check_batch()


SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "v", StringType()),
    NestedField(3, "ts", TimestamptzType()),
    identifier_field_ids=[1],
)


def test_pushed_filters_become_inclusive_pyiceberg_filters():
    pushed = [
        sds.EqualTo(("id",), 5),
        sds.In(("v",), ("a", None)),
        sds.StringStartsWith(("v",), "x"),
        sds.Not(sds.EqualTo(("id",), 1)),  # not pruned by: Spark applies it
        sds.EqualTo(("ts",), datetime.datetime(2026, 1, 1)),  # naive: Spark's local time, not pruned by
        sds.GreaterThan(("nope",), 1),
        sds.EqualTo(("id",), "not a number"),
    ]
    assert filters.row_filter(pushed, SCHEMA) == ie.And(
        ie.And(ie.EqualTo("id", 5), ie.In("v", {"a"})), ie.StartsWith("v", "x")
    )
    assert filters.row_filter(pushed, SCHEMA, {"id"}) == ie.EqualTo("id", 5)  # change files: key columns only
    assert filters.row_filter([], SCHEMA) == ie.AlwaysTrue()


def test_change_feed_mode_is_latest_unless_full_and_needs_the_change_feed() -> None:
    assert parse({"readChangeFeed": "true", "startingVersion": "1"}).change_feed_mode == "latest"
    assert parse({"readChangeFeed": "true", "changeFeedMode": " Full "}).change_feed_mode == "full"
    with pytest.raises(
        InvalidArgumentError, match="^Option changeFeedMode must be latest or full, got 'diff'$"
    ):
        parse({"readChangeFeed": "true", "changeFeedMode": "diff"})
    with pytest.raises(InvalidArgumentError, match="changeFeedMode needs readChangeFeed=true"):
        parse({"changeFeedMode": "full"})
