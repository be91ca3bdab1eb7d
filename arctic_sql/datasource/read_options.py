"""The options of ``spark.read.format("arctic")`` and ``readStream``, checked before anything runs.

Names follow Delta's, which Spark users already know. Spark hands a Python data source its options
with lower-cased names, so every name is matched without regard to case. A bad value is one
``InvalidArgumentError`` raised in ``DataSource.schema()``, that is at ``load()``, before any table is
read; unknown names, and what only a batch read or only a stream accepts, are checked when Spark
asks for the reader (query planning, still before any job: ``schema()`` also sees a writer's options).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.reading import full_changes

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql.types import StructType

    from arctic_sql.table.model.table import ArcticTable

CHANGE_TYPE = "_change_type"
CHANGE_VERSION = "_change_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
LATEST = "latest"

_BATCH_ONLY = ("versionAsOf", "timestampAsOf", "endingVersion", "endingTimestamp")
_STREAM_ONLY = (
    "maxVersionsPerTrigger",
    "maxFilesPerTrigger",
    "maxRowsPerTrigger",
    "maxBytesPerTrigger",
    "skipOverwrites",
    "consumerId",
)
_SHARED = (
    "path",
    "table",
    "branch",
    "readChangeFeed",
    "changeFeedMode",
    "startingVersion",
    "startingTimestamp",
)
KNOWN = {name.lower(): name for name in (*_SHARED, *_BATCH_ONLY, *_STREAM_ONLY)}


@dataclass(frozen=True)
class ReadOptions:
    """What a read asks for. Instants are microseconds since the epoch."""

    table: str | None = None
    version_as_of: int | None = None
    tag: str | None = None  # versionAsOf given a tag's name
    timestamp_as_of: int | None = None
    read_change_feed: bool = False
    change_feed_mode: str = full_changes.LATEST  # full: every change with pre-images (full_changes.py)
    starting_version: int | str | None = None  # a str: a tag's name, resolved by resolve_tags
    starting_latest: bool = False  # startingVersion = "latest"
    starting_timestamp: int | None = None
    ending_version: int | str | None = None  # as starting_version
    ending_timestamp: int | None = None
    max_versions: int | None = None
    max_files: int | None = None
    max_rows: int | None = None
    max_bytes: int | None = None
    skip_overwrites: bool = False
    consumer_id: str | None = None

    @property
    def has_start(self) -> bool:
        return (
            self.starting_version is not None or self.starting_latest or self.starting_timestamp is not None
        )

    @property
    def has_rate_limit(self) -> bool:
        return any(v is not None for v in (self.max_versions, self.max_files, self.max_rows, self.max_bytes))

    def check_batch(self) -> None:
        """A batch read: no stream-only option; a change feed names where it starts."""
        _refuse(self, _STREAM_ONLY, "only a stream (spark.readStream) takes")
        if self.starting_latest:
            raise InvalidArgumentError('startingVersion "latest" is only for streams; give a version number')
        if self.read_change_feed and not self.has_start:
            raise InvalidArgumentError("readChangeFeed needs startingVersion or startingTimestamp")
        if not self.read_change_feed and (
            self.has_start or self.ending_version is not None or self.ending_timestamp is not None
        ):
            raise InvalidArgumentError(
                "startingVersion/startingTimestamp/endingVersion/endingTimestamp need readChangeFeed=true"
            )

    def check_stream(self, table: str) -> None:
        """A stream: no batch-only option, and the change columns in its schema."""
        _refuse(self, _BATCH_ONLY, "a stream does not take")
        if not self.read_change_feed:
            raise InvalidArgumentError(
                f'A stream of {table} reads its changes: add .option("readChangeFeed", "true") (Spark asks '
                "a Python data source for its columns without saying whether it reads a stream)"
            )


def _refuse(options: ReadOptions, names: tuple[str, ...], what: str) -> None:
    given = [n for n in names if getattr(options, _FIELDS[n.lower()]) not in (None, False)]
    if given:
        raise InvalidArgumentError(f"Option {given[0]} is not valid here: {what} it")


_FIELDS = {
    "versionasof": "version_as_of",
    "timestampasof": "timestamp_as_of",
    "endingversion": "ending_version",
    "endingtimestamp": "ending_timestamp",
    "maxversionspertrigger": "max_versions",
    "maxfilespertrigger": "max_files",
    "maxrowspertrigger": "max_rows",
    "maxbytespertrigger": "max_bytes",
    "skipoverwrites": "skip_overwrites",
    "consumerid": "consumer_id",
    "lookupbuckets": "lookup_buckets",
    "refreshintervalms": "refresh_interval_ms",
}


def parse(options: Mapping[str, str], *, strict: bool = True) -> ReadOptions:
    """The options checked and typed; InvalidArgumentError for a bad value, or (``strict``) an
    unknown name."""
    given = {k.lower(): v for k, v in options.items()}
    unknown = sorted(k for k in given if k not in KNOWN)
    if unknown and strict:
        raise InvalidArgumentError(
            f"Unknown option {unknown[0]} for the arctic format (known: {', '.join(sorted(KNOWN.values()))})"
        )
    start = given.get("startingversion")
    parsed = ReadOptions(
        table=given.get("path") or given.get("table"),
        version_as_of=None if _is_tag(given.get("versionasof")) else _whole(given, "versionasof", minimum=0),
        tag=given["versionasof"].strip() if _is_tag(given.get("versionasof")) else None,
        timestamp_as_of=_instant(given, "timestampasof"),
        read_change_feed=_flag(given, "readchangefeed"),
        change_feed_mode=full_changes.checked_mode(
            given.get("changefeedmode", full_changes.LATEST), "Option changeFeedMode"
        ),
        starting_version=None
        if start is None or start.strip().lower() == LATEST
        else _version(given, "startingversion"),
        starting_latest=start is not None and start.strip().lower() == LATEST,
        starting_timestamp=_instant(given, "startingtimestamp"),
        ending_version=_version(given, "endingversion"),
        ending_timestamp=_instant(given, "endingtimestamp"),
        max_versions=_whole(given, "maxversionspertrigger", minimum=1),
        max_files=_whole(given, "maxfilespertrigger", minimum=1),
        max_rows=_whole(given, "maxrowspertrigger", minimum=1),
        max_bytes=_size(given, "maxbytespertrigger"),
        skip_overwrites=_flag(given, "skipoverwrites"),
        consumer_id=_consumer(given.get("consumerid")),
    )
    _exclusive(given, "versionasof", "timestampasof")
    _exclusive(given, "startingversion", "startingtimestamp")
    _exclusive(given, "endingversion", "endingtimestamp")
    if "changefeedmode" in given and not parsed.read_change_feed:
        raise InvalidArgumentError("Option changeFeedMode needs readChangeFeed=true")
    if parsed.read_change_feed and (
        parsed.version_as_of is not None or parsed.tag is not None or parsed.timestamp_as_of is not None
    ):
        raise InvalidArgumentError(
            "readChangeFeed reads a range of versions: use startingVersion/endingVersion, "
            "not versionAsOf/timestampAsOf"
        )
    return parsed


def _exclusive(given: Mapping[str, str], first: str, second: str) -> None:
    if first in given and second in given:
        raise InvalidArgumentError(f"Options {KNOWN[first]} and {KNOWN[second]} exclude each other: give one")


def _is_tag(raw: str | None) -> bool:
    """Whether a version option names a tag: a word that starts with a letter or underscore."""
    return raw is not None and re.fullmatch(r"[A-Za-z_]\w*", raw.strip()) is not None


def _version(given: Mapping[str, str], name: str) -> int | str | None:
    """A version number, or a tag's name (resolved against the table when it is read)."""
    raw = given.get(name)
    return raw.strip() if raw is not None and _is_tag(raw) else _whole(given, name, minimum=0)


def _whole(given: Mapping[str, str], name: str, minimum: int) -> int | None:
    raw = given.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise InvalidArgumentError(
            f"Option {KNOWN[name]} must be a whole number of at least {minimum}, got {raw!r}"
        )
    return value


_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
}


def byte_size(text: str) -> int | None:
    """Bytes, as Spark and Delta write them (``1048576``, ``512k``, ``64m``, ``1g``, ``256 mb``); None
    when ``text`` is not such a size of at least one byte."""
    found = re.fullmatch(r"(\d+)\s*([a-z]*)", text.strip().lower())
    if not found or found.group(2) not in _BYTE_UNITS or int(found.group(1)) == 0:
        return None
    return int(found.group(1)) * _BYTE_UNITS[found.group(2)]


def _size(given: Mapping[str, str], name: str) -> int | None:
    raw = given.get(name)
    if raw is None:
        return None
    size = byte_size(raw)
    if size is None:
        raise InvalidArgumentError(
            f"Option {KNOWN[name]} must be a size of at least 1 byte such as 1048576, "
            f"512k, 64m or 1g, got {raw!r}"
        )
    return size


def _flag(given: Mapping[str, str], name: str) -> bool:
    raw = given.get(name)
    if raw is None:
        return False
    if raw.strip().lower() not in ("true", "false"):
        raise InvalidArgumentError(f"Option {KNOWN[name]} must be true or false, got {raw!r}")
    return raw.strip().lower() == "true"


def _instant(given: Mapping[str, str], name: str) -> int | None:
    """An ISO 8601 date or timestamp (``2026-01-31``, ``2026-01-31 10:00:00[.123][+01:00]``; without an
    offset it is UTC), in microseconds since the epoch."""
    raw = given.get(name)
    if raw is None:
        return None
    text = raw.strip().removesuffix(" UTC").replace("Z", "+00:00")
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgumentError(
            f"Option {KNOWN[name]} must be a timestamp such as 2026-01-31 10:00:00 (UTC unless it has an "
            f"offset), got {raw!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    delta = moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _consumer(raw: str | None) -> str | None:
    if raw is None:
        return None
    if not raw or not all(c.isalnum() or c in "-_." for c in raw) or raw.startswith("."):
        raise InvalidArgumentError(f"Option consumerId must be letters, digits, '-', '_' or '.', got {raw!r}")
    return raw


def change_columns() -> StructType:
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    return StructType(
        [
            StructField(CHANGE_TYPE, StringType(), False),
            StructField(CHANGE_VERSION, LongType(), False),
            StructField(COMMIT_TIMESTAMP, TimestampType(), False),
        ]
    )


def output_schema(table: ArcticTable, options: ReadOptions) -> StructType:
    """The columns a read returns: the table's (a change feed adds its change columns, and makes the
    table's columns nullable: a delete carries only the key). A materialized view's hidden state is
    left out: the tasks return the columns asked for, so its rows come without it."""
    from pyspark.sql.types import StructType

    from arctic_sql.table.model.materialized import is_hidden
    from arctic_sql.table.model.schemas import spark_schema

    fields = spark_schema(table.schema, all_nullable=options.read_change_feed).fields
    shown = [f for f in fields if not is_hidden(table.base.properties, f.name)]
    if not options.read_change_feed:
        return StructType(shown)
    return StructType([*shown, *change_columns().fields])
