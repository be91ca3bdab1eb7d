"""``lookup_join(facts, "db.dim", on="k")``: a stream joined with a dimension table that keeps changing.

Every fact meets the dimension as it stands when the fact's micro-batch is planned, the way a Flink
lookup join on Amoro or Paimon meets it, and unlike Spark's stream-static join, which keeps the
file list it found when the query started.

How it runs: the dimension's change stream (``readStream.format("arctic")``, in lookup mode) is
unioned with the facts, and both are grouped by bucket, a node of the dimension's hash-bucket tree
(Spark ``xxhash64`` of the primary key), so a bucket sees its facts together with the changes of
its keys. Per bucket, ``transformWithState`` (lookup_processor.py) keeps the dimension version in
Spark's state store and the rows in a local SQLite cache (lookup_cache.py). So:

- Freshness: the change stream's offsets are taken when a micro-batch is planned; every version
  committed before then is applied before the batch's facts are joined.
- No half-loaded dimension: the stream waits for the dimension's first version; its first batch
  loads every bucket from the table at one version before any fact is joined, and facts that came
  earlier wait in the state store.
- Deterministic replays: the offsets (hence the version) of a batch are in the checkpoint, and the
  bucket's version is in the state store, so a replayed batch joins the same rows.
- Incremental: a batch applies only the changes since the previous batch; a bucket is read from
  the table only on the first batch, or when its cache is gone (a restart on another machine).
- Larger than memory: the caches are on local disk behind a bounded page cache.

A join on the primary key is a point lookup in the fact's bucket; a join on other columns sends
each fact to every bucket, and each answers with its matching rows.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from arctic_sql.datasource.read_options import CHANGE_TYPE, CHANGE_VERSION, LOOKUP_BUCKET
from arctic_sql.datasource.source import installed_spec
from arctic_sql.errors import InvalidArgumentError, UnsupportedOperationError
from arctic_sql.streaming import lookup_processor as proc
from arctic_sql.table.catalog import TableIdentifier

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"

# Options, in the peers' words (Amoro's lookup.reloading.interval, Paimon's lookup.cache-max-memory-size).
BUCKETS, INTERVAL, MEMORY, CACHE_DIR = ("lookup.buckets", "lookup.reloading.interval",
                                        "lookup.cache-max-memory-size", "lookup.cache-dir")
DEFAULTS = {BUCKETS: "16", INTERVAL: "0 s", MEMORY: "256 mb", CACHE_DIR: ""}


def lookup_join(facts: DataFrame, dimension: str, on: str | Sequence[str], how: str = "inner",
                columns: Sequence[str] | None = None, options: Mapping[str, str] | None = None,
                version_column: str | None = None) -> DataFrame:
    """``facts`` (a streaming DataFrame) joined with the current rows of the arctic table ``dimension``.

    ``on``: the column(s) both sides share: the dimension's primary key (a point lookup per fact) or
    any other columns (every matching dimension row). ``how``: ``inner`` (facts without a match are
    dropped) or ``left`` (they keep nulls). ``columns``: the dimension columns to add (default: all
    but the join columns). ``options``: ``lookup.reloading.interval`` (take dimension versions at
    most that often, e.g. ``"10 s"``; default every micro-batch), ``lookup.cache-max-memory-size``
    (memory for cached pages, default ``256 mb``), ``lookup.buckets`` (a power of two, default 16:
    the parallelism of the join), ``lookup.cache-dir`` (where the local caches live; default a
    temporary folder, rebuilt from the table after a restart). ``version_column``: the name of an
    extra column holding the dimension version each fact met (for audits: ``VERSION AS OF`` it
    reads the same dimension rows).

    The result is a streaming DataFrame with the facts' columns followed by the dimension's; any
    sink can consume it (output mode append).
    """
    spark = facts.sparkSession
    if not facts.isStreaming:
        raise InvalidArgumentError("lookup_join joins a stream: facts must be a streaming DataFrame (spark.readStream)")
    if how not in ("inner", "left"):
        raise InvalidArgumentError(f'lookup_join takes how="inner" or how="left", got {how!r}')
    settings = _options(options or {})
    spec = installed_spec(spark)
    table = spec.load_table(dimension)
    name = str(TableIdentifier.parse(dimension, "default"))
    if not table.is_keyed:
        raise UnsupportedOperationError(f"lookup_join needs a dimension with a primary key; {name} has none")
    plan = _plan(facts, table, name, spec, _names(on, "on"), how, columns, settings, version_column)
    _use_rocksdb(spark)
    return _joined(facts, plan, settings[INTERVAL])


def _names(value: str | Sequence[str], what: str) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidArgumentError(f"lookup_join's {what} must name one or more columns, got {value!r}")
    return names


def _options(given: Mapping[str, str]) -> dict:
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise InvalidArgumentError(f"Unknown lookup_join option {unknown[0]} (known: {', '.join(sorted(DEFAULTS))})")
    raw = {**DEFAULTS, **{k: str(v) for k, v in given.items()}}
    buckets = raw[BUCKETS].strip()
    if not buckets.isdigit() or int(buckets) < 1 or int(buckets) & (int(buckets) - 1):
        raise InvalidArgumentError(f"Option {BUCKETS} must be a power of two, got {raw[BUCKETS]!r}")
    cache_dir = raw[CACHE_DIR] or os.path.join(tempfile.gettempdir(), "arctic-lookup", uuid.uuid4().hex)
    return {BUCKETS: int(buckets), INTERVAL: _duration_ms(raw[INTERVAL]), MEMORY: _bytes(raw[MEMORY]),
            CACHE_DIR: os.path.abspath(cache_dir)}


_UNITS_MS = {"ms": 1, "s": 1000, "sec": 1000, "min": 60_000, "h": 3_600_000}
_UNITS_B = {"b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}


def _duration_ms(text: str) -> int:
    found = re.fullmatch(r"\s*(\d+)\s*(ms|s|sec|min|h)?\s*", text.lower())
    if not found:
        raise InvalidArgumentError(f"Option {INTERVAL} must be a duration such as 10 s or 500 ms, got {text!r}")
    return int(found.group(1)) * _UNITS_MS[found.group(2) or "ms"]


def _bytes(text: str) -> int:
    found = re.fullmatch(r"\s*(\d+)\s*(b|kb|mb|gb)?\s*", text.lower())
    if not found or int(found.group(1)) == 0:
        raise InvalidArgumentError(f"Option {MEMORY} must be a size such as 256 mb, got {text!r}")
    return int(found.group(1)) * _UNITS_B[found.group(2) or "b"]


def _plan(facts: DataFrame, table, name: str, spec, on: tuple[str, ...], how: str,  # noqa: ANN001
          columns: Sequence[str] | None, settings: dict, version_column: str | None) -> proc.LookupPlan:
    dim_schema = table.spark_schema
    dim_names, fact_names = dim_schema.fieldNames(), facts.columns
    for column in on:
        if column not in dim_names:
            raise InvalidArgumentError(f"Join column {column} is not a column of {name} ({', '.join(dim_names)})")
        if column not in fact_names:
            raise InvalidArgumentError(f"Join column {column} is not a column of the facts ({', '.join(fact_names)})")
    kept = tuple(c for c in dim_names if c not in on) if columns is None else _names(columns, "columns")
    for column in kept:
        if column not in dim_names:
            raise InvalidArgumentError(f"Column {column} is not a column of {name} ({', '.join(dim_names)})")
    clash = [c for c in kept if c in fact_names]
    if clash:
        raise InvalidArgumentError(f"Column {clash[0]} is in both the facts and {name}: pass columns= without it, "
                                   "or rename it in the facts")
    if version_column is not None and (not version_column or version_column in (*fact_names, *kept)):
        raise InvalidArgumentError(f"version_column must be a new column name, got {version_column!r}")
    primary_key = tuple(table.primary_key)
    _check_hashable(table, primary_key, name)
    if set(on) == set(primary_key):
        on = primary_key  # hashed in the key's declared order, as the tree does
    dim_columns = tuple(dict.fromkeys([*primary_key, *on, *kept]))
    return proc.LookupPlan(
        spec=spec, table=name, table_uuid=str(table.base.metadata.table_uuid), primary_key=primary_key, on=on,
        kept=kept, dim_columns=dim_columns, dim_type=StructType([dim_schema[c] for c in dim_columns]),
        fact_names=tuple(fact_names), output_names=(*fact_names, *kept, *([version_column] if version_column else [])),
        with_version=version_column is not None, left=how == "left",
        buckets=settings[BUCKETS], cache_dir=settings[CACHE_DIR], memory_kib=settings[MEMORY] // 1024)


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


def _use_rocksdb(spark) -> None:  # noqa: ANN001
    """``transformWithState`` keeps its state only in RocksDB (pyspark ships it)."""
    if spark.conf.get(PROVIDER, None) != ROCKSDB:
        log.info("lookup_join: setting %s to RocksDB, the state store transformWithState needs", PROVIDER)
        spark.conf.set(PROVIDER, ROCKSDB)


def _joined(facts: DataFrame, plan: proc.LookupPlan, interval_ms: int) -> DataFrame:
    spark = facts.sparkSession
    mask = F.lit(plan.buckets - 1)
    dim_type = plan.dim_type

    def bucket_of(columns: list[Column]) -> Column:
        return F.xxhash64(*columns).bitwiseAND(mask).cast("int")

    dim = (spark.readStream.format("arctic").option("readChangeFeed", "true")
           .option("lookupBuckets", str(plan.buckets)).option("refreshIntervalMs", str(interval_ms))
           .load(plan.table))
    kind = (F.when(F.col(CHANGE_TYPE) == "version", F.lit(proc.MARKER))
            .when(F.col(CHANGE_TYPE) == "delete", F.lit(proc.DELETE)).otherwise(F.lit(proc.UPSERT)))
    keys = [dim_type[c].dataType for c in plan.on]
    dim_rows = dim.select(
        F.coalesce(F.col(LOOKUP_BUCKET), bucket_of([F.col(c) for c in plan.primary_key])).alias(proc.BUCKET),
        kind.cast("int").alias(proc.KIND),
        F.col(CHANGE_VERSION).alias(proc.VERSION),
        *[F.lit(None).cast(t).alias(f"{proc.KEY_PREFIX}{i}") for i, t in enumerate(keys)],
        F.lit(None).cast(StructType([StructField(f.name, f.dataType) for f in facts.schema])).alias(proc.FACT_COLUMN),
        F.struct(*[F.col(c) for c in plan.dim_columns]).alias(proc.DIM_COLUMN),
    )
    fact_keys = [F.col(c).cast(t) for c, t in zip(plan.on, keys, strict=True)]
    every_bucket = F.explode(F.sequence(F.lit(0), mask))
    fact_rows = facts.select(
        (bucket_of(fact_keys) if plan.on_primary_key else every_bucket).alias(proc.BUCKET),
        F.lit(proc.FACT).alias(proc.KIND),
        F.lit(None).cast("long").alias(proc.VERSION),
        *[k.alias(f"{proc.KEY_PREFIX}{i}") for i, k in enumerate(fact_keys)],
        F.struct(*[F.col(f"`{c}`") for c in facts.columns]).alias(proc.FACT_COLUMN),
        F.lit(None).cast(StructType([StructField(f.name, f.dataType) for f in dim_type])).alias(proc.DIM_COLUMN),
    )
    version = [StructField(plan.output_names[-1], LongType(), True)] if plan.with_version else []
    output = StructType([*[StructField(f.name, f.dataType, True) for f in facts.schema],
                         *[StructField(c, dim_type[c].dataType, True) for c in plan.kept], *version])
    return (fact_rows.unionByName(dim_rows).groupBy(proc.BUCKET)
            .transformWithState(proc.LookupProcessor(plan), output, "Append", "None"))
