"""Arctic tables in a pyiceberg catalog.

A primary-key table ``db.t`` is two Iceberg v2 tables: the base store ``db.t`` and the change store
``db.t__change`` (hidden from SHOW TABLES). The primary key is the base store's Iceberg identifier
fields; arctic-sql's own bookkeeping lives in ``arctic.*`` properties that users cannot set.
A table without a primary key is the base store alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchNamespaceError
from pyiceberg.exceptions import NoSuchTableError as IcebergNoSuchTable
from pyiceberg.exceptions import TableAlreadyExistsError as IcebergTableExists
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from arctic_sql import properties as props
from arctic_sql.errors import (
    InvalidArgumentError,
    NoSuchDatabaseError,
    NoSuchTableError,
    TableAlreadyExistsError,
)

CHANGE_SUFFIX = "__change"
FORMAT_KEY = "arctic.format"
PRIMARY_KEY_KEY = "arctic.primary-key"
STORE_KEY = "arctic.store"
RESERVED_COLUMN_PREFIX = "arctic_"

# pyiceberg must not replay a commit that lost a race: base commits carry a watermark it cannot
# re-derive, and row-level changes must be re-validated. arctic-sql's committer retries (commit.py).
_STORE_DEFAULTS = {"format-version": "2", "commit.retry.num-retries": "0"}


@dataclass(frozen=True)
class TableIdentifier:
    database: str
    name: str

    @classmethod
    def parse(cls, text: str, default_database: str) -> TableIdentifier:
        parts = [p.strip("`") for p in text.split(".")]
        if parts and parts[0].lower() in ("spark_catalog", "arctic") and len(parts) == 3:
            parts = parts[1:]
        if len(parts) == 1:
            return cls(default_database.lower(), parts[0].lower())
        if len(parts) == 2:
            return cls(parts[0].lower(), parts[1].lower())
        raise InvalidArgumentError(f"Invalid table name '{text}': expected db.table")

    def __str__(self) -> str:
        return f"{self.database}.{self.name}"

    @property
    def base_id(self) -> tuple[str, str]:
        return (self.database, self.name)

    @property
    def change_id(self) -> tuple[str, str]:
        return (self.database, self.name + CHANGE_SUFFIX)


class ArcticTable:
    """A handle on one arctic table: its stores and what they declare. Cheap; reload to see commits."""

    def __init__(self, identifier: TableIdentifier, base: Table, change: Table | None) -> None:
        self.identifier = identifier
        self.base = base
        self.change = change

    @property
    def is_keyed(self) -> bool:
        return self.change is not None

    @property
    def schema(self) -> Schema:
        return self.base.schema()

    @property
    def spec(self) -> PartitionSpec:
        return self.base.spec()

    @property
    def properties(self) -> Mapping[str, str]:
        return self.base.properties

    @cached_property
    def primary_key(self) -> list[str]:
        schema = self.schema
        return [schema.find_column_name(fid) for fid in schema.identifier_field_ids]  # type: ignore[misc]

    def user_properties(self) -> dict[str, str]:
        return {
            k: v
            for k, v in self.properties.items()
            if not k.startswith(props.RESERVED_PREFIX) and k not in _STORE_DEFAULTS
        }

    def prop(self, key: str) -> object:
        return props.get(self.properties, key)

    def __repr__(self) -> str:
        return f"ArcticTable({self.identifier}, keyed={self.is_keyed})"


class ArcticCatalog:
    """Databases and arctic tables over any pyiceberg catalog."""

    def __init__(self, catalog: Catalog) -> None:
        self.iceberg = catalog

    # databases -------------------------------------------------------------------------------
    def create_database(self, name: str, if_not_exists: bool = False) -> None:
        try:
            self.iceberg.create_namespace(name.lower())
        except NamespaceAlreadyExistsError:
            if not if_not_exists:
                raise InvalidArgumentError(f"Database '{name}' already exists") from None

    def database_exists(self, name: str) -> bool:
        return (name.lower(),) in {tuple(ns) for ns in self.iceberg.list_namespaces()}

    def list_databases(self) -> list[str]:
        return sorted(".".join(ns) for ns in self.iceberg.list_namespaces())

    def drop_database(self, name: str, if_exists: bool = False, cascade: bool = False) -> None:
        if not self.database_exists(name):
            if if_exists:
                return
            raise NoSuchDatabaseError(f"Database '{name}' does not exist")
        tables = self.list_tables(name)
        if tables and not cascade:
            raise InvalidArgumentError(f"Database '{name}' is not empty; use DROP DATABASE ... CASCADE")
        for table in tables:
            self.drop_table(TableIdentifier(name.lower(), table), purge=True)
        try:
            self.iceberg.drop_namespace(name.lower())
        except NoSuchNamespaceError:
            pass

    # tables ----------------------------------------------------------------------------------
    def list_tables(self, database: str) -> list[str]:
        if not self.database_exists(database):
            raise NoSuchDatabaseError(f"Database '{database}' does not exist")
        names = [ident[-1] for ident in self.iceberg.list_tables(database.lower())]
        return sorted(n for n in names if not n.endswith(CHANGE_SUFFIX))

    def table_exists(self, identifier: TableIdentifier) -> bool:
        return self.iceberg.table_exists(identifier.base_id)

    def load_table(self, identifier: TableIdentifier) -> ArcticTable:
        if identifier.name.endswith(CHANGE_SUFFIX):
            raise NoSuchTableError(f"Table or view not found: {identifier}")
        try:
            base = self.iceberg.load_table(identifier.base_id)
        except (IcebergNoSuchTable, NoSuchNamespaceError):
            raise NoSuchTableError(f"Table or view not found: {identifier}") from None
        change = None
        if base.properties.get(FORMAT_KEY) == "keyed":
            change = self.iceberg.load_table(identifier.change_id)
        return ArcticTable(identifier, base, change)

    def create_table(
        self,
        identifier: TableIdentifier,
        schema: Schema,
        spec: PartitionSpec,
        properties: Mapping[str, str],
        location: str | None = None,
    ) -> ArcticTable:
        """Create the stores of a table. ``schema`` carries the primary key as identifier fields."""
        if identifier.name.endswith(CHANGE_SUFFIX):
            raise InvalidArgumentError(f"Table names ending in '{CHANGE_SUFFIX}' are reserved: {identifier}")
        if not self.database_exists(identifier.database):
            raise NoSuchDatabaseError(f"Database '{identifier.database}' does not exist")
        if self.table_exists(identifier):
            raise TableAlreadyExistsError(f"Table {identifier} already exists")
        for field in schema.fields:
            if field.name.lower().startswith(RESERVED_COLUMN_PREFIX):
                raise InvalidArgumentError(f"Column names starting with '{RESERVED_COLUMN_PREFIX}' are reserved")
        keyed = bool(schema.identifier_field_ids)
        user = props.validate(properties, creating=True)
        base_props = {**user, **_STORE_DEFAULTS, FORMAT_KEY: "keyed" if keyed else "unkeyed", STORE_KEY: "base"}
        if location is None and self.iceberg.properties.get("warehouse"):
            # Amoro's layout: {table}/base and {table}/change side by side under the table's folder.
            location = f"{self.iceberg.properties['warehouse'].rstrip('/')}/{identifier.database}/{identifier.name}"
        base_location = f"{location.rstrip('/')}/base" if location else None
        try:
            base = self.iceberg.create_table(
                identifier.base_id, schema, location=base_location, partition_spec=spec, properties=base_props
            )
        except IcebergTableExists:
            raise TableAlreadyExistsError(f"Table {identifier} already exists") from None
        change = None
        if keyed:
            change_location = base.location().rstrip("/")
            change_location = change_location[: -len("/base")] if change_location.endswith("/base") else change_location
            try:
                change = self.iceberg.create_table(
                    identifier.change_id,
                    _change_schema(schema),
                    location=f"{change_location}/change",
                    partition_spec=spec,
                    properties={**_STORE_DEFAULTS, FORMAT_KEY: "keyed", STORE_KEY: "change"},
                )
            except Exception:
                self.iceberg.drop_table(identifier.base_id)
                raise
        return ArcticTable(identifier, base, change)

    def drop_table(self, identifier: TableIdentifier, purge: bool = False) -> None:
        table = self.load_table(identifier)
        locations = [table.base.location()] + ([table.change.location()] if table.change else [])
        if table.change is not None:
            self.iceberg.drop_table(identifier.change_id)
        self.iceberg.drop_table(identifier.base_id)
        if purge:
            from arctic_sql.storage import delete_tree

            for location in locations:
                delete_tree(location)


def _change_schema(schema: Schema) -> Schema:
    """The change store's schema: the table's, with every non-key column optional (delete rows)."""
    keys = set(schema.identifier_field_ids)
    fields = [f if f.field_id in keys else _optional(f) for f in schema.fields]
    return Schema(*fields, identifier_field_ids=list(schema.identifier_field_ids))


def _optional(field):  # -> NestedField
    from pyiceberg.types import NestedField

    return NestedField(field.field_id, field.name, field.field_type, required=False, doc=field.doc)
