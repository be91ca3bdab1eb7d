"""The change store follows the base store's schema by field id, at every depth of structs."""

from __future__ import annotations

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField, StringType, StructType

from arctic_sql.table.writing import commit, store_sync


def _stores(tmp_path):
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(
            2,
            "st",
            StructType(
                NestedField(3, "a", LongType()),
                NestedField(4, "b", StringType()),
                NestedField(5, "inner", StructType(NestedField(6, "c", IntegerType()))),
            ),
        ),
        identifier_field_ids=[1],
    )
    return catalog.create_table("db.base", schema), catalog.create_table("db.change", schema)


def test_nested_adds_renames_and_drops_are_followed_with_the_same_ids(tmp_path):
    base, change = _stores(tmp_path)

    def evolve(update):
        update.add_column(("st", "z"), IntegerType())  # id 7
        update.add_column(("st", "inner", "d"), StringType())  # id 8: before z in a walk of the tree
        update.add_column("top", StructType(NestedField(99, "x", LongType())))  # 9, and 10 for x
        update.rename_column("st.a", "aa")
        update.rename_column("st.inner", "deep")
        update.delete_column("st.b")

    commit.evolve_schema(base, evolve)
    assert not store_sync.in_line(base.schema(), change.schema())
    store_sync.align("db.t", base.schema(), change)
    assert store_sync.in_line(base.schema(), change.schema())
    followed = change.schema()
    assert followed.find_field("st.aa").field_id == 3
    assert followed.find_field("st.deep.d").field_id == 8
    assert followed.find_field("st.z").field_id == 7
    assert followed.find_field("top.x").field_id == base.schema().find_field("top.x").field_id
    assert "st.b" not in {followed.find_column_name(i) for i in range(1, 12)}
    store_sync.align("db.t", base.schema(), change)  # in line: nothing to commit
    assert change.schema() == followed
