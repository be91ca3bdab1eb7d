"""The Hive metastore the Hive view is registered in, reached through the Hive client classes the
pyspark wheel ships (``HiveMetaStoreClient`` over py4j in the session's JVM), not through the
session's catalog: the arctic session keeps Spark's in-memory catalog (docs/design.md, "The Hive view").

Which metastore: ``spark.hadoop.hive.metastore.uris`` (a remote one, shared by every engine) if the
session has it, else an embedded Derby metastore at ``spark.hadoop.javax.jdo.option.ConnectionURL``,
by default Spark's own default (``metastore_db`` under ``derby.system.home``, the warehouse folder of a
local session). Embedded Derby admits one JVM at a time: once this session has used it, other
processes can open it only after this one ends.

>>> with Metastore.of(spark) as hms:  # doctest: +SKIP
...     hms.set_table_location("db", "t", "file:/wh/db/t/hive/v3-0123abcd")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from arctic_sql.errors import ExecutionError, one_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

URIS = "spark.hadoop.hive.metastore.uris"
CONNECTION_URL = "spark.hadoop.javax.jdo.option.ConnectionURL"
DEFAULT_CONNECTION_URL = "jdbc:derby:;databaseName=metastore_db;create=true"
# The Hive table parameter naming the folder of the arctic table whose view it is.
OWNER = "arctic.view-of"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"


class Metastore:
    """A connection to the metastore: open with :meth:`of`, use as a context manager."""

    def __init__(self, spark: SparkSession, client: Any) -> None:
        self._jvm = spark._jvm  # type: ignore[attr-defined]
        self._client = client
        self._api = self._jvm.org.apache.hadoop.hive.metastore.api

    @classmethod
    def of(cls, spark: SparkSession) -> Metastore:
        jvm = spark._jvm  # type: ignore[attr-defined]
        conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
        uris = spark.conf.get(URIS, None)
        if uris:
            conf.set("hive.metastore.uris", uris)
        else:
            conf.set("hive.metastore.uris", "")
            conf.set("javax.jdo.option.ConnectionURL", spark.conf.get(CONNECTION_URL, DEFAULT_CONNECTION_URL))
            conf.set("datanucleus.schema.autoCreateAll", "true")
            conf.set("hive.metastore.schema.verification", "false")
        conf.set("hive.metastore.warehouse.dir", spark.conf.get("spark.sql.warehouse.dir"))
        try:
            client = jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)
        except Exception as e:
            where = uris or spark.conf.get(CONNECTION_URL, DEFAULT_CONNECTION_URL)
            raise ExecutionError(f"Cannot reach the Hive metastore at {where}: {one_line(e)}") from None
        return cls(spark, client)

    def __enter__(self) -> Metastore:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def _call(self, what: str, call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except Exception as e:
            raise ExecutionError(f"Hive metastore: cannot {what}: {one_line(e)}") from None

    def _list(self, items: list[Any]) -> Any:
        found = self._jvm.java.util.ArrayList()
        for item in items:
            found.add(item)
        return found

    def _fields(self, columns: list[tuple[str, str]]) -> Any:
        return self._list([self._api.FieldSchema(name, kind, None) for name, kind in columns])

    def _storage(self, columns: list[tuple[str, str]], location: str) -> Any:
        sd = self._api.StorageDescriptor()
        sd.setCols(self._fields(columns))
        sd.setLocation(location)
        sd.setInputFormat(PARQUET_INPUT)
        sd.setOutputFormat(PARQUET_OUTPUT)
        sd.setSerdeInfo(self._api.SerDeInfo(None, PARQUET_SERDE, self._jvm.java.util.HashMap()))
        return sd

    def table(self, db: str, name: str) -> Any | None:
        if not self._call(f"look up {db}.{name}", self._client.tableExists, db, name):
            return None
        return self._call(f"read {db}.{name}", self._client.getTable, db, name)

    def ensure_table(
        self,
        db: str,
        name: str,
        columns: list[tuple[str, str]],
        partition_keys: list[tuple[str, str]],
        location: str,
        database_location: str,
        owner: str,
    ) -> None:
        """Create the external Parquet table (and its database), or bring its columns up to date.
        ``owner``: the view's folder, which marks the table as this arctic table's view."""
        databases = self._call("list databases", self._client.getAllDatabases)
        if db not in list(databases):
            database = self._api.Database(db, "", database_location, self._jvm.java.util.HashMap())
            self._call(f"create database {db}", self._client.createDatabase, database)
        existing = self.table(db, name)
        if existing is not None:
            if existing.getParameters().get(OWNER) != owner:
                raise ExecutionError(
                    f"Hive table {db}.{name} exists and is not this table's Hive view; set hive.table to another name"
                )
            keys = [(f.getName(), f.getType()) for f in existing.getPartitionKeys()]
            if keys != [(k.lower(), t) for k, t in partition_keys]:
                raise ExecutionError(
                    f"Hive table {db}.{name} is partitioned by {keys}, the table by {partition_keys}; "
                    "drop the Hive table to rebuild the view"
                )
            if [(f.getName(), f.getType()) for f in existing.getSd().getCols()] != [
                (c.lower(), t) for c, t in columns
            ]:  # a column added or widened since; altering a table is slow, so only then
                existing.getSd().setCols(self._fields(columns))
                self._call(f"alter {db}.{name}", self._client.alter_table, db, name, existing)
            return
        table = self._api.Table()
        table.setDbName(db)
        table.setTableName(name)
        table.setTableType("EXTERNAL_TABLE")
        table.setSd(self._storage(columns, location))
        table.setPartitionKeys(self._fields(partition_keys))
        parameters = self._jvm.java.util.HashMap()
        parameters.put("EXTERNAL", "TRUE")
        parameters.put(OWNER, owner)
        table.setParameters(parameters)
        self._call(f"create {db}.{name}", self._client.createTable, table)

    def set_table_location(self, db: str, name: str, location: str) -> None:
        table = self._call(f"read {db}.{name}", self._client.getTable, db, name)
        table.getSd().setLocation(location)
        self._call(f"alter {db}.{name}", self._client.alter_table, db, name, table)

    def set_partition_location(self, db: str, name: str, values: list[str], location: str) -> None:
        """Point one partition at ``location`` in one metastore call (added if new)."""
        table = self._call(f"read {db}.{name}", self._client.getTable, db, name)
        names = [f.getName() for f in table.getPartitionKeys()]
        spec = "/".join(f"{n}={v}" for n, v in zip(names, values, strict=True))
        vals = self._list(values)
        existing = self._client.getPartitionsByNames(
            db, name, self._list([self._partition_name(names, values)])
        )
        if existing.size():
            partition = existing.get(0)
            partition.getSd().setLocation(location)
            self._call(f"move partition {spec}", self._client.alter_partition, db, name, partition)
            return
        partition = self._api.Partition()
        partition.setDbName(db)
        partition.setTableName(name)
        partition.setValues(vals)
        sd = table.getSd().deepCopy()
        sd.setLocation(location)
        partition.setSd(sd)
        self._call(f"add partition {spec}", self._client.add_partition, partition)

    def _partition_name(self, names: list[str], values: list[str]) -> str:
        return self._jvm.org.apache.hadoop.hive.metastore.Warehouse.makePartName(
            self._fields([(n, "string") for n in names]), self._list(values)
        )

    def partition_locations(self, db: str, name: str) -> dict[tuple[str, ...], str]:
        """Every partition of the table: its values -> the folder it points at."""
        found = self._call(f"list the partitions of {db}.{name}", self._client.listPartitions, db, name, -1)
        return {tuple(p.getValues()): p.getSd().getLocation() for p in found}

    def drop_partition(self, db: str, name: str, values: list[str]) -> None:
        self._call(
            f"drop a partition of {db}.{name}",
            self._client.dropPartition,
            db,
            name,
            self._list(values),
            False,
        )

    def drop_table(self, db: str, name: str, owner: str) -> bool:
        """Drop the view's table (its folders are the caller's to delete); False if it was not there
        or is not the view whose folder is ``owner``."""
        existing = self.table(db, name)
        if existing is None or existing.getParameters().get(OWNER) != owner:
            return False
        self._call(f"drop {db}.{name}", self._client.dropTable, db, name, False, True)
        return True
