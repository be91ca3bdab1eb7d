"""What a lookup join does per bucket and micro-batch: Spark's ``transformWithState`` grouped by bucket.

Each micro-batch brings a bucket its facts, the dimension's changes for its keys, and (when the
dimension moved) a marker naming the version the batch ends at. The bucket's version lives in
Spark's state store, so it is checkpointed with the batch: a replayed batch starts again from the
version before it and gets the same changes and marker, hence joins the same rows. The rows live
in the bucket's local cache (lookup_cache.py), which catches up by applying the changes, or is
rebuilt from the table at the pinned version when it is missing or at another version (a restart
on another machine, a lost temp folder). Facts that come before the dimension's first version wait
in the state store and are joined when it arrives.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from arctic_sql.datasource.source import CatalogSpec
from arctic_sql.streaming.lookup_cache import BucketCache, Entry, Key

log = logging.getLogger(__name__)

# The kinds of rows a bucket receives (column KIND of the operator's input).
FACT, UPSERT, DELETE, MARKER = 0, 1, 2, 3
KIND, VERSION, FACT_COLUMN, DIM_COLUMN = "_lookup_kind", "_lookup_version", "_lookup_fact", "_lookup_dim"
BUCKET, KEY_PREFIX = "_lookup_bucket", "_lookup_key"


@dataclass(frozen=True)
class LookupPlan:
    """Everything a bucket needs, pickled into Spark's Python workers."""

    spec: CatalogSpec
    table: str
    table_uuid: str
    primary_key: tuple[str, ...]
    on: tuple[str, ...]
    kept: tuple[str, ...]  # the dimension columns the output gains
    dim_columns: tuple[str, ...]  # what a dimension row carries: primary key, join columns, kept
    dim_type: StructType  # of dim_columns
    fact_names: tuple[str, ...]
    output_names: tuple[str, ...]
    with_version: bool  # the last output column is the dimension version a fact met
    left: bool
    buckets: int
    cache_dir: str
    memory_kib: int

    @property
    def on_primary_key(self) -> bool:
        return set(self.on) == set(self.primary_key)

    @functools.cached_property
    def signature(self) -> str:
        """What makes two joins' caches interchangeable (computed once per worker)."""
        text = repr((self.table_uuid, self.primary_key, self.on, self.kept, self.dim_type.json(), self.buckets))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def entry(self, values: dict) -> Entry:
        """A dimension row as the cache keeps it."""
        key = tuple(values[c] for c in self.primary_key)
        join = () if self.on_primary_key else tuple(values[c] for c in self.on)
        return key, join, pickle.dumps(tuple(values[c] for c in self.kept), protocol=5)


def open_cache(plan: LookupPlan, bucket: int) -> BucketCache:
    path = os.path.join(plan.cache_dir, plan.signature, f"bucket-{bucket:05d}.sqlite")
    return BucketCache(path, key_width=len(plan.primary_key), join_width=0 if plan.on_primary_key else len(plan.on),
                       signature=plan.signature, memory_kib=plan.memory_kib)


def load_bucket(plan: LookupPlan, bucket: int, version: int) -> Iterator[Entry]:
    """The bucket's rows at ``version``, read from the table: only the files of tree nodes that can
    hold the bucket's keys (the bucket is a node of a tree with ``plan.buckets`` leaves)."""
    from arctic_sql.datasource import partitions
    from arctic_sql.table.format.keyhash_arrow import spark_xxhash64
    from arctic_sql.table.format.tree import DataTreeNode
    from arctic_sql.table.scan import plan_read

    table = plan.spec.load_table(plan.table)
    read = plan_read(table, version)
    node = DataTreeNode(plan.buckets - 1, bucket)

    def mine(files):  # noqa: ANN001, ANN202
        return [f for f in files if DataTreeNode.of_id(f.node_id).is_related(node)]

    output = StructType([table.spark_schema[c] for c in plan.dim_columns])
    for part in partitions.merge_partitions(table, mine(read.base_files), mine(read.change_files)):
        for batch in partitions.read(part, output):
            hashes = spark_xxhash64([batch.column(c) for c in plan.primary_key])
            keep = (hashes & np.uint64(plan.buckets - 1)) == np.uint64(bucket)
            for values in batch.filter(keep).to_pylist():  # the Python values Spark's Row API gives
                yield plan.entry(values)


class LookupProcessor(StatefulProcessor):
    """Per bucket: bring the cache to the batch's dimension version, then join the facts."""

    def __init__(self, plan: LookupPlan) -> None:
        self.plan = plan
        names = plan.output_names
        self.output = Row(*names)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.version = handle.getValueState("version", StructType([StructField("version", LongType())]))
        self.waiting = handle.getListState("waiting", StructType([StructField("fact", BinaryType())]))

    def handleInputRows(self, key: tuple, rows: Iterator[Row], timerValues) -> Iterator[Row]:  # noqa: ANN001, N802, N803
        plan, bucket = self.plan, int(key[0])
        facts: list[tuple[Key, tuple]] = []
        upserts: list[Entry] = []
        deletes: list[Key] = []
        marker = None
        width = len(plan.on)
        for row in rows:
            kind = row[KIND]
            if kind == FACT:
                fact = row[FACT_COLUMN]  # a struct arrives as a dict
                facts.append((tuple(row[f"{KEY_PREFIX}{i}"] for i in range(width)),
                              tuple(fact[c] for c in plan.fact_names)))
            elif kind == UPSERT:
                upserts.append(plan.entry(row[DIM_COLUMN]))
            elif kind == DELETE:
                values = row[DIM_COLUMN]
                deletes.append(tuple(values[c] for c in plan.primary_key))
            else:
                marker = int(row[VERSION])
        pinned = self.version.get()
        previous = None if pinned is None else int(pinned[0])
        if marker is None and previous is None:
            if facts:  # the dimension has no version yet: the facts wait for it
                self.waiting.appendList([(pickle.dumps(f, protocol=5),) for f in facts])
            return
        cache = open_cache(plan, bucket)
        try:
            if marker is not None:
                self._catch_up(cache, bucket, previous, marker, upserts, deletes)
                self.version.update((marker,))
            elif cache.version() != previous:
                self._rebuild(cache, bucket, previous)
            if self.waiting.exists():
                facts = [pickle.loads(f[0]) for f in self.waiting.get()] + facts
                self.waiting.clear()
            yield from self._join(cache, facts, marker if marker is not None else previous)
        finally:
            cache.close()

    def _catch_up(self, cache: BucketCache, bucket: int, previous: int | None, marker: int,
                  upserts: list[Entry], deletes: list[Key]) -> None:
        have = cache.version()
        if have == marker:
            return  # a replayed batch whose changes this cache already took
        if previous is not None and have == previous:
            cache.apply(upserts, deletes, marker)
        else:
            self._rebuild(cache, bucket, marker)

    def _rebuild(self, cache: BucketCache, bucket: int, version: int) -> None:
        log.info("lookup join of %s: loading bucket %d at version %d from the table", self.plan.table, bucket, version)
        cache.reload(load_bucket(self.plan, bucket, version), version)

    def _join(self, cache: BucketCache, facts: list[tuple[Key, tuple]], version: int) -> Iterator[Row]:
        found = cache.lookup([k for k, _ in facts])
        missing = (None,) * len(self.plan.kept)
        tail = (version,) if self.plan.with_version else ()
        make = self.output
        for key, values in facts:
            matches = found.get(key)
            if matches:
                for row in matches:
                    yield make(*values, *pickle.loads(row), *tail)
            elif self.plan.left:
                yield make(*values, *missing, *tail)

    def close(self) -> None:
        pass
