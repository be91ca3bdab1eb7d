"""Arctic tables on a pyiceberg SQLite catalog and data files written with pyarrow: the table layer
tested without Spark. Files are laid out as the writers lay them out (table/format/layout.py)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog import load_catalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from arctic_sql.table.catalog import ArcticCatalog
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.format.partitioning import PartitionTerm, build_spec
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.model.table import ArcticTable

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "p", StringType()),
    NestedField(3, "v", StringType()),
    identifier_field_ids=[1],
)


def catalog_at(folder) -> ArcticCatalog:  # noqa: ANN001 - a pytest tmp_path
    iceberg = load_catalog(
        "t", type="sql", uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}"
    )
    catalog = ArcticCatalog(iceberg)
    catalog.create_database("db")
    return catalog


def create(
    catalog: ArcticCatalog,
    name: str = "t",
    *,
    keyed: bool = True,
    partitioned: bool = False,
    properties: dict[str, str] | None = None,
) -> ArcticTable:
    schema = SCHEMA if keyed else Schema(*SCHEMA.fields)
    spec = (
        build_spec([PartitionTerm("identity", "p")], schema) if partitioned else UNPARTITIONED_PARTITION_SPEC
    )
    return catalog.create_table(TableIdentifier("db", name), schema, spec, properties or {})


def write(
    table: ArcticTable,
    rows: list[tuple[int, str | None, str | None]],
    *,
    store: str = layout.Store.CHANGE,
    op: str = layout.UPSERT,
    node: int = 1,
    partition: str = "",
) -> str:
    """One Parquet file of ``rows`` (id, p, v) in ``store``'s layout; returns its path."""
    target = table.change if store == layout.Store.CHANGE else table.base
    folder = layout.new_write_location(target.location())
    if partition:
        folder += f"/{partition}"
    folder += f"/{layout.NODE_COLUMN}={node}"
    if store == layout.Store.CHANGE:
        folder += f"/{layout.OP_COLUMN}={op}"
    path = f"{folder}/part-{uuid.uuid4().hex}.parquet"
    schema = schema_to_pyarrow(table.schema)  # carries the Iceberg field ids
    columns = list(zip(*rows)) if rows else [[] for _ in schema]
    data = pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)
    fs, local = storage.filesystem(path)
    fs.create_dir(local.rsplit("/", 1)[0], recursive=True)
    pq.write_table(data, local, filesystem=fs)
    return path
