"""``lookup_join(facts, "db.dim", on="k")``: a stream joined with a dimension table that keeps changing.

Every fact meets the dimension as it stands when the fact's micro-batch is planned, the way a Flink
lookup join on Amoro or Paimon meets it, and unlike Spark's stream-static join, which keeps the
file list it found when the query started.

How it runs: one stateless ``mapInArrow`` over the facts (lookup_task.py), with no shuffle and no
second source, so a micro-batch costs what its facts cost. Each fact row carries the batch's
timestamp, which Spark fixes when it plans the batch and keeps in the checkpoint's offsets log;
the batch meets the dimension version newest at that moment. The rows are held in local caches,
one SQLite file per bucket of the primary key's hash, which the tasks bring to that version. So:

- Freshness: a version committed before a micro-batch is planned is older than its timestamp.
- No half-loaded dimension: a version is one commit; a batch planned before the dimension's first
  version waits for it, and its facts meet it.
- Deterministic replays: a replayed batch has the same timestamp, hence the same version (written
  down per batch on the machine, so a commit that became visible while the tasks ran cannot split
  them); a restart on another machine rebuilds the caches at that version from the table.
- Incremental: a cache catches up by the changes of the versions since the previous batch, read
  from the change store's files of its bucket; it is loaded from the table only on first use, when
  it is missing, or when the changes in between are gone (expired, or an INSERT OVERWRITE).
- Larger than memory: the caches are on local disk behind a bounded page cache.

A join on the primary key looks each fact up in its key's bucket; a join on other columns asks
every bucket for the rows with the fact's values.
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, NumericType, StructField, StructType

from arctic_sql.datasource.read_options import byte_size
from arctic_sql.datasource.source import installed_spec
from arctic_sql.errors import InvalidArgumentError, UnsupportedOperationError
from arctic_sql.streaming import lookup_task as task
from arctic_sql.table.format.tree import key_hash
from arctic_sql.table.model.identifiers import TableIdentifier

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Options, in the peers' words (Amoro's lookup.reloading.interval, Paimon's lookup.cache-max-memory-size).
BUCKETS, INTERVAL, MEMORY, CACHE_DIR = (
    "lookup.buckets",
    "lookup.reloading.interval",
    "lookup.cache-max-memory-size",
    "lookup.cache-dir",
)
MAX_BUCKETS = 4096  # a file each; a join on other columns asks every one of them per batch
DEFAULTS = {BUCKETS: "16", INTERVAL: "0 s", MEMORY: "256 mb", CACHE_DIR: ""}


def lookup_join(
    facts: DataFrame,
    dimension: str,
    on: str | Sequence[str],
    how: str = "inner",
    columns: Sequence[str] | None = None,
    options: Mapping[str, str] | None = None,
    version_column: str | None = None,
) -> DataFrame:
    """``facts`` (a streaming DataFrame) joined with the current rows of the arctic table ``dimension``.

    ``on``: the column(s) both sides share: the dimension's primary key (a point lookup per fact) or
    any other columns (every matching dimension row). ``how``: ``inner`` (facts without a match are
    dropped) or ``left`` (they keep nulls). ``columns``: the dimension columns to add (default: all
    but the join columns). ``options``: ``lookup.reloading.interval`` (take dimension versions at
    most that often, e.g. ``"10 s"``; default every micro-batch), ``lookup.cache-max-memory-size``
    (the page cache of a worker process's buckets together, default ``256 mb``),
    ``lookup.buckets`` (a power of two, default 16: how many files the cache is split into, each
    caught up or loaded by one task), ``lookup.cache-dir`` (where the local caches live; default a
    temporary folder, rebuilt from the table after a restart). ``version_column``: the name of an
    extra column holding the dimension version each fact met (for audits: ``VERSION AS OF`` it
    reads the same dimension rows).

    The result is a streaming DataFrame with the facts' columns followed by the dimension's; any
    sink can consume it (output mode append).
    """
    spark = facts.sparkSession
    if not facts.isStreaming:
        raise InvalidArgumentError(
            "lookup_join joins a stream: facts must be a streaming DataFrame (spark.readStream)"
        )
    if how not in ("inner", "left"):
        raise InvalidArgumentError(f'lookup_join takes how="inner" or how="left", got {how!r}')
    settings = _options(options or {})
    spec = installed_spec(spark)
    table = spec.load_table(dimension)
    name = str(TableIdentifier.parse(dimension, "default"))
    if not table.is_keyed:
        raise UnsupportedOperationError(f"lookup_join needs a dimension with a primary key; {name} has none")
    plan = _plan(facts, table, name, spec, _names(on, "on"), how, columns, settings, version_column)
    return _joined(facts, plan)


def _names(value: str | Sequence[str], what: str) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, Sequence) else ()
    if not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidArgumentError(f"lookup_join's {what} must name one or more columns, got {value!r}")
    return names


def _options(given: Mapping[str, str]) -> dict:
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise InvalidArgumentError(
            f"Unknown lookup_join option {unknown[0]} (known: {', '.join(sorted(DEFAULTS))})"
        )
    raw = {**DEFAULTS, **{k: str(v) for k, v in given.items()}}
    buckets = raw[BUCKETS].strip()
    if not buckets.isdigit() or not 1 <= int(buckets) <= MAX_BUCKETS or int(buckets) & (int(buckets) - 1):
        raise InvalidArgumentError(
            f"Option {BUCKETS} must be a power of two up to {MAX_BUCKETS}, got {raw[BUCKETS]!r}"
        )
    cache_dir = raw[CACHE_DIR] or os.path.join(tempfile.gettempdir(), "arctic-lookup", uuid.uuid4().hex)
    return {
        BUCKETS: int(buckets),
        INTERVAL: _duration_ms(raw[INTERVAL]),
        MEMORY: _bytes(raw[MEMORY]),
        CACHE_DIR: os.path.abspath(cache_dir),
    }


# Flink's and Spark's spellings of a duration's unit (10 s, 10 sec, 10 seconds, 2 min, 2 minutes, ...)
_UNITS_MS = {
    unit: ms
    for ms, units in (
        (1, ("ms", "milli", "millis", "millisecond", "milliseconds")),
        (1000, ("s", "sec", "secs", "second", "seconds")),
        (60_000, ("m", "min", "mins", "minute", "minutes")),
        (3_600_000, ("h", "hour", "hours")),
        (86_400_000, ("d", "day", "days")),
    )
    for unit in units
}


def _duration_ms(text: str) -> int:
    found = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not found or (found.group(2) and found.group(2) not in _UNITS_MS):
        raise InvalidArgumentError(
            f"Option {INTERVAL} must be a duration such as 10 s, 500 ms or 10 minutes, got {text!r}"
        )
    return int(found.group(1)) * _UNITS_MS[found.group(2) or "ms"]


def _bytes(text: str) -> int:
    size = byte_size(text)
    if size is None:
        raise InvalidArgumentError(f"Option {MEMORY} must be a size such as 256 mb, got {text!r}")
    return size


def _plan(
    facts: DataFrame,
    table,
    name: str,
    spec,
    on: tuple[str, ...],
    how: str,  # noqa: ANN001
    columns: Sequence[str] | None,
    settings: dict,
    version_column: str | None,
) -> task.LookupPlan:
    dim_schema = table.spark_schema
    dim_names, fact_names = dim_schema.fieldNames(), facts.columns
    for column in on:
        if column not in dim_names:
            raise InvalidArgumentError(
                f"Join column {column} is not a column of {name} ({', '.join(dim_names)})"
            )
        if column not in fact_names:
            raise InvalidArgumentError(
                f"Join column {column} is not a column of the facts ({', '.join(fact_names)})"
            )
    kept = tuple(c for c in dim_names if c not in on) if columns is None else _names(columns, "columns")
    for column in kept:
        if column not in dim_names:
            raise InvalidArgumentError(f"Column {column} is not a column of {name} ({', '.join(dim_names)})")
    clash = [c for c in kept if c in fact_names]
    if clash:
        raise InvalidArgumentError(
            f"Column {clash[0]} is in both the facts and {name}: pass columns= without it, "
            "or rename it in the facts"
        )
    if version_column is not None and (not version_column or version_column in (*fact_names, *kept)):
        raise InvalidArgumentError(f"version_column must be a new column name, got {version_column!r}")
    primary_key = tuple(table.primary_key)
    _check_hashable(table, primary_key, name)
    if set(on) == set(primary_key):
        on = primary_key  # hashed in the key's declared order, as the tree does
    dim_columns = tuple(dict.fromkeys([*primary_key, *on, *kept]))
    dim_type = StructType([dim_schema[c] for c in dim_columns])
    version = [StructField(version_column, LongType(), True)] if version_column is not None else []
    output = StructType(
        [
            *[StructField(f.name, f.dataType, True) for f in facts.schema],
            *[StructField(c, dim_type[c].dataType, True) for c in kept],
            *version,
        ]
    )
    return task.LookupPlan(
        spec=spec,
        table=name,
        table_uuid=str(table.base.metadata.table_uuid),
        primary_key=primary_key,
        on=on,
        kept=kept,
        dim_type=dim_type,
        fact_names=tuple(fact_names),
        output_type=output,
        with_version=version_column is not None,
        left=how == "left",
        buckets=settings[BUCKETS],
        interval_ms=settings[INTERVAL],
        cache_dir=settings[CACHE_DIR],
        memory_kib=settings[MEMORY] // 1024,
        key_as_int=table.key_as_int,
    )


def _check_hashable(table, primary_key: tuple[str, ...], name: str) -> None:  # noqa: ANN001
    """The cache finds a bucket's rows in the table by the key's hash, computed in Arrow."""
    import pyarrow as pa
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    from arctic_sql.table.format.keyhash_arrow import spark_xxhash64

    arrow = schema_to_pyarrow(table.schema.select(*primary_key), include_field_ids=False)
    try:
        spark_xxhash64([pa.array([], arrow.field(c).type) for c in primary_key])
    except UnsupportedOperationError as error:
        raise UnsupportedOperationError(f"lookup_join cannot use {name}: {error}") from None


def _key(fact_type: DataType, dim_type: DataType, name: str) -> Column:
    """A fact's join value in the dimension's type. A number that type cannot hold exactly (1.7 for a
    BIGINT key, 1.2345 for DECIMAL(10,2), a BIGINT beyond INT) matches nothing, as in a Spark join,
    which compares in the wider type; other types are cast as they are."""
    column = F.col(f"`{name}`")
    if fact_type == dim_type:
        return column
    if isinstance(fact_type, NumericType) and isinstance(dim_type, NumericType):
        held = column.try_cast(dim_type)
        return F.when(held.cast(fact_type) == column, held)
    return column.cast(dim_type)


def _joined(facts: DataFrame, plan: task.LookupPlan) -> DataFrame:
    """The facts with the columns the tasks need: the batch's timestamp (Spark fixes
    ``current_timestamp()`` per micro-batch), the join key cast to the dimension's types (so both
    sides encode alike), and, on the primary key, its bucket (Spark's ``xxhash64``, as the cache)."""
    keys = [_key(facts.schema[c].dataType, plan.dim_type[c].dataType, c) for c in plan.on]
    helpers = [
        F.current_timestamp().alias(task.TIMESTAMP),
        *[k.alias(f"{task.KEY_PREFIX}{i}") for i, k in enumerate(keys)],
    ]
    if plan.on_primary_key:
        hashed = key_hash(keys, plan.key_as_int)  # ``on`` is the key, in its declared order
        helpers.append(hashed.bitwiseAND(F.lit(plan.buckets - 1)).cast("int").alias(task.BUCKET))
    return facts.select("*", *helpers).mapInArrow(task.LookupTask(plan), plan.output_type)
