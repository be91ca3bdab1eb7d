"""DDL across the two stores survives a crash at every step (issue 11, item 4), and stays inside the
table's own files (item 5).

A crash is real: the DDL runs in a subprocess with ``ARCTIC_FAULT=<point>`` and dies there (exit
86). The catalog-level steps run without Spark in the subprocess (a few seconds each); only CTAS
needs Spark there. The checks run in the test process through SQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from arctic_sql.errors import (
    IncompleteTableError,
    InvalidArgumentError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from arctic_sql.faults import EXIT_CODE
from arctic_sql.table.model.identifiers import CHANGE_SUFFIX, TableIdentifier

pytestmark = pytest.mark.spark

CATALOG_DDL = textwrap.dedent(
    """
    import sys
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType
    from arctic_sql.options import load_catalog
    from arctic_sql.statements import schema_changes
    from arctic_sql.table.writing import schema_evolution
    from arctic_sql.table.catalog import ArcticCatalog
    from arctic_sql.table.model.identifiers import TableIdentifier

    catalog = ArcticCatalog(load_catalog(sys.argv[1], "arctic", None, None))
    t = TableIdentifier("db", "t")
    keyed = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "v", StringType()),
                   identifier_field_ids=[1])
    exec(sys.argv[2])
    """
)

ACTIONS = {
    "create": "catalog.create_table(t, keyed, UNPARTITIONED_PARTITION_SPEC, {})",
    "drop": "catalog.drop_table(t)",
    "drop-purge": "catalog.drop_table(t, purge=True)",
    # What ALTER TABLE ... ADD COLUMNS does once Spark has parsed the column type.
    "add-column": "schema_evolution.evolve(catalog.load_table(t), lambda u: u.add_column('extra', DoubleType()))",
    "rename-column": "schema_changes._rename_column(catalog.load_table(t), 'v', 'label')",
    "drop-column": "schema_changes._drop_columns(catalog.load_table(t), ['v'], False)",
}

SPARK_DDL = textwrap.dedent(
    """
    import sys, arctic_sql
    s = arctic_sql.connect(warehouse=sys.argv[1], spark_conf={"spark.master": "local[1]"})
    s.sql(sys.argv[2])
    """
)


def _crash(warehouse: str, script: str, argument: str, fault: str) -> None:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "ARCTIC_FAULT": fault}
    done = subprocess.run(
        [sys.executable, "-c", script, warehouse, argument],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == EXIT_CODE, f"did not die at {fault}: {done.stderr[-2000:]}"


def _rows(arctic, sql):
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def _stores(arctic) -> list[str]:
    """Every Iceberg table in db, hidden stores included."""
    return sorted(ident[-1] for ident in arctic.catalog.iceberg.list_tables("db"))


def _files(root: str) -> set[str]:
    return {os.path.join(d, n) for d, _, names in os.walk(root) for n in names}


def _keyed_table_with_rows(arctic) -> None:
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")


def _gone(arctic) -> None:
    """The table is gone for every statement, and its name is free again."""
    assert arctic.sql("SHOW TABLES IN db").collect() == []
    with pytest.raises(NoSuchTableError):
        arctic.sql("SELECT * FROM db.t")
    arctic.sql("DROP TABLE IF EXISTS db.t")
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (7, 'new')")
    assert _rows(arctic, "SELECT * FROM db.t") == [(7, "new")]  # nothing of the old table comes back
    assert _stores(arctic) == ["t", "t" + CHANGE_SUFFIX]


def test_crash_between_the_stores_of_create_leaves_no_table(arctic, warehouse):
    _crash(warehouse, CATALOG_DDL, ACTIONS["create"], "create-between-stores")
    assert _stores(arctic) == ["t" + CHANGE_SUFFIX]  # the crash left the change store alone
    _gone(arctic)


def test_drop_table_removes_what_a_crashed_create_left(arctic, warehouse):
    _crash(warehouse, CATALOG_DDL, ACTIONS["create"], "create-between-stores")
    arctic.sql("DROP TABLE db.t")
    assert _stores(arctic) == []
    with pytest.raises(NoSuchTableError):
        arctic.sql("DROP TABLE db.t")


@pytest.mark.parametrize("fault", ["drop-between-stores", "purge-before-metadata"])
def test_crash_during_drop_purge_leaves_no_table_and_the_next_create_finishes_the_purge(
    arctic, warehouse, fault
):
    _keyed_table_with_rows(arctic)
    root = arctic.table("db.t").base.location().removeprefix("file://").removesuffix("/base")
    old_files = _files(root)
    _crash(warehouse, CATALOG_DDL, ACTIONS["drop-purge"], fault)
    _gone(arctic)
    # The old table's files went with the leftover change store, so the new table has its folder.
    assert arctic.table("db.t").base.location() == f"file://{root}/base"
    assert not old_files & _files(root)


def test_crash_before_drop_purge_drops_the_base_keeps_the_table_whole(arctic, warehouse):
    _keyed_table_with_rows(arctic)
    _crash(warehouse, CATALOG_DDL, ACTIONS["drop-purge"], "drop-before-base")
    assert _rows(arctic, "SELECT * FROM db.t") == [(1, "a"), (2, "b")]
    arctic.sql("INSERT INTO db.t VALUES (3, 'c')")
    with pytest.raises(TableAlreadyExistsError):
        arctic.sql("CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id))")
    arctic.sql("DROP TABLE db.t PURGE")
    _gone(arctic)


def test_crash_during_drop_keeps_the_files_and_frees_the_name(arctic, warehouse):
    _keyed_table_with_rows(arctic)
    root = arctic.table("db.t").base.location().removeprefix("file://").removesuffix("/base")
    before = _files(root)
    _crash(warehouse, CATALOG_DDL, ACTIONS["drop"], "drop-between-stores")
    _gone(arctic)
    assert before <= _files(root)  # DROP without PURGE keeps the files: the new table lives elsewhere
    assert not arctic.table("db.t").base.location().startswith(f"file://{root}/")


@pytest.mark.parametrize("action", ["add-column", "rename-column", "drop-column"])
def test_crash_between_the_stores_of_alter_is_finished_by_the_next_statement(arctic, warehouse, action):
    _keyed_table_with_rows(arctic)
    _crash(warehouse, CATALOG_DDL, ACTIONS[action], "alter-between-stores")
    if action == "add-column":
        arctic.sql("INSERT INTO db.t VALUES (3, 'c', 0.5)")
        assert _rows(arctic, "SELECT * FROM db.t") == [(1, "a", None), (2, "b", None), (3, "c", 0.5)]
        with pytest.raises(InvalidArgumentError, match="Column 'extra' already exists in db.t"):
            arctic.sql("ALTER TABLE db.t ADD COLUMNS (extra DOUBLE)")
    elif action == "rename-column":
        arctic.sql("UPDATE db.t SET label = 'z' WHERE id = 2")
        assert _rows(arctic, "SELECT id, label FROM db.t") == [(1, "a"), (2, "z")]
        with pytest.raises(InvalidArgumentError, match="Column 'v' does not exist in db.t"):
            arctic.sql("ALTER TABLE db.t RENAME COLUMN v TO label")
    else:
        arctic.sql("INSERT INTO db.t VALUES (3)")
        assert _rows(arctic, "SELECT * FROM db.t") == [(1,), (2,), (3,)]
    table = arctic.table("db.t")
    assert [(f.field_id, f.name) for f in table.change.schema().fields] == [
        (f.field_id, f.name) for f in table.base.schema().fields
    ]


@pytest.mark.parametrize("fault", ["ctas-before-data", "ctas-before-publish"])
def test_crash_during_ctas_leaves_no_table(arctic, warehouse, fault):
    arctic.sql("CREATE TABLE db.src (id BIGINT, v STRING)")
    arctic.sql("INSERT INTO db.src VALUES (1, 'a'), (2, 'b')")
    ctas = "CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id)) AS SELECT * FROM db.src"
    if fault == "ctas-before-publish":  # rows committed to the staged stores: the CTAS runs in Spark
        _crash(warehouse, SPARK_DDL, ctas, fault)
    else:  # what CTAS does before its query runs, without starting Spark in the subprocess
        staged = "catalog.create_table(t, keyed, UNPARTITIONED_PARTITION_SPEC, {}, staged=True)\n"
        _crash(
            warehouse,
            CATALOG_DDL,
            staged + f"from arctic_sql.faults import fault_point; fault_point('{fault}')",
            fault,
        )
        assert _stores(arctic) == ["src", "t" + CHANGE_SUFFIX, "t__creating"]
    assert [tuple(r) for r in arctic.sql("SHOW TABLES IN db").collect()] == [("db", "src", False)]
    with pytest.raises(NoSuchTableError):
        arctic.sql("SELECT * FROM db.t")
    arctic.sql(ctas)
    assert _rows(arctic, "SELECT * FROM db.t") == [(1, "a"), (2, "b")]
    assert _stores(arctic) == ["src", "t", "t" + CHANGE_SUFFIX]


def test_failed_ctas_leaves_nothing(arctic):
    with pytest.raises(Exception, match="null"):
        arctic.sql("CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id)) AS SELECT CAST(NULL AS BIGINT) AS id")
    assert _stores(arctic) == []
    arctic.sql("CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id)) AS SELECT 1L AS id")
    assert _rows(arctic, "SELECT * FROM db.t") == [(1,)]


def test_a_table_that_lost_its_change_store_fails_clearly_and_drops(arctic):
    _keyed_table_with_rows(arctic)
    arctic.catalog.iceberg.drop_table(("db", "t" + CHANGE_SUFFIX))  # as another tool might
    with pytest.raises(
        IncompleteTableError, match=r"^Table db.t is incomplete: its change store db.t__change is "
    ):
        arctic.sql("SELECT * FROM db.t")
    arctic.sql("DROP TABLE db.t PURGE")
    _gone(arctic)


def test_drop_database_cascade_removes_leftovers(arctic, warehouse):
    _crash(warehouse, CATALOG_DDL, ACTIONS["create"], "create-between-stores")
    arctic.sql("CREATE TABLE db.other (id BIGINT)")
    arctic.sql("DROP DATABASE db CASCADE")
    assert not arctic.catalog.database_exists("db")


# item 5: LOCATION and PURGE stay inside the table's own files ----------------------------------------
def test_create_at_a_location_with_files_is_refused(arctic, tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "report.csv").write_text("not a table's\n")
    with pytest.raises(
        InvalidArgumentError, match=f"^Cannot create table db.t at '{folder}': the location is not empty$"
    ):
        arctic.sql(f"CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id)) LOCATION '{folder}'")
    assert _stores(arctic) == []


def test_create_inside_another_tables_folder_is_refused(arctic):
    # Its files would sit among that table's own, and that table's orphan removal would take them.
    arctic.sql("CREATE TABLE db.host (id BIGINT, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.host VALUES (1)")
    store = arctic.table("db.host").change.location().removeprefix("file://")
    inner = f"{store}/data/{'ef' * 16}/k=1/nested"
    with pytest.raises(
        InvalidArgumentError,
        match=f"^Cannot create table db.t at '{inner}': it is inside the folder "
        f"of another table \\(.*{store}\\)$",
    ):
        arctic.sql(f"CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id)) LOCATION '{inner}'")
    assert "t" not in [r[1] for r in arctic.sql("SHOW TABLES IN db").collect()]


def test_drop_purge_deletes_the_tables_files_and_nothing_else(arctic, tmp_path):
    folder = tmp_path / "place"
    arctic.sql(f"CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id)) LOCATION '{folder}'")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a')")
    arctic.sql("INSERT OVERWRITE db.t VALUES (2, 'b')")
    arctic.sql("CREATE TABLE db.u (id BIGINT)")
    arctic.sql("INSERT INTO db.u VALUES (1)")
    default_root = arctic.table("db.u").base.location().removeprefix("file://").removesuffix("/base")
    table_files = _files(str(folder)) | _files(default_root)
    assert any(f.endswith(".parquet") for f in table_files)
    unrelated = [
        folder / "notes.txt",
        folder / "base" / "data" / "keep.parquet",
        folder / "change" / "x" / "y.txt",
        Path(default_root) / "readme.md",
        Path(default_root) / "base" / "data" / "z.parquet",
    ]
    for path in unrelated:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("mine")
    arctic.sql("DROP TABLE db.t PURGE")
    arctic.sql("DROP TABLE db.u PURGE")
    assert _files(str(folder)) | _files(default_root) == {str(p) for p in unrelated}
    assert not os.path.exists(folder / "base" / "metadata")  # folders left empty go


def test_drop_without_purge_then_create_leaves_the_old_files_alone(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1)")
    old_root = arctic.table("db.t").base.location().removeprefix("file://").removesuffix("/base")
    old_files = _files(old_root)
    arctic.sql("DROP TABLE db.t")
    arctic.sql("CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (2)")
    assert not arctic.table("db.t").base.location().startswith(f"file://{old_root}/")
    arctic.sql("DROP TABLE db.t PURGE")
    assert _files(old_root) == old_files


# item 7: properties arctic-sql fixes on both stores -------------------------------------------------
def test_commit_retry_and_format_version_properties_are_refused(arctic):
    with pytest.raises(InvalidArgumentError, match="^Table property 'format-version' cannot be '1': "):
        arctic.sql("CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id)) TBLPROPERTIES ('format-version' = '1')")
    arctic.sql("CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id)) TBLPROPERTIES ('format-version' = '2')")
    for statement in (
        "ALTER TABLE db.t SET TBLPROPERTIES ('commit.retry.num-retries' = '4')",
        "ALTER TABLE db.t SET TBLPROPERTIES ('commit.retry.min-wait-ms' = '10')",
        "ALTER TABLE db.t UNSET TBLPROPERTIES IF EXISTS ('commit.retry.num-retries')",
        "ALTER TABLE db.t SET TBLPROPERTIES ('format-version' = '3')",
    ):
        with pytest.raises(
            InvalidArgumentError, match="^Table property '(commit.retry|format-version).*' cannot be"
        ):
            arctic.sql(statement)
    table = arctic.table("db.t")
    for store in (table.base, table.change):
        assert store.properties["commit.retry.num-retries"] == "0"
        assert store.metadata.format_version == 2


def test_identifier_of_a_hidden_store_is_not_a_table(arctic):
    _keyed_table_with_rows(arctic)
    with pytest.raises(NoSuchTableError):
        arctic.catalog.load_table(TableIdentifier("db", "t__creating"))
    with pytest.raises(InvalidArgumentError, match="reserved"):
        arctic.sql("CREATE TABLE db.x__creating (id BIGINT)")
