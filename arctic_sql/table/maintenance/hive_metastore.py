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

import threading
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
# One client per JVM, metastore and warehouse, kept for the session's life.
_CLIENTS: dict[tuple, Metastore] = {}
_CLIENTS_LOCK = threading.Lock()


class Metastore:
    """A connection to the metastore: open with :meth:`of`, use as a context manager."""

    def __init__(self, spark: SparkSession, client: Any, key: tuple) -> None:
        jvm: Any = spark._jvm
        self._jvm = jvm
        self._client = client
        self._api = jvm.org.apache.hadoop.hive.metastore.api
        self._key = key
        self._lock = threading.RLock()  # a Thrift client serves one call at a time
        # (db, name) -> (the columns, keys and owner ensure_table last made sure of, the table)
        self._ensured: dict[tuple[str, str], tuple[tuple, Any]] = {}

    @classmethod
    def of(cls, spark: SparkSession) -> Metastore:
        """The session's client of its metastore: made once, then reused by every sync (a client
        costs a HiveConf and a connection, an embedded one a whole metastore handler). A call that
        fails drops it, so the next use connects afresh."""
        jvm: Any = spark._jvm
        uris = spark.conf.get(URIS, None)
        where = uris or spark.conf.get(CONNECTION_URL, DEFAULT_CONNECTION_URL)
        warehouse = spark.conf.get("spark.sql.warehouse.dir")
        key = (id(jvm), where, warehouse)
        with _CLIENTS_LOCK:
            found = _CLIENTS.get(key)
            if found is not None:
                return found
            conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
            if uris:
                conf.set("hive.metastore.uris", uris)
            else:
                conf.set("hive.metastore.uris", "")
                conf.set("javax.jdo.option.ConnectionURL", where)
                conf.set("datanucleus.schema.autoCreateAll", "true")
                conf.set("hive.metastore.schema.verification", "false")
            conf.set("hive.metastore.warehouse.dir", warehouse)
            try:
                client = jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)
            except Exception as e:
                raise ExecutionError(f"Cannot reach the Hive metastore at {where}: {one_line(e)}") from None
            _CLIENTS[key] = found = cls(spark, client, key)
            return found

    def __enter__(self) -> Metastore:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def _drop(self) -> None:
        with _CLIENTS_LOCK:
            if _CLIENTS.get(self._key) is self:
                del _CLIENTS[self._key]
        try:
            self._client.close()
        except Exception:  # noqa: BLE001, S110 - a broken connection may not close cleanly; it is dropped anyway
            pass

    def _call(self, what: str, call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except Exception as e:
            self._drop()  # its connection may be broken: the next use reconnects
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
        ``owner``: the view's folder, which marks the table as this arctic table's view. Once done
        with these columns, the client remembers it and asks nothing the next time (the checks were
        half a sync's metastore time; a table dropped behind its back fails the next call, which
        drops the client, and the sync after that checks afresh)."""
        signature = (tuple(columns), tuple(partition_keys), owner)
        if self._ensured.get((db, name), (None,))[0] == signature:
            return
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
            self._ensured[(db, name)] = (signature, existing)
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
        self._ensured[(db, name)] = (signature, table)

    def set_table_location(self, db: str, name: str, location: str) -> None:
        table = self._call(f"read {db}.{name}", self._client.getTable, db, name)
        table.getSd().setLocation(location)
        self._call(f"alter {db}.{name}", self._client.alter_table, db, name, table)

    def switch_partitions(
        self, db: str, name: str, columns: list[str], locations: dict[tuple[str, ...], str]
    ) -> None:
        """Point each partition (its values of ``columns`` -> a folder) at its folder: the existing ones in one
        ``alter_partitions`` call, the new ones in one ``add_partitions`` call. The metastore runs
        each call in one transaction of its database (Hive's ``HiveAlterHandler.alterPartitions``
        and ``add_partitions_core``): a reader sees all of a call's partitions moved or none."""
        if not locations:
            return
        names = [c.lower() for c in columns]  # as the metastore keeps them
        by_name = {self._partition_name(names, list(values)): values for values in locations}
        found = self._call(
            f"read the partitions of {db}.{name}",
            self._client.getPartitionsByNames,
            db,
            name,
            self._list(list(by_name)),
        )
        moved, existing = [], set()
        for partition in found:
            values = tuple(partition.getValues())
            partition.getSd().setLocation(locations[values])
            moved.append(partition)
            existing.add(values)
        added = []
        new = [values for values in locations if values not in existing]
        if new:  # a new partition takes the table's storage (format, serde, columns)
            known = self._ensured.get((db, name))
            table = known[1] if known else self._call(f"read {db}.{name}", self._client.getTable, db, name)
        for values in new:
            location = locations[values]
            partition = self._api.Partition()
            partition.setDbName(db)
            partition.setTableName(name)
            partition.setValues(self._list(list(values)))
            sd = table.getSd().deepCopy()
            sd.setLocation(location)
            partition.setSd(sd)
            added.append(partition)
        if moved:
            what = f"move {len(moved)} partition(s) of {db}.{name}"
            self._call(what, self._client.alter_partitions, db, name, self._list(moved))
        if added:
            what = f"add {len(added)} partition(s) to {db}.{name}"
            self._call(what, self._client.add_partitions, self._list(added))

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
        self._ensured.pop((db, name), None)
        self._call(f"drop {db}.{name}", self._client.dropTable, db, name, False, True)
        return True
