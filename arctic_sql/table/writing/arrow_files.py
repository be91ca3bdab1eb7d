"""Writing a table's Parquet files from Arrow, without Spark: the layout spark_files.py gives Spark's writes.

The DataFrame writer and the streaming sink get Arrow batches in Spark's Python workers, and SQL
DML on a keyed table hands its change rows to ``mapInArrow`` (change_rows.py). Writing them there
with pyarrow, and committing on the driver with pyiceberg, costs no Spark job beyond the write. The files must be indistinguishable from Spark's: the same folders
(``{write}/arctic_p_<i>=<value>/arctic_node=<id>/arctic_op=<kind>/``, Spark's escaping of partition
values), the same names (``part-<task>-<uuid>.c<n>.snappy.parquet``), Iceberg field ids on every
column, rows sorted by the primary key, at most ``max_rows`` rows a file. tests compare one file
written both ways.

A :class:`WriteTarget` is a plain value (pickled to the workers): the store's location, schema,
partition spec, key and bucket count. Nothing here opens a catalog.
"""

from __future__ import annotations

import dataclasses
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg import types as it
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)

from arctic_sql.errors import UnsupportedOperationError
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.format.keyhash_arrow import node_ids, spark_xxhash64
from arctic_sql.table.format.layout import Store
from arctic_sql.table.format.partitioning import SPARK_NULL_PARTITION, helper_name
from arctic_sql.table.format.statistics import statistics_columns

# Key hashes travel in commit messages (8 bytes a row) up to this many rows a file; bigger files are
# checked by reading their key columns.
MAX_HASHED_ROWS = 1_000_000
# Folders of one write sent to an object store at once (write_table): a PUT each, mostly waiting.
OBJECT_STORE_WRITERS = 8
PARALLEL_WRITE_BYTES = 64 << 20
_US_PER_DAY, _US_PER_HOUR = 86_400_000_000, 3_600_000_000
# Characters Spark's ExternalCatalogUtils.escapePathName writes as %XX in a partition directory name.
_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^") | frozenset(chr(c) for c in range(1, 32))


@dataclass(frozen=True)
class WriteTarget:
    """Where and how a write lays out its files: one store of one table."""

    store: str  # base | change
    store_location: str
    schema: Schema
    spec: PartitionSpec
    keys: tuple[str, ...]
    buckets: int  # tree leaves of this store; 0 without a primary key
    max_rows: int
    key_as_int: tuple[bool, ...] = ()  # keys widened from int to bigint (format/keyhash.py)
    sequence: tuple[str, ...] = ()  # sequence.field: a delete row carries these beside its key
    row_group_rows: int | None = None  # write.parquet.row-group-rows (None: pyarrow's default)

    @classmethod
    def of(cls, table, store: str) -> WriteTarget:  # noqa: ANN001 - ArcticTable (no import cycle)
        from arctic_sql.table.writing.spark_files import max_rows_per_file

        settings = table.settings
        target = table.base if store == Store.BASE else table.change
        buckets = (
            settings.base_file_index_hash_bucket
            if store == Store.BASE
            else settings.change_file_index_hash_bucket
        )
        return cls(
            store,
            target.location(),
            table.schema,
            table.spec,
            tuple(table.primary_key),
            buckets if table.primary_key else 0,
            max_rows_per_file(table),
            table.key_as_int,
            tuple(table.merge_engine.sequence) if table.primary_key else (),
            settings.write_parquet_row_group_rows,
        )

    def new_location(self) -> str:
        return layout.new_write_location(self.store_location)

    def arrow_schema(self) -> pa.Schema:
        """The table's columns as Arrow, with field ids, every column nullable (as Spark writes them)."""
        schema = schema_to_pyarrow(self.schema, include_field_ids=True)
        return pa.schema([f.with_nullable(True) for f in schema])


@dataclass(frozen=True)
class WrittenFile:
    """One file a writer wrote: its location, row count and (for files of up to :data:`MAX_HASHED_ROWS`
    rows) the Spark hashes of its keys, so the committer can rule out a key shared between files
    without reading them. ``size`` and ``footer`` (the Parquet footer as written) spare the committer
    reading the file back for its Iceberg statistics (commit.data_files)."""

    path: str
    rows: int
    key_hashes: bytes | None = None  # uint64 per row, any order
    size: int | None = dataclasses.field(default=None, compare=False)
    footer: pq.FileMetaData | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def folder(self) -> str:
        return self.path.rsplit("/", 1)[0]

    @property
    def is_delete(self) -> bool:
        return f"/{layout.OP_COLUMN}={layout.DELETE}/" in self.path


def sidecar_path(path: str) -> str:
    """Where a task keeps the sequence values of a change file's rows, in the file's order, until commit."""
    folder, name = path.rsplit("/", 1)
    return f"{folder}/.{name}.seq"


def escape_path_name(text: str) -> str:
    """Spark's escaping of a partition value in a directory name."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def _micros(column: pa.Array) -> pa.Array:
    """Microseconds since the epoch, UTC for timestamps with a zone, wall clock without (as Spark's helpers)."""
    return pc.cast(column, pa.timestamp("us", tz=column.type.tz)).view(pa.int64())


def _partition_value(column: pa.Array, source_type: it.IcebergType, transform) -> pa.Array:  # noqa: ANN001
    """Iceberg's internal partition value of each row (partitioning.helper_columns, in Arrow)."""
    is_time = isinstance(source_type, (it.TimestampType, it.TimestamptzType))
    is_date = isinstance(source_type, it.DateType)
    if isinstance(transform, IdentityTransform):
        if is_date:
            return column.view(pa.int32())
        return _micros(column) if is_time else column
    if isinstance(transform, (YearTransform, MonthTransform)):
        stamps = pc.cast(column, pa.timestamp("us", tz="UTC")) if is_time and column.type.tz else column
        years = pc.subtract(pc.year(stamps), 1970)
        if isinstance(transform, YearTransform):
            return years.cast(pa.int32())
        return pc.add(pc.multiply(years, 12), pc.subtract(pc.month(stamps), 1)).cast(pa.int32())
    if isinstance(transform, DayTransform):
        if is_date:
            return column.view(pa.int32())
        return pc.floor(pc.divide(_micros(column).cast(pa.float64()), _US_PER_DAY)).cast(pa.int32())
    if isinstance(transform, HourTransform):
        return pc.floor(pc.divide(_micros(column).cast(pa.float64()), _US_PER_HOUR)).cast(pa.int32())
    if isinstance(transform, TruncateTransform):
        if isinstance(source_type, it.StringType):
            return pc.utf8_slice_codeunits(column, 0, transform.width)
        width = transform.width
        return pc.subtract(column, pc.remainder(pc.add(pc.remainder(column, width), width), width))
    if isinstance(transform, BucketTransform):
        from arctic_sql.table.format.bucket_udf import _internal

        bucket = transform.transform(source_type)
        return pa.array([None if v is None else bucket(_internal(v)) for v in column.to_pylist()], pa.int32())
    raise UnsupportedOperationError(f"Partition transform {transform} cannot be written from DataFrames yet")


def directory_text(value: object) -> str:
    """A directory value as Spark's partitioned writes name it."""
    if value is None:
        return SPARK_NULL_PARTITION
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape_path_name(str(value))


def directory_values(table: pa.Table, target: WriteTarget, ops: pa.Array | None) -> dict[str, pa.Array]:
    """Each row's directory values by directory name, in order: partition values, node id, kind of change."""
    values: dict[str, pa.Array] = {}
    for position, field in enumerate(target.spec.fields):
        source = target.schema.find_field(field.source_id)
        column = table.column(source.name).combine_chunks()
        values[helper_name(position)] = _partition_value(column, source.field_type, field.transform)
    if target.keys:
        values[layout.NODE_COLUMN] = pa.array(
            node_ids(
                [table.column(k).combine_chunks() for k in target.keys], target.buckets, target.key_as_int
            )
        )
    if target.store == Store.CHANGE:
        assert ops is not None
        values[layout.OP_COLUMN] = ops
    return values


def folders(table: pa.Table, target: WriteTarget, ops: pa.Array | None) -> dict[str, pa.Array]:
    """The rows (indices) of each folder the write makes, by folder (``""`` for the write's own).

    Rows are grouped by their directory values with Arrow's group-by; only the groups' names are
    formatted in Python."""
    values = directory_values(table, target, ops)
    if not values:
        return {"": pa.array(range(table.num_rows), pa.int64())}
    keyed = pa.table(
        {
            **{f"d{i}": v for i, v in enumerate(values.values())},
            "__row": pa.array(range(table.num_rows), pa.int64()),
        }
    )
    names = [f"d{i}" for i in range(len(values))]
    grouped = keyed.group_by(names, use_threads=False).aggregate([("__row", "list")])
    rows = grouped.column("__row_list").combine_chunks()
    result = {}
    for number, group in enumerate(grouped.select(names).to_pylist()):
        folder = "/".join(f"{d}={directory_text(group[n])}" for d, n in zip(values, names, strict=True))
        result[folder] = rows[number].values
    return result


def write_table(
    rows: pa.Table,
    target: WriteTarget,
    location: str,
    *,
    ops: pa.Array | None = None,
    task: int = 0,
    sidecar: str | None = None,
) -> list[WrittenFile]:
    """Write ``rows`` (the table's columns, as :meth:`WriteTarget.arrow_schema`) under ``location``.

    ``ops`` (change store only) holds each row's kind of change, ``upsert`` or ``delete``.
    ``sidecar`` names a column of ``rows`` that goes, in the file's row order, into a file of its own
    beside each data file (``.<name>.seq``; arrow_tasks.py keeps sequence values there until commit).
    """
    if rows.num_rows == 0:
        return []
    job = uuid.uuid4()

    def one(folder: str, indices: pa.Array) -> list[WrittenFile]:
        group = rows.take(indices)
        if target.keys:
            group = group.take(pc.sort_indices(group, [(k, "ascending") for k in target.keys]))
        return write_folder(group, target, f"{location}/{folder}".rstrip("/"), job, task, sidecar=sidecar)

    groups = list(folders(rows, target, ops).items())
    if len(groups) > 1 and rows.nbytes <= PARALLEL_WRITE_BYTES and storage.is_object_store(location):
        # A small write's time on an object store is its PUTs, one per node folder, each waiting on
        # the network (pyarrow lets go of the GIL): sent side by side, not one after another. (A
        # large write's time is its encoding, and one folder's rows at a time bound its memory.)
        with ThreadPoolExecutor(max_workers=min(OBJECT_STORE_WRITERS, len(groups))) as pool:
            return [f for files in pool.map(lambda g: one(*g), groups) for f in files]
    return [f for folder, indices in groups for f in one(folder, indices)]


def write_folder(
    group: pa.Table,
    target: WriteTarget,
    folder: str,
    job: uuid.UUID,
    task: int,
    *,
    sidecar: str | None = None,
    key_hashes: bool = True,
) -> list[WrittenFile]:
    """Write one folder's rows, already sorted by key, as files of at most ``target.max_rows`` rows.

    ``key_hashes``: record each file's key hashes for the committer (arrow_tasks.py); a write that
    has checked its keys itself (bulk_base_files.py) skips them.
    """
    fs, path = storage.folder(folder)
    scheme = storage.prefix(folder, path)
    written = []
    for count, start in enumerate(range(0, group.num_rows, target.max_rows)):
        part = group.slice(start, target.max_rows)
        name = f"part-{task:05d}-{job}.c{count:03d}.snappy.parquet"
        if sidecar is not None:
            with fs.open_output_stream(sidecar_path(f"{path}/{name}")) as out:
                pq.write_table(part.select([sidecar]), out, store_schema=False)
            part = part.drop_columns([sidecar])
        footer: list[pq.FileMetaData] = []
        with fs.open_output_stream(f"{path}/{name}") as out:
            pq.write_table(
                part,
                out,
                compression="snappy",
                store_schema=False,
                metadata_collector=footer,
                write_statistics=statistics_columns(part.schema),
                row_group_size=target.row_group_rows,
            )
            size = out.tell()
        hashes = _key_hashes(part, target) if key_hashes else None
        written.append(WrittenFile(f"{scheme}{path}/{name}", part.num_rows, hashes, size, footer[0]))
    return written


def _key_hashes(part: pa.Table, target: WriteTarget) -> bytes | None:
    if not target.keys or part.num_rows > MAX_HASHED_ROWS:
        return None
    return spark_xxhash64([part.column(k).combine_chunks() for k in target.keys], target.key_as_int).tobytes()


def conform(rows: pa.Table, target: WriteTarget) -> pa.Table:
    """``rows`` with the table's columns in order and types (missing ones NULL), field ids attached.

    Names are matched case-insensitively; extra columns are dropped (the caller has refused unknown ones).
    """
    schema = target.arrow_schema()
    by_name = {name.lower(): name for name in rows.column_names}
    columns = []
    for field in schema:
        name = by_name.get(field.name.lower())
        if name is None:
            columns.append(pa.nulls(rows.num_rows, field.type))
        else:
            columns.append(_cast(rows.column(name), field))
    return pa.Table.from_arrays(columns, schema=schema)


def _cast(column: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    from arctic_sql.errors import InvalidArgumentError

    if column.type.equals(field.type):
        return column
    try:
        return column.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise InvalidArgumentError(f"Column '{field.name}' cannot be written as {field.type}: {e}") from e


def null_where(rows: pa.Table, mask: np.ndarray, keep: set[str]) -> pa.Table:
    """``rows`` with every column but ``keep`` set to NULL where ``mask`` (delete rows carry only keys)."""
    if not mask.any():
        return rows
    flags = pa.array(mask)
    columns = [
        column if name in keep else pc.if_else(flags, pa.scalar(None, column.type), column)
        for name, column in zip(rows.column_names, rows.columns, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=rows.schema)
