"""What one task of a lookup join does with its share of a micro-batch's facts (``mapInArrow``).

Every fact row carries the micro-batch's timestamp (Spark's ``current_timestamp()``, which a
streaming query fixes when it plans the batch and keeps in its offsets log, so a replayed batch
gets the same one). The batch meets the dimension version that was newest at that moment
(``pinned_dimension``): every task of the batch, and every replay of it, joins the same rows.

The dimension's rows live in local caches, one SQLite file per bucket (keys whose Spark
``xxhash64`` falls in it; lookup_cache.py). A task brings each bucket its facts need to the pinned
version, by applying the changes of the versions in between, read straight from the change store's
files of that bucket's tree nodes, or by loading the bucket from the table at that version when
its cache is missing, newer, or the changes in between are gone. Tasks on one machine share the
caches; a file lock per bucket lets one task catch a bucket up while the other takes another.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import pickle
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.types import StringType, StructField, StructType

from arctic_sql.datasource.source import CatalogSpec
from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.streaming.lookup_cache import BucketCache, Entry, Key, sql_column
from arctic_sql.table.files import storage

log = logging.getLogger(__name__)

# The helper columns lookup_join adds to the facts for the tasks (never in the output).
TIMESTAMP, BUCKET, KEY_PREFIX = "_lookup_batch_ts", "_lookup_bucket", "_lookup_key"
WAIT_POLL_S = 1.0  # how often a batch planned before the dimension's first version looks for it


@dataclass(frozen=True)
class LookupPlan:
    """Everything a task needs, pickled into Spark's Python workers."""

    spec: CatalogSpec
    table: str
    table_uuid: str
    primary_key: tuple[str, ...]
    on: tuple[str, ...]
    kept: tuple[str, ...]  # the dimension columns the output gains
    dim_type: StructType  # what a dimension row carries: primary key, join columns, kept
    fact_names: tuple[str, ...]
    output_type: StructType  # facts' columns, kept, and the version column when asked for
    with_version: bool  # the last output column is the dimension version a fact met
    left: bool
    buckets: int
    interval_ms: int  # lookup.reloading.interval: a batch meets the version newest at a multiple of it
    cache_dir: str
    memory_kib: int  # lookup.cache-max-memory-size: the page cache a worker process gives all buckets
    key_as_int: tuple[bool, ...] = ()  # key columns widened from int to bigint (format/keyhash.py)

    @property
    def on_primary_key(self) -> bool:
        return set(self.on) == set(self.primary_key)

    @functools.cached_property
    def signature(self) -> str:
        """What makes two joins' caches interchangeable (computed once per worker)."""
        text = repr(
            (
                "rows-as-arrow-values",
                self.table_uuid,
                self.primary_key,
                self.on,
                self.kept,
                self.dim_type.json(),
                self.buckets,
            )
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def folder(self) -> str:
        return os.path.join(self.cache_dir, self.signature)

    @staticmethod
    def keys(rows: pa.RecordBatch, columns: Sequence[str]) -> list[Key]:
        """The rows' values of ``columns`` as SQLite keys (tuples of ``sql_value``)."""
        return list(zip(*(sql_column(rows.column(c).to_pylist()) for c in columns), strict=True))

    def entries(self, rows: pa.RecordBatch) -> list[Entry]:
        """Dimension rows as the cache keeps them: (primary key, join key, the kept values pickled),
        Python values as Arrow gives them, column by column (the keys as SQLite values)."""
        keys = self.keys(rows, self.primary_key)
        joins = [()] * len(keys) if self.on_primary_key else self.keys(rows, self.on)
        kept = (
            zip(*(rows.column(c).to_pylist() for c in self.kept), strict=True)
            if self.kept
            else [()] * len(keys)
        )
        return list(zip(keys, joins, [pickle.dumps(k, protocol=5) for k in kept], strict=True))


# the version a batch meets ------------------------------------------------------------------------
def version_at(commits, ts_ms: int, interval_ms: int) -> int | None:  # noqa: ANN001
    """The dimension version a batch planned at ``ts_ms`` meets: the newest committed at or before
    it (before the last multiple of ``interval_ms``, when set); the first version when the batch
    came before any (its facts waited for it); None when the dimension has no version yet."""
    boundary = ts_ms - ts_ms % interval_ms if interval_ms else ts_ms
    eligible = [c.version for c in commits if c.committed_at_ms <= boundary]
    if eligible:
        return max(eligible)
    return commits[0].version if commits else None


def pinned_dimension(plan: LookupPlan, ts_ms: int) -> Dimension:
    """The dimension at ``version_at`` the batch's timestamp, computed once per batch and machine and
    written down (``pins/<ts>``), so the tasks of one batch and its replays agree even when a commit
    stamped before the batch became visible while they ran. Blocks while the dimension has no version."""
    pins = os.path.join(plan.folder, "pins")
    path = os.path.join(pins, str(ts_ms))
    with contextlib.suppress(FileNotFoundError), open(path) as f:
        return Dimension(plan, int(f.read()))
    from arctic_sql.table.format import versions

    waited = False
    while True:
        table = check_same(plan, plan.spec.load_table(plan.table))
        history = versions.history(table.base, table.change)
        version = version_at(history.commits, ts_ms, plan.interval_ms)
        if version is not None:
            break
        if not waited:
            log.warning("lookup join of %s: waiting for the dimension's first version", plan.table)
            waited = True
        time.sleep(WAIT_POLL_S)  # polling the catalog for the first commit
    os.makedirs(pins, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        f.write(str(version))
    try:
        os.link(temporary, path)  # atomic, and refused when another task pinned first
    except FileExistsError:
        with open(path) as f:
            version = int(f.read())
    finally:
        os.unlink(temporary)
    for name in os.listdir(pins):  # only the newest batch can be replayed
        if name.isdigit() and int(name) < ts_ms:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(pins, name))
    dimension = Dimension(plan, version)
    if any(c.version == version for c in history.commits):  # the table as loaded here has it: keep it
        dimension.__dict__.update(table=table, history=history)  # (Dimension's cached properties)
    return dimension


def check_same(plan: LookupPlan, table):  # noqa: ANN001, ANN201
    """``table``, when it is still the dimension the query was planned on: not dropped and created
    again (its versions start over, and the caches hold the old table's rows), and with the columns
    the join reads under the same names and types (a renamed one would come out NULL). Otherwise the
    query fails, as a change stream does; restarted, it plans on the table as it is then."""
    if str(table.base.metadata.table_uuid) != plan.table_uuid:
        raise InvalidArgumentError(
            f"lookup_join of {plan.table}: the table was dropped and created again since the "
            "query started; restart the query to join the new table"
        )
    now = {f.name: f.dataType for f in table.spark_schema.fields}
    for field in plan.dim_type.fields:
        if now.get(field.name) != field.dataType:
            raise InvalidArgumentError(
                f"lookup_join of {plan.table}: column {field.name} ({field.dataType.simpleString()}) was renamed, "
                "dropped or changed type since the query started; restart the query to join the columns as they are"
            )
    return table


# the buckets' caches ------------------------------------------------------------------------------
_open: dict[str, BucketCache] = {}  # per worker process: SQLite files stay open across batches


def _cache(plan: LookupPlan, bucket: int) -> BucketCache:
    path = os.path.join(plan.folder, f"bucket-{bucket:05d}.sqlite")
    cache = _open.get(path)
    if cache is None or not os.path.exists(path):
        cache = _open[path] = BucketCache(
            path,
            key_width=len(plan.primary_key),
            join_width=0 if plan.on_primary_key else len(plan.on),
            signature=plan.signature,
            memory_kib=plan.memory_kib // plan.buckets,
        )
    return cache


@contextlib.contextmanager
def _locked(plan: LookupPlan, bucket: int, wait: bool) -> Iterator[bool]:
    os.makedirs(plan.folder, exist_ok=True)
    with open(os.path.join(plan.folder, f"bucket-{bucket:05d}.lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class Dimension:
    """The dimension as one task sees it: loaded from the catalog only when a cache must move."""

    def __init__(self, plan: LookupPlan, version: int) -> None:
        self.plan, self.version = plan, version
        self._changes: dict[int, dict[int, tuple[list[Entry], list[Key]]] | None] = {}  # by start version

    @functools.cached_property
    def table(self):  # noqa: ANN201
        return check_same(self.plan, self.plan.spec.load_table(self.plan.table))

    @functools.cached_property
    def history(self):  # noqa: ANN201
        from arctic_sql.table.format import versions

        return versions.history(self.table.base, self.table.change)

    def bring(self, bucket: int) -> BucketCache:
        """The bucket's cache at the pinned version (call with the bucket's lock held)."""
        cache = _cache(self.plan, bucket)
        have = cache.version()
        if have == self.version:
            return cache
        changes = None
        # A change row of a table whose merge engine folds changes is not the key's new row: such a
        # dimension's buckets reload at each version (merge_partitions folds by the engine).
        folds = not self.table.merge_engine.newest_wins
        if have is not None and self.history.first_start <= have < self.version and not folds:
            changes = self._changes_since(have)
        if changes is None:
            log.info(
                "lookup join of %s: loading bucket %d at version %d from the table",
                self.plan.table,
                bucket,
                self.version,
            )
            cache.reload(self._rows(bucket), self.version)
        else:
            upserts, deletes = changes.get(bucket, ([], []))
            cache.apply(upserts, deletes, self.version)
        return cache

    def _mine(self, files, bucket: int) -> list:  # noqa: ANN001
        """The files of tree nodes that can hold the bucket's keys (a bucket is a node of a tree
        with ``plan.buckets`` leaves)."""
        from arctic_sql.table.format.tree import DataTreeNode

        node = DataTreeNode(self.plan.buckets - 1, bucket)
        return [f for f in files if DataTreeNode.of_id(f.node_id).is_related(node)]

    def _batches(self, planned, schema: StructType) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:  # noqa: ANN001
        """The rows of the planned partitions, each batch with its rows' buckets."""
        from arctic_sql.datasource import partitions
        from arctic_sql.table.format.keyhash_arrow import spark_xxhash64

        plan = self.plan
        for part in planned:
            for batch in partitions.read(part, schema):
                hashes = spark_xxhash64([batch.column(c) for c in plan.primary_key], plan.key_as_int)
                yield batch, (hashes & np.uint64(plan.buckets - 1)).astype(np.int64)

    def _rows(self, bucket: int) -> Iterator[Entry]:
        """The bucket's rows at the pinned version, read from the table."""
        from arctic_sql.datasource import partitions
        from arctic_sql.table.reading.scan import plan_read

        read = plan_read(self.table, self.version)
        planned = partitions.merge_partitions(
            self.table, self._mine(read.base_files, bucket), self._mine(read.change_files, bucket)
        )
        for batch, buckets in self._batches(planned, self.plan.dim_type):
            yield from self.plan.entries(batch.filter(pa.array(buckets == bucket)))

    def _changes_since(self, have: int) -> dict[int, tuple[list[Entry], list[Key]]] | None:
        """Per bucket, the upserts and deletes of the versions in ``(have, pinned]``, read once for
        every bucket (the buckets of one task are usually all at one version); None when they cannot
        be read as changes (an INSERT OVERWRITE or rollback in between)."""
        if have not in self._changes:
            self._changes[have] = self._read_changes(have)
        return self._changes[have]

    def _read_changes(self, have: int) -> dict[int, tuple[list[Entry], list[Key]]] | None:
        from arctic_sql.datasource import partitions
        from arctic_sql.table.reading.changes import Range, change_files

        try:
            files = change_files(self.table, Range(have, self.version), history=self.history)
        except VersionNotFoundError:
            return None
        schema = StructType([*self.plan.dim_type.fields, StructField("_change_type", StringType())])
        found: dict[int, tuple[list[Entry], list[Key]]] = {}
        for batch, buckets in self._batches(partitions.change_partitions(self.table, files, {}), schema):
            deleted = np.asarray(
                batch.column("_change_type").to_numpy(zero_copy_only=False) == partitions.DELETE
            )
            for bucket in np.unique(buckets).tolist():
                upserts, deletes = found.setdefault(bucket, ([], []))
                mine = buckets == bucket
                upserts.extend(self.plan.entries(batch.filter(pa.array(mine & ~deleted))))
                deletes.extend(self.plan.keys(batch.filter(pa.array(mine & deleted)), self.plan.primary_key))
        return found


# the task ----------------------------------------------------------------------------------------
class LookupTask:
    """``mapInArrow``'s function: the facts of one partition joined with the pinned version."""

    def __init__(self, plan: LookupPlan) -> None:
        self.plan = plan

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        plan = self.plan
        storage.configure(plan.spec.storage())  # a task: this process may never have opened the catalog
        output = to_arrow_schema(plan.output_type, timezone="UTC")
        dimension = None
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if dimension is None:
                dimension = pinned_dimension(plan, batch.column(TIMESTAMP)[0].value // 1000)
            yield self._join(dimension, batch, output)

    def _join(self, dimension: Dimension, batch: pa.RecordBatch, output: pa.Schema) -> pa.RecordBatch:
        plan = self.plan
        keys = plan.keys(batch, [f"{KEY_PREFIX}{i}" for i in range(len(plan.on))])
        if plan.on_primary_key:
            buckets = batch.column(BUCKET).to_numpy()
            wanted = {int(b): [keys[i] for i in np.flatnonzero(buckets == b)] for b in np.unique(buckets)}
        else:  # any bucket may hold rows with these join values
            wanted = dict.fromkeys(range(plan.buckets), keys)
        found = self._lookup(dimension, wanted)
        take: list[int] = []
        rows: list[tuple | None] = []
        for i, key in enumerate(keys):
            matches = found.get(key)
            if matches:
                for row in matches:
                    take.append(i)
                    rows.append(pickle.loads(row))
            elif plan.left:
                take.append(i)
                rows.append(None)
        facts = batch.select(list(plan.fact_names)).take(pa.array(take, pa.int64()))
        columns = list(facts.columns)
        for j, name in enumerate(plan.kept):
            columns.append(pa.array([None if r is None else r[j] for r in rows], output.field(name).type))
        if plan.with_version:
            columns.append(pa.array(np.full(len(take), dimension.version, np.int64)))
        return pa.RecordBatch.from_arrays(columns, schema=output)

    def _lookup(self, dimension: Dimension, wanted: dict[int, list[Key]]) -> dict[Key, list[bytes]]:
        """Each bucket brought to the pinned version and asked for its keys, under its lock: the
        buckets another task holds are taken after the free ones, so two tasks catch up in parallel."""
        found: dict[Key, list[bytes]] = {}

        def ask(bucket: int) -> None:
            for key, rows in dimension.bring(bucket).lookup(wanted[bucket]).items():
                found.setdefault(key, []).extend(rows)

        pending = list(wanted)
        while pending:
            free = []
            for bucket in pending:
                with _locked(self.plan, bucket, wait=False) as held:
                    if held:
                        ask(bucket)
                        free.append(bucket)
            pending = [b for b in pending if b not in free]
            if pending and not free:  # another task holds every one left: wait for the first
                with _locked(self.plan, pending[0], wait=True):
                    ask(pending.pop(0))
        return found
