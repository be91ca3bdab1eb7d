"""The ``arctic`` data source: which reader or writer Spark gets, and how it finds the table.

``spark.read.format("arctic").load("db.t")`` and friends name the table as the path. The catalog comes
from the ``CatalogSpec`` the data source class was registered with: Spark pickles the class into
every Python worker (driver-side planning and commits included), where ``CatalogSpec.load_table``
opens the catalog once per process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql.datasource import DataSource

from arctic_sql.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import (
        DataSourceReader,
        DataSourceStreamReader,
        DataSourceStreamWriter,
        DataSourceWriter,
    )
    from pyspark.sql.types import StructType

    from arctic_sql.datasource.read_options import ReadOptions
    from arctic_sql.table.catalog import ArcticCatalog
    from arctic_sql.table.files.storage import StorageConfig
    from arctic_sql.table.model.table import ArcticTable

FORMAT = "arctic"

# pyiceberg's catalog classes and the `type` load_catalog knows each by, for a catalog object the
# user built directly (its properties then lack `type`).
_CATALOG_TYPES = {
    "SqlCatalog": "sql",
    "RestCatalog": "rest",
    "HiveCatalog": "hive",
    "GlueCatalog": "glue",
    "DynamoDbCatalog": "dynamodb",
    "InMemoryCatalog": "in-memory",
}


@dataclass(frozen=True)
class CatalogSpec:
    """What a Python worker needs to open the session's catalog: its name and properties."""

    name: str
    # Not in the repr: a catalog's properties hold credentials (its own and its storage's).
    properties: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, catalog: Catalog) -> CatalogSpec:
        properties = {k: str(v) for k, v in catalog.properties.items()}
        kind = _CATALOG_TYPES.get(type(catalog).__name__)
        if "type" not in properties and "py-catalog-impl" not in properties and kind is not None:
            properties["type"] = kind
        return cls(catalog.name, properties)

    def storage(self) -> StorageConfig:
        """The storage part of the properties, which a task applies before it reads or writes files."""
        from arctic_sql.table.files.storage import StorageConfig

        return StorageConfig.of(self.properties)

    def catalog(self) -> ArcticCatalog:
        """The arctic catalog, opened once per process and spec."""
        with _lock:
            found = _catalogs.get(self)
            if found is None:
                from pyiceberg.catalog import load_catalog

                from arctic_sql.table.catalog import ArcticCatalog

                found = _catalogs[self] = ArcticCatalog(load_catalog(self.name, **self.properties))
            return found

    def load_table(self, name: str | None) -> ArcticTable:
        """The table a DataFrame option names (``db.t``, or ``t`` in the ``default`` database)."""
        from arctic_sql.table.model.identifiers import TableIdentifier

        if not name:
            raise InvalidArgumentError('The arctic format needs a table: load("db.t") or save("db.t")')
        return self.catalog().load_table(TableIdentifier.parse(name, "default"))

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.properties.items()))))


_lock = threading.Lock()
_catalogs: dict[CatalogSpec, ArcticCatalog] = {}


class ArcticDataSource(DataSource):
    """``format("arctic")``. Registered as a subclass that carries the session's ``CatalogSpec``."""

    spec: ClassVar[CatalogSpec]

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def table_name(self) -> str | None:
        """The table read or written: ``db.t``, or ``db.t.branch_b`` with ``option("branch", "b")``
        (so every path below loads the branch as SQL's ``db.t.branch_b`` does)."""
        from arctic_sql.table.model.identifiers import TableIdentifier

        name = self.options.get("path") or self.options.get("table")
        branch = next((v for k, v in self.options.items() if k.lower() == "branch"), None)
        if not name or branch is None:
            return name
        identifier = TableIdentifier.parse(name, "default")
        if identifier.branch not in (None, branch.strip().lower()):
            raise InvalidArgumentError(
                f"Option branch '{branch}' and the table name {name} name two branches"
            )
        on = None if branch.strip().lower() == "main" else branch.strip().lower()
        return str(identifier.on_branch(on))

    def read_options(self, *, strict: bool = True) -> ReadOptions:
        """The options checked; ``strict``: unknown names are errors too (a writer's options also
        pass through ``schema()``, so only the readers refuse names they do not know)."""
        from arctic_sql.datasource import read_options

        return read_options.parse(self.options, strict=strict)

    def schema(self) -> StructType:
        """The read's columns; the option values are checked first (at ``load()``, before any job)."""
        from arctic_sql.datasource import read_options

        options = self.read_options(strict=False)
        return read_options.output_schema(self.spec.load_table(self.table_name()), options)

    def reader(self, schema: StructType) -> DataSourceReader:
        from arctic_sql.datasource.batch_read import ArcticBatchReader

        options = self.read_options()
        options.check_batch()
        return ArcticBatchReader(self.spec, str(self.table_name()), options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from arctic_sql.datasource.stream_read import ArcticStreamReader

        options = self.read_options()
        options.check_stream(str(self.table_name()))
        return ArcticStreamReader(self.spec, str(self.table_name()), options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """``df.write``: append (upserts and deletes on a keyed table) or overwrite; see sink.py."""
        from arctic_sql.datasource.sink import ArcticBatchWriter

        plan, load = self._plan_write(schema, overwrite=overwrite, streaming=False)
        return ArcticBatchWriter(plan, load, self.spec.storage())

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        """``writeStream``: each micro-batch one version, exactly once; see sink.py."""
        from arctic_sql.datasource.sink import ArcticStreamWriter

        if overwrite:
            raise InvalidArgumentError("The arctic sink takes output mode append or update, not complete")
        plan, load = self._plan_write(schema, overwrite=False, streaming=True)
        return ArcticStreamWriter(plan, load, self.spec.storage(), self.options.get("checkpointLocation"))

    def _plan_write(self, schema: StructType, *, overwrite: bool, streaming: bool):  # noqa: ANN202
        from functools import partial

        from arctic_sql.datasource.write_options import evolve_for, plan_write

        name = self.table_name()
        table = self.spec.load_table(name)
        if evolve_for(
            table, schema, self.options, overwrite=overwrite, streaming=streaming
        ):  # mergeSchema: new columns, wider types, before any task
            table = self.spec.load_table(name)
        plan = plan_write(table, schema, self.options, overwrite=overwrite, streaming=streaming)
        return plan, partial(self.spec.load_table, name)


def install(spark: SparkSession, catalog: Catalog) -> None:
    """Register ``format("arctic")`` on ``spark`` for the tables of ``catalog``.

    The registered class is made here, so cloudpickle sends it to the workers by value, spec and all
    (a class importable by name would travel by reference, without the spec)."""
    from arctic_sql import worker_zips
    from arctic_sql.table.files import storage

    worker_zips.warn_if_uncompiled()
    spec = CatalogSpec.of(catalog)
    # This process's file I/O, for a session made elsewhere (register); other catalogs' stores keep theirs.
    storage.configure(spec.storage(), locations=[spec.properties.get("warehouse") or ""])
    source = type("ArcticDataSource", (ArcticDataSource,), {"spec": spec})
    spark.dataSource.register(source)
    _installed[spark] = spec


def installed_spec(spark: SparkSession) -> CatalogSpec:
    """The catalog ``format("arctic")`` reads on ``spark`` (the newest :func:`install`)."""
    spec = _installed.get(spark)
    if spec is None:
        raise InvalidArgumentError(
            'format("arctic") is not registered on this SparkSession: connect first, '
            "arctic_sql.connect(spark=spark, ...)"
        )
    return spec


_installed: dict[SparkSession, CatalogSpec] = {}
