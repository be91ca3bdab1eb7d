"""The in-memory node merge (arctic_sql.table.reading.node_merge) against a dictionary model of the merge rule,
and its file round trip through a real pyiceberg catalog: columns resolve by field id."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from arctic_sql.table.reading import node_merge
from arctic_sql.table.writing.commit import data_files

KEYS = ["id", "p"]
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("p", pa.string(), nullable=False),
        ("v", pa.int64()),
    ]
)  # key columns are required, as in the table schema


def _table(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in rows], schema=ARROW)


def _random_case(rng: random.Random):
    keys = [(i, p) for i in range(30) for p in ("a", "b")]
    base = {k: rng.randint(0, 9) for k in rng.sample(keys, 25)}
    changes = []  # (transaction, is_delete, {key: v})
    for txn in range(1, rng.randint(2, 7)):
        touched = rng.sample(keys, rng.randint(1, 20))  # a key once per transaction
        cut = rng.randint(0, len(touched))
        changes.append((txn, False, {k: rng.randint(10, 99) for k in touched[:cut]}))
        changes.append((txn, True, {k: None for k in touched[cut:]}))
    return base, changes


def _model(base: dict, changes: list) -> list[tuple]:
    rows = dict(base)
    for _, is_delete, batch in sorted(changes, key=lambda c: c[0]):
        for k, v in batch.items():
            if is_delete:
                rows.pop(k, None)
            else:
                rows[k] = v
    return sorted((k[0], k[1], v) for k, v in rows.items())


@pytest.mark.parametrize("seed", range(40))
def test_merge_matches_the_model_and_is_sorted_by_key(seed):
    rng = random.Random(seed)
    base, changes = _random_case(rng)
    order = list(changes)
    rng.shuffle(order)  # the merge must not depend on the order change tables come in
    tagged = []
    for txn, is_delete, batch in order:
        rows = [(k[0], k[1], v) for k, v in batch.items()]
        table = _table(rows).select(KEYS) if is_delete else _table(rows)  # delete files may carry keys only
        tagged.append((table, node_merge.tag(txn, is_delete)))
    merged = node_merge.merge(_table([(k[0], k[1], v) for k, v in base.items()]), tagged, KEYS)
    got = [(r["id"], r["p"], r["v"]) for r in merged.to_pylist()]
    assert got == _model(base, changes)  # sorted by (id, p) as written, not only the same set
    assert merged.schema == ARROW


def test_single_key_merge_keeps_base_rows_without_changes_and_applies_the_newest():
    base = _table([(1, "a", 1), (2, "a", 2), (3, "a", 3)])
    changes = [
        (_table([(2, "a", 20)]), node_merge.tag(5, False)),
        (_table([(2, "a", 0)]).select(["id"]), node_merge.tag(4, True)),  # older than the upsert: loses
        (_table([(3, "a", 0)]).select(["id"]), node_merge.tag(6, True)),
        (_table([(4, "a", 40)]), node_merge.tag(3, False)),
    ]
    merged = node_merge.merge(
        base.drop_columns(["p"]),
        [(t.select([c for c in t.column_names if c != "p"]), g) for t, g in changes],
        ["id"],
    )
    assert merged.to_pylist() == [{"id": 1, "v": 1}, {"id": 2, "v": 20}, {"id": 4, "v": 40}]


def test_an_empty_base_of_other_string_types_merges():
    empty = pa.schema([("id", pa.int64()), ("p", pa.large_string()), ("v", pa.int64())]).empty_table()
    changes = [
        (_table([(1, "a", 1), (2, "b", 2)]), node_merge.tag(1, False)),
        (_table([(2, "b", 0)]).select(KEYS), node_merge.tag(2, True)),
    ]
    merged = node_merge.merge(empty, changes, KEYS)
    assert merged.to_pylist() == [{"id": 1, "p": "a", "v": 1}] and merged.schema == empty.schema


def test_only_deletes_keep_the_base_columns():
    base = _table([(1, "a", 1), (2, "a", 2)])
    merged = node_merge.merge(base, [(_table([(1, "a", 0)]).select(KEYS), node_merge.tag(1, True))], KEYS)
    assert merged.to_pylist() == [{"id": 2, "p": "a", "v": 2}] and merged.schema == ARROW


def test_merge_without_changes_needs_a_base():
    with pytest.raises(ValueError, match="nothing to merge"):
        node_merge.merge(None, [], KEYS)


def _id_v_table(tmp_path):
    """A real pyiceberg SQL catalog holding db.t (id BIGINT key, v STRING): the catalog, table, schema."""
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "v", StringType()),
        identifier_field_ids=[1],
    )
    return catalog, catalog.create_table("db.t", schema), schema


def _data_file(table, path: str):
    """The DataFile the optimizer's commit would make of ``path``, with the spec id a manifest read sets."""
    (f,) = data_files(table, [path])
    f.spec_id = table.spec().spec_id
    return f


def test_written_files_resolve_by_field_id_after_a_rename(tmp_path):
    catalog, table, schema = _id_v_table(tmp_path)
    rows = pa.table({"id": [3, 1, 2], "v": ["c", "a", "b"]})
    paths = node_merge.write_node(rows, f"file://{tmp_path}/out/arctic_node=4", schema, rows_per_file=2)
    assert [len(pq.read_table(p.removeprefix("file://"))) for p in paths] == [
        1,
        2,
    ]  # two files of about 2 rows
    assert all("/arctic_node=4/" in p for p in paths)
    files = tuple(_data_file(table, p) for p in paths)
    with table.update_schema() as update:
        update.rename_column("v", "w")
    table = catalog.load_table("db.t")
    store = node_merge.Store(table.metadata, table.io)
    task = node_merge.NodeTask(base_files=files, change_files=(), directory="unused")
    got = node_merge.read_node(task, table.schema(), ["id"], store, store)
    assert got.column_names == ["id", "w"]
    assert sorted(zip(got["id"].to_pylist(), got["w"].to_pylist(), strict=True)) == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]


def test_a_node_whose_rows_all_went_writes_no_file(tmp_path):
    schema = Schema(NestedField(1, "id", LongType(), required=True))
    assert (
        node_merge.write_node(pa.table({"id": pa.array([], pa.int64())}), str(tmp_path / "n"), schema, 10)
        == []
    )


@pytest.mark.parametrize(
    ("rows", "rows_per_file", "sizes"),
    [(10, 4, [5, 5]), (10, 3, [3, 3, 4]), (11, 10, [11]), (14, 10, [14]), (16, 10, [8, 8]), (3, 10, [3])],
)
def test_a_node_is_cut_into_files_of_equal_size_near_the_target(tmp_path, rows, rows_per_file, sizes):
    # Never a full file and a small remainder: the remainder would look undersized to the next optimize.
    schema = Schema(NestedField(1, "id", LongType(), required=True))
    written = node_merge.write_node(
        pa.table({"id": pa.array(range(rows), pa.int64())}), str(tmp_path / "n"), schema, rows_per_file
    )
    tables = [pq.read_table(p.removeprefix("file://")) for p in written]
    assert [t.num_rows for t in tables] == sizes
    assert [v for t in tables for v in t.column("id").to_pylist()] == list(range(rows))


def test_unsorted_merge_has_the_same_rows():
    base, changes = _random_case(random.Random(7))
    base_table = _table([(k[0], k[1], v) for k, v in base.items()])
    tagged = [(_table([(k[0], k[1], v) for k, v in b.items()]), node_merge.tag(t, d)) for t, d, b in changes]
    unsorted = node_merge.merge(base_table, tagged, KEYS, sort=False)
    assert sorted(tuple(r.values()) for r in unsorted.to_pylist()) == _model(base, changes)


def test_dictionary_only_where_it_is_smaller_than_plain_values():
    n = 10_000
    rows = pa.table(
        {
            "key": pa.array(range(n), pa.int64()),  # unique: plain is smaller
            "few": pa.array([i % 7 for i in range(n)], pa.int64()),
            "name": pa.array([str(i) for i in range(n)]),
        }
    )  # variable width: pyarrow decides
    assert node_merge.dictionary_columns(rows) == ["few", "name"]
    assert node_merge.dictionary_columns(rows.slice(0, 0)) == ["name"]


def test_change_files_of_many_transactions_read_in_one_scan_keep_each_file_tag(tmp_path):
    """Files that hold every column under its name and field id are read by one pyarrow dataset
    scan (node_merge.by_name), each row tagged by its file; the result is the model's."""
    catalog, table, schema = _id_v_table(tmp_path)
    required = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "1"}),
            pa.field("v", pa.string(), nullable=False, metadata={"PARQUET:field_id": "2"}),
        ]
    )

    def write(
        name: str, rows: dict
    ) -> object:  # as Spark writes them: columns it knows are not null as required
        path = f"{tmp_path}/{name}.parquet"
        pq.write_table(pa.table(rows).cast(pa.schema([required.field(n) for n in rows])), path)
        return _data_file(table, f"file://{path}")

    base = write("base", {"id": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]})
    changes = [
        (write("t1", {"id": [2, 5], "v": ["b1", "e1"]}), node_merge.tag(1, False)),
        (write("t2", {"id": [2, 3]}), node_merge.tag(2, True)),
        (write("t3", {"id": [3, 4], "v": ["c3", "d3"]}), node_merge.tag(3, False)),
        (write("t4", {"id": [5]}), node_merge.tag(4, True)),
    ]
    assert node_merge.by_name([f for f, _ in changes[::2]], schema) is not None  # the one-scan path
    store = node_merge.Store(table.metadata, table.io)
    task = node_merge.NodeTask(
        base_files=(base,), change_files=tuple(changes[::-1])
    )  # file order is no order
    got = node_merge.read_node(task, schema, ["id"], store, store)
    assert got.to_pylist() == [{"id": 1, "v": "a"}, {"id": 3, "v": "c3"}, {"id": 4, "v": "d3"}]
    assert got.schema.field("v").nullable  # the table's flag, not the file's
    encoded = node_merge.read_node(task, schema, ["id"], store, store, dictionary=frozenset({"id", "v"}))
    assert (
        pa.types.is_dictionary(encoded.schema.field("v").type)
        and encoded.schema.field("id").type == pa.int64()
    )
    assert encoded.cast(got.schema).equals(got)  # the same values, read dictionary-encoded

    with table.update_schema() as update:
        update.rename_column("v", "w")
    renamed = catalog.load_table("db.t").schema()
    assert (
        node_merge.by_name([base], renamed) is None
    )  # field id 2 is named v in the file: ArrowScan resolves it
    got = node_merge.read_node(task, renamed, ["id"], store, store)
    assert got.column("w").to_pylist() == ["a", "c3", "d3"]


def test_a_filter_skips_row_groups_by_their_statistics_and_keeps_every_matching_row(tmp_path):
    from pyiceberg.expressions import GreaterThanOrEqual, LessThan

    _, table, schema = _id_v_table(tmp_path)
    (path,) = node_merge.write_node(
        pa.table({"id": range(100), "v": [str(i) for i in range(100)]}),
        f"file://{tmp_path}/n",
        schema,
        rows_per_file=100,
    )
    pq.write_table(
        pq.read_table(path.removeprefix("file://")), path.removeprefix("file://"), row_group_size=10
    )
    f = _data_file(table, path)
    store = node_merge.Store(table.metadata, table.io)
    got = store.read([f], schema, GreaterThanOrEqual("id", 35)).column("id").to_pylist()
    assert got == list(range(30, 100))  # whole row groups: 30-34 come back too, the query filters them
    assert store.read([f], schema, LessThan("id", 0)).num_rows == 0
    assert (
        store.read([f], schema.select("v"), GreaterThanOrEqual("id", 35)).num_rows == 100
    )  # id not read: no skip


@pytest.mark.parametrize(
    "spread", [1, 3, 2**40]
)  # dense keys use a direct-address table, sparse ones a hash set
def test_unchanged_keys_of_a_single_integer_key(spread):
    rng = random.Random(spread)
    base = pa.chunked_array([pa.array([k * spread - 50 for k in rng.sample(range(1000), 300)], pa.int64())])
    changed = pa.chunked_array(
        [pa.array([k * spread - 50 for k in rng.sample(range(1200), 200)], pa.int64())]
    )
    expected = [k not in set(changed.to_pylist()) for k in base.to_pylist()]
    assert node_merge.unchanged(base, changed).to_pylist() == expected
    assert (
        node_merge.unchanged(base.cast(pa.int32()) if spread < 2**20 else base, changed).to_pylist()
        == expected
    )
