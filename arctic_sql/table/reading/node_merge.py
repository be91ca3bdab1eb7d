"""The merge rule over Arrow tables, one tree node at a time.

Base and change files are bucketed by the hash of the primary key (DESIGN "The tree"), so a key's
rows all lie in one node: a node's files merge alone, with no shuffle. Within the node the rule of
DESIGN "Transactions and order" applies: per key, the change with the highest transaction wins
over older changes and over the base, and a winning delete removes the key. A table whose merge
engine is another (``merge-engine``, ``sequence.field``) folds the changed keys' rows with
``engine_fold`` instead; the unchanged keys' base rows pass through either way.

Each change table carries a *tag*, ``transaction * 2 + (1 if a delete)``: one number that orders by
transaction and tells the kind. Only the change rows are sorted (by key, newest first); the base is
filtered by the set of changed keys and keeps its order, as the pyarrow baseline of figure L1 does.

Files are read through pyiceberg's ``ArrowScan``, which resolves columns by Iceberg field id, so
files written before a rename, drop or added column come back in the current schema; written files
carry the field ids of ``schema_to_pyarrow``.
"""

from __future__ import annotations

import functools
import operator
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import bind
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import ArrowScan, expression_to_pyarrow, schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import NestedField

from arctic_sql.errors import VersionNotFoundError
from arctic_sql.table.files import parquet_fragments, position_deletes, storage
from arctic_sql.table.format import layout
from arctic_sql.table.format.statistics import statistics_columns
from arctic_sql.table.model.merge_engine import MergeEngine
from arctic_sql.table.reading import engine_fold
from arctic_sql.table.reading.engine_fold import TAG, key_starts, tagged_rows
from arctic_sql.table.reading.key_groups import KeySet

__all__ = ["TAG", "key_starts", "tagged_rows"]  # re-exported: node merges and change feeds use them

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from arctic_sql.table.model.table import ArcticTable

ROW = "_arctic_row"
ALWAYS_TRUE = AlwaysTrue()


def tag(transaction: int, is_delete: bool) -> int:
    return transaction * 2 + int(is_delete)


def newest_changes(changes: Sequence[tuple[pa.Table, int | np.ndarray]], keys: Sequence[str]) -> pa.Table:
    """The newest change row per key among tagged change tables, with its ``_arctic_tag``.

    A table's tag is one number, or an array of one per row (rows read from several files at once).
    Delete tables may hold only the key columns: their other columns come back null.
    """
    change = tagged_rows(changes)
    if change.num_rows == 0:
        return change
    change = change.sort_by([*((k, "ascending") for k in keys), (TAG, "descending")])
    return change.filter(pa.array(key_starts(change, keys)))


def keys_in(wanted: pa.Table, keys: Sequence[str]) -> pc.Expression:
    """A pyarrow filter that keeps the rows whose every key column holds a value of ``wanted``'s (a
    superset of ``wanted``'s keys for a composite key: match them exactly afterwards)."""
    return functools.reduce(operator.and_, [pc.field(k).isin(pc.unique(wanted.column(k))) for k in keys])


def merge(
    base: pa.Table | None,
    changes: Sequence[tuple[pa.Table, Any]],
    keys: Sequence[str],
    *,
    sort: bool = True,
    engine: MergeEngine | None = None,
) -> pa.Table:
    """The rows of one node after applying ``changes`` (table, tag) to ``base``, in ``base``'s schema
    when there is a base; sorted by ``keys`` when there are changes and ``sort`` (files are written
    sorted; a reader does not need the order). ``engine``: the table's merge engine (default: the
    newest change wins), folded by ``engine_fold`` unless it is that plain rule."""
    if not changes:
        if base is None:
            raise ValueError("nothing to merge: no base and no change rows")
        return base
    if engine is not None and not engine.newest_wins:
        if base is None or not base.num_rows:
            return engine_fold.merge(base, changes, keys, engine)
        # Only the changed keys' stored rows join the fold; the others pass through, as in merge_newest.
        hit = changed_rows(base, tagged_rows(changes).select(list(keys)), keys)
        folded = engine_fold.merge(base.filter(pa.array(hit)), changes, keys, engine)
        merged = pa.concat_tables([base.filter(pa.array(~hit)), folded])
        return merged.sort_by([(k, "ascending") for k in keys]) if sort else merged
    return merge_newest(base, newest_changes(changes, keys), keys, sort=sort)


def merge_newest(
    base: pa.Table | None, newest: pa.Table, keys: Sequence[str], *, sort: bool = True
) -> pa.Table:
    """:func:`merge` of the newest change per key (:func:`newest_changes`, tagged) into ``base``."""
    upserts = newest.filter(pc.equal(pc.bit_wise_and(newest.column(TAG), 1), 0)).drop_columns([TAG])
    if base is None:
        return upserts
    kept = base.filter(pa.array(~changed_rows(base, newest, keys)))
    for f in base.schema:  # with only delete tables, the change rows carry only the key
        if f.name not in upserts.column_names:
            upserts = upserts.append_column(f.name, pa.nulls(upserts.num_rows, f.type))
    # A join drops the not-null flags of the base's required columns: both sides back to its schema.
    merged = pa.concat_tables([kept.cast(base.schema), upserts.select(base.column_names).cast(base.schema)])
    return merged.sort_by([(k, "ascending") for k in keys]) if sort else merged


def changed_rows(rows: pa.Table, newest: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """Which of ``rows`` have a key among ``newest``'s (a boolean per row)."""
    # In the rows' key types: pyiceberg reads strings as string but makes an empty table of large_string.
    changed = newest.select(list(keys)).cast(rows.select(list(keys)).schema)
    if len(keys) == 1:
        return ~unchanged(rows.column(keys[0]), changed.column(0)).to_numpy(zero_copy_only=False)
    # The join sees the keys and a row number only: payload columns (dictionary-encoded ones among
    # them) stay out of the hash join.
    numbered = rows.select(list(keys)).append_column(ROW, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    hit = numbered.join(changed, keys=list(keys), join_type="left semi").column(ROW).to_numpy()
    mask = np.zeros(rows.num_rows, dtype=bool)
    mask[hit] = True
    return mask


def unchanged(keys: pa.ChunkedArray, changed: pa.ChunkedArray) -> pa.Array:
    """Which of ``keys`` are not among ``changed``. Integer keys over a range of at most a few
    bytes per row are looked up in a direct-address table (a node's keys spread over the table's
    whole key range, which is dense for sequence-like keys): several times faster than the hash set
    of ``pc.is_in``, which the other keys use."""
    if (
        pa.types.is_integer(keys.type)
        and len(keys)
        and len(changed)
        and not keys.null_count + changed.null_count
    ):
        base, change = keys.to_numpy(), changed.to_numpy()
        low, high = min(int(base.min()), int(change.min())), max(int(base.max()), int(change.max()))
        if high - low < 16 * (len(base) + len(change)) + 4096:
            seen = np.zeros(high - low + 1, dtype=bool)
            seen[change - low] = True
            return pa.array(~seen[base - low])
    return pc.invert(pc.is_in(keys, value_set=changed))


@dataclass(frozen=True)
class Store:
    """What reading a store's files needs: its metadata (field ids, name mapping) and file IO."""

    metadata: TableMetadata
    io: FileIO

    def read(
        self,
        files: Sequence[DataFile],
        schema: Schema,
        row_groups: BooleanExpression = ALWAYS_TRUE,
        dictionary: frozenset[str] = frozenset(),
        deletes: Mapping[str, Sequence[DataFile]] | None = None,
        rows_kept: pc.Expression | None = None,
        key_set: KeySet | None = None,
    ) -> pa.Table:
        """The rows of ``files`` in ``schema``; ``row_groups``: a filter whose row groups may be
        skipped by their statistics (rows that fail it may still come back); ``dictionary``: string
        columns to read dictionary-encoded where the files allow (cheaper to read and group by);
        ``deletes``: per file location, the position-delete files whose rows are left out;
        ``rows_kept``: only the rows that pass this (a pyarrow filter, applied while scanning);
        ``key_set``: only the row groups whose key statistics hold one of these keys (see :func:`by_name`)."""
        deletes = {f.file_path: deletes[f.file_path] for f in files if deletes and deletes.get(f.file_path)}
        dataset = by_name(files, schema, row_groups, dictionary, key_set)
        if dataset is None:
            return _kept(self._scan(files, schema, deletes), rows_kept)
        if not deletes:
            return _as_required(dataset.to_table(columns=_names(schema), filter=rows_kept), schema)
        rows = dataset.to_table(columns=[*_names(schema), "__fragment_index"])
        keep = _not_deleted(
            rows.column("__fragment_index").to_numpy(),
            list(dataset.get_fragments()),
            files,
            position_deletes.positions(self.io, {d for ds_ in deletes.values() for d in ds_}),
        )
        return _kept(
            _as_required(rows.drop_columns(["__fragment_index"]).filter(pa.array(keep)), schema), rows_kept
        )

    def read_tagged(
        self,
        files: Sequence[tuple[DataFile, int]],
        schema: Schema,
        row_groups: BooleanExpression = ALWAYS_TRUE,
        dictionary: frozenset[str] = frozenset(),
        rows_kept: pc.Expression | None = None,
        key_set: KeySet | None = None,
    ) -> tuple[pa.Table, np.ndarray]:
        """The rows of tagged files in ``schema``, and the tag of each row's file (see :meth:`read`)."""
        tags = np.array([value for _, value in files], np.int64)
        dataset = by_name([f for f, _ in files], schema, row_groups, dictionary, key_set)
        if dataset is not None:
            # fragments in files' order
            rows = dataset.to_table(columns=[*_names(schema), "__fragment_index"], filter=rows_kept)
            indexes = rows.column("__fragment_index").to_numpy()
            return _as_required(rows.drop_columns(["__fragment_index"]), schema), tags[indexes]
        tables = [_kept(self._scan([f], schema), rows_kept) for f, _ in files]
        return pa.concat_tables(tables, promote_options="permissive"), np.repeat(
            tags, [len(t) for t in tables]
        )

    def _scan(
        self,
        files: Sequence[DataFile],
        schema: Schema,
        deletes: Mapping[str, Sequence[DataFile]] | None = None,
    ) -> pa.Table:
        deletes = deletes or {}  # ArrowScan applies position deletes itself
        tasks = [FileScanTask(f, delete_files=set(deletes.get(f.file_path, ()))) for f in files]
        return ArrowScan(self.metadata, self.io, schema, ALWAYS_TRUE).to_table(tasks)

    @classmethod
    def of(cls, store: Table) -> Store:
        """What tasks need of ``store``: its metadata, and a FileIO of the storage properties only
        (the table's own FileIO holds all the catalog's properties, its URI and credentials too)."""
        return cls(store.metadata, storage.file_io(storage.StorageConfig.of(store.io.properties)))

    @classmethod
    def both(cls, table: ArcticTable) -> tuple[Store, Store]:
        """The base and change stores of a primary-key table."""
        assert table.change is not None
        return cls.of(table.base), cls.of(table.change)


def _kept(rows: pa.Table, rows_kept: pc.Expression | None) -> pa.Table:
    return rows if rows_kept is None else rows.filter(rows_kept)


def _not_deleted(
    fragment_index: np.ndarray, fragments: list, files: Sequence[DataFile], deleted: Mapping[str, np.ndarray]
) -> np.ndarray:
    """Which rows of a dataset read are not deleted. A fragment's rows come back together and in
    file order; the row groups a fragment kept (``Fragment.subset``) give their positions."""
    keep = np.ones(len(fragment_index), dtype=bool)
    if len(fragment_index) and np.any(np.diff(fragment_index) < 0):
        raise RuntimeError("a dataset read returned rows out of file order; position deletes cannot apply")
    bounds = np.searchsorted(fragment_index, np.arange(len(fragments) + 1))
    for i, (fragment, data_file) in enumerate(zip(fragments, files, strict=True)):
        gone = deleted.get(data_file.file_path)
        if gone is None:
            continue
        metadata = fragment.metadata
        starts = np.cumsum([0, *(metadata.row_group(g).num_rows for g in range(metadata.num_row_groups))])
        read = [starts[g.id] + np.arange(g.num_rows, dtype=np.int64) for g in fragment.row_groups]
        positions = np.concatenate(read) if read else np.zeros(0, np.int64)
        lo, hi = bounds[i], bounds[i + 1]
        if hi - lo != len(positions):
            raise RuntimeError(
                f"read {hi - lo} rows of {data_file.file_path}, its row groups hold {len(positions)}"
            )
        keep[lo:hi] = ~np.isin(positions, gone)
    return keep


@dataclass(frozen=True)
class NodeTask:
    """One node's merge: its base files, its change files with their tags, where the output goes."""

    base_files: tuple[DataFile, ...]
    change_files: tuple[tuple[DataFile, int], ...]
    directory: str = ""  # the node's output directory (partition and node directories included)
    # Position-delete files per base file location (base and kept files), as pairs: a task is hashable.
    deletes: tuple[tuple[str, tuple[DataFile, ...]], ...] = ()
    # Minor optimizing: base files left in place, whose rows the changes supersede get position deletes.
    kept_files: tuple[DataFile, ...] = ()

    @classmethod
    def of(cls, files: Iterable[Any], directory: str = "", kept: Iterable[Any] = ()) -> NodeTask:
        """From planned files (scan.FileEntry or optimizer PlanFile: ``store``, ``data_file``,
        ``sequence_number``, ``is_delete``, ``deletes``); ``kept``: base files to delete rows of."""
        files, kept = list(files), list(kept)
        base = [f for f in files if f.store == layout.Store.BASE]
        return cls(
            tuple(f.data_file for f in base),
            tuple(
                (f.data_file, tag(f.sequence_number, f.is_delete))
                for f in files
                if f.store == layout.Store.CHANGE
            ),
            directory,
            tuple((f.path, tuple(f.deletes)) for f in [*base, *kept] if f.deletes),
            tuple(f.data_file for f in kept),
        )

    @property
    def delete_map(self) -> dict[str, tuple[DataFile, ...]]:
        return dict(self.deletes)


def missing_file(task: NodeTask, table: str, version: int, error: FileNotFoundError) -> VersionNotFoundError:
    """The one-line error for a node that lost a file under its reader, naming the file (the first
    of the node's that is gone; the error's own text when none is)."""
    paths = [f.file_path for f in task.base_files] + [f.file_path for f, _ in task.change_files]
    gone = next((p for p in paths if not _exists(p)), None) or error.filename or str(error)
    return VersionNotFoundError(
        f"Version {version} of {table} is no longer readable: file {gone} was removed by snapshot expiration"
    )


def _exists(location: str) -> bool:
    fs, path = storage.filesystem(location)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def read_node(
    task: NodeTask,
    schema: Schema,
    keys: Sequence[str],
    base: Store,
    change: Store,
    *,
    sort: bool = True,
    base_filter: BooleanExpression = ALWAYS_TRUE,
    change_filter: BooleanExpression = ALWAYS_TRUE,
    dictionary: frozenset[str] = frozenset(),
    keys_kept: pc.Expression | None = None,
    engine: MergeEngine | None = None,
    key_set: KeySet | None = None,
) -> pa.Table:
    """The merged rows of one node, in ``schema``; ``sort``: by key (see :func:`merge`); ``engine``:
    the table's merge engine (``schema`` must hold its sequence columns).

    ``base_filter`` and ``change_filter`` (on key columns only) skip row groups by their statistics.
    That is safe for a reader that applies its own filter to the result: a base row that fails the
    filter is either overridden by a change or filtered out above, and a change filter on the key
    drops all of a key's changes, or none. ``dictionary``: non-key string columns that may come
    back dictionary-encoded (see :meth:`Store.read`). ``keys_kept``: a pyarrow filter on key columns
    only; the rows of the keys that fail it are left out while scanning (the merge rule holds per key,
    so the other keys' rows merge as they would have). ``key_set``: the keys ``keys_kept`` keeps,
    whose row groups alone are read (safe for the same reason).
    """
    dictionary = dictionary - set(keys)  # keys are compared and joined on: plain values
    base_rows = (
        base.read(task.base_files, schema, base_filter, dictionary, task.delete_map, keys_kept, key_set)
        if task.base_files
        else None
    )
    sequence = engine.sequence if engine is not None else ()
    changes = _read_changes(
        task, schema, keys, change, change_filter, dictionary, keys_kept, sequence, key_set
    )
    if base_rows is None:
        base_rows = schema_to_pyarrow(schema, include_field_ids=False).empty_table()
    return merge(base_rows, changes, keys, sort=sort, engine=engine)


def optional(schema: Schema) -> Schema:
    """``schema`` with every column optional: delete rows may carry only the key."""
    return Schema(
        *[NestedField(f.field_id, f.name, f.field_type, required=False) for f in schema.fields],
        schema_id=schema.schema_id,
    )


def _read_changes(
    task: NodeTask,
    schema: Schema,
    keys: Sequence[str],
    change: Store,
    change_filter: BooleanExpression = ALWAYS_TRUE,
    dictionary: frozenset[str] = frozenset(),
    keys_kept: pc.Expression | None = None,
    sequence: Sequence[str] = (),
    key_set: KeySet | None = None,
) -> list[tuple[pa.Table, np.ndarray]]:
    """The task's upsert and delete rows, tagged, in ``schema`` made optional (deletes: keys and the
    ``sequence`` columns only)."""
    changed = optional(schema)
    upserts = [(f, value) for f, value in task.change_files if not value % 2]
    deletes = [(f, value) for f, value in task.change_files if value % 2]
    return [
        change.read_tagged(files, part, change_filter, dictionary, keys_kept, key_set)
        for files, part in ((upserts, changed), (deletes, delete_schema(changed, keys, sequence)))
        if files
    ]


def delete_schema(schema: Schema, keys: Sequence[str], sequence: Sequence[str] = ()) -> Schema:
    """What a delete row carries of ``schema``: its key, and its sequence under ``sequence.field``."""
    return schema.select(*dict.fromkeys([*keys, *(c for c in sequence if c in _names(schema))]))


def minor_node(
    task: NodeTask,
    schema: Schema,
    keys: Sequence[str],
    base: Store,
    change: Store,
    engine: MergeEngine | None = None,
) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """Minor optimizing of one node that leaves its ``kept_files`` in place: the rows to write
    (the rewritten base files merged with the changes, which brings every changed key's newest
    upsert) and, per kept file whose rows the changes supersede, all its deleted positions (those
    of its current delete files and the new ones: one delete file per data file)."""
    changes = _read_changes(
        task, schema, keys, change, sequence=engine.sequence if engine is not None else ()
    )
    rewritten = (
        base.read(task.base_files, schema, deletes=task.delete_map)
        if task.base_files
        else schema_to_pyarrow(schema, include_field_ids=False).empty_table()
    )
    if not changes:
        return rewritten, {}
    deletes = task.delete_map
    if engine is None or engine.newest_wins:
        newest = newest_changes(changes, keys)  # sorted once: for the merge and for the kept files' deletes
        rows = merge_newest(rewritten, newest, keys)
    else:
        # The engine folds the changes into the stored rows, so the kept files' rows of the changed
        # keys join the fold (and are deleted from their files below, as with the plain rule).
        newest = tagged_rows(changes)
        carried = [
            stored.filter(pa.array(changed_rows(stored, newest, keys)))
            for kept in task.kept_files
            if (stored := base.read([kept], schema, deletes=deletes)).num_rows
        ]
        stored = pa.concat_tables(
            [rewritten.cast(rewritten.schema), *(c.cast(rewritten.schema) for c in carried)]
        )
        rows = engine_fold.merge(stored, changes, keys, engine)
    gone: dict[str, np.ndarray] = {}
    key_schema = schema.select(*keys)
    for kept in task.kept_files:
        # All of the file's keys, in file order (no delete applied, no row group skipped): row i is position i.
        file_keys = base.read([kept], key_schema)
        hit = np.flatnonzero(changed_rows(file_keys, newest, keys))
        old = position_deletes.positions(base.io, deletes.get(kept.file_path, ())).get(kept.file_path)
        if old is not None:
            hit = np.setdiff1d(hit, old, assume_unique=True)
        if len(hit):
            gone[kept.file_path] = np.union1d(hit, old) if old is not None else hit
    return rows, gone


def by_name(
    files: Sequence[DataFile],
    schema: Schema,
    row_groups: BooleanExpression = ALWAYS_TRUE,
    dictionary: frozenset[str] = frozenset(),
    key_set: KeySet | None = None,
) -> ds.Dataset | None:
    """A pyarrow dataset over ``files`` when each file holds every column of ``schema`` under its
    current name, field id and type, so that reading by name is reading by field id; else None.

    That is the common case, and one dataset scan reads many small files several times faster than
    ``ArrowScan``, which resolves each file's schema in Python. ``ArrowScan`` handles the rest:
    renamed, added or promoted columns, files without field ids, nested types.

    ``row_groups``: only the row groups whose statistics may satisfy it are read, when it names
    columns of ``schema`` only (the columns checked here). ``key_set``: instead, only the row groups
    whose key statistics hold one of these keys (exact for any number of keys).
    """
    if not files:
        return None
    expected = {}
    for field in schema.fields:
        if not field.field_type.is_primitive:
            return None
        expected[field.name] = (str(field.field_id).encode(), _plain(schema_to_pyarrow(field.field_type)))
    # One filesystem for all: a store's files share its scheme (FileSystem.from_uri per S3 file is costly).
    fs, first = storage.filesystem(files[0].file_path)
    scheme = storage.prefix(files[0].file_path, first)
    file_format = parquet_fragments.file_format(dictionary)
    # Each file's size from its manifest entry: opening it then makes no HEAD request on an object
    # store; a file read before in this process keeps its footer (one GET for its columns).
    fragments = [
        parquet_fragments.fragment(
            f.file_path, fs, f.file_path.removeprefix(scheme), f.file_size_in_bytes, dictionary
        )
        for f in files
    ]
    dataset = ds.FileSystemDataset(fragments, fragments[0].physical_schema, file_format, fs)
    checked: list[pa.Schema] = []  # the distinct file schemas already checked (files of one writer share one)
    for fragment in fragments:
        physical = fragment.physical_schema
        if any(physical.equals(c, check_metadata=True) for c in checked):
            continue
        for name, (field_id, arrow_type) in expected.items():
            i = physical.get_field_index(name)
            if i < 0:
                return None
            found = physical.field(i)
            if (found.metadata or {}).get(b"PARQUET:field_id") != field_id or _plain(
                found.type
            ) != arrow_type:
                return None
        checked.append(physical)
    if key_set is not None:
        return ds.FileSystemDataset(
            [fragment.subset(row_group_ids=key_set.row_groups(fragment)) for fragment in fragments],
            dataset.schema,
            dataset.format,
            dataset.filesystem,
        )
    skip = arrow_filter(row_groups, schema)
    if skip is None:
        return dataset
    # subset() keeps the row groups whose statistics may match; the fragments keep their order.
    return ds.FileSystemDataset(
        [fragment.subset(filter=skip) for fragment in fragments],
        dataset.schema,
        dataset.format,
        dataset.filesystem,
    )


def arrow_filter(expression: BooleanExpression, schema: Schema) -> pc.Expression | None:
    """``expression`` as a pyarrow expression, or None when it is always true or names a column
    outside ``schema`` (whose name in the files was not checked)."""
    if expression == ALWAYS_TRUE:
        return None
    try:
        return expression_to_pyarrow(bind(schema, expression, case_sensitive=True))
    except ValueError:
        return None


def _names(schema: Schema) -> list[str]:
    """The top-level column names of ``schema`` (pyiceberg's ``column_names`` lists nested fields too)."""
    return [f.name for f in schema.fields]


def _as_required(rows: pa.Table, schema: Schema) -> pa.Table:
    """``rows`` with the not-null flags of ``schema``, as ``ArrowScan`` gives them, not of the file
    (Spark writes a column it knows has no nulls as required, whatever the table says)."""
    fields = [
        pa.field(f.name, rows.schema.field(f.name).type, nullable=not f.required) for f in schema.fields
    ]
    return rows.cast(pa.schema(fields))


def _plain(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with what Parquet does not keep apart made equal: string widths, timestamp
    zones, dictionary encoding."""
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_large_string(arrow_type):
        return pa.string()
    if pa.types.is_large_binary(arrow_type):
        return pa.binary()
    if pa.types.is_timestamp(arrow_type):
        return pa.timestamp(arrow_type.unit, "UTC" if arrow_type.tz else None)
    return arrow_type


def write_node(
    rows: pa.Table, directory: str, schema: Schema, rows_per_file: int, row_group_rows: int | None = None
) -> list[str]:
    """Write ``rows`` under ``directory`` as Parquet files of about ``rows_per_file`` rows, with
    Iceberg field ids; return their locations. ``row_group_rows``: rows per row group (default
    pyarrow's, one group per file of this size); clustered files take smaller ones, whose bounds
    let a reader skip within a file.

    The rows are cut into files of equal size, as many as rounding the rows over ``rows_per_file``
    gives (at least one): never a full file and a small remainder, which would come back as a
    fragment or undersized segment for the next optimize to rewrite again."""
    target = schema_to_pyarrow(schema, include_field_ids=True)
    rows = rows.cast(target)
    fs, path = storage.folder(directory)
    scheme = storage.prefix(directory, path)
    written = []
    name = uuid.uuid4().hex
    count = max(1, round(rows.num_rows / max(1, rows_per_file))) if rows.num_rows else 0  # no rows: no file
    bounds = [rows.num_rows * i // count for i in range(count + 1)] if count else []
    for i, (start, stop) in enumerate(zip(bounds, bounds[1:])):
        chunk = rows.slice(start, stop - start)
        file_path = f"{path.rstrip('/')}/part-{i:05d}-{name}.parquet"
        pq.write_table(
            chunk,
            file_path,
            filesystem=fs,
            use_dictionary=dictionary_columns(chunk),
            write_statistics=statistics_columns(chunk.schema),
            row_group_size=row_group_rows,
        )
        written.append(scheme + file_path)
    return written


def dictionary_columns(rows: pa.Table) -> list[str]:
    """The columns worth dictionary encoding, as parquet-mr (Spark's writer) decides it: a
    fixed-width column only when dictionary plus indices are smaller than its plain values.

    pyarrow encodes every column with a dictionary until the dictionary passes 1 MB; a file of
    70,000 unique keys then stays dictionary-encoded and is about a third larger than Spark's.
    Columns of other types keep pyarrow's default (dictionary, with its fallback).
    """
    chosen = []
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        try:
            width = column.type.bit_width / 8
        except ValueError:  # variable width or nested
            chosen.append(name)
            continue
        n = len(column)
        distinct = pc.count_distinct(column).as_py() if n else 0
        if distinct * width + n * max(1, distinct.bit_length()) / 8 < n * width:
            chosen.append(name)
    return chosen
