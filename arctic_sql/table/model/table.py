"""ArcticTable: a handle on one table's stores and what they declare (no catalog, no I/O of its own)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from arctic_sql.table.model import properties as props
from arctic_sql.table.model.identifiers import KEY_AS_INT_KEY, TableIdentifier
from arctic_sql.table.model.merge_engine import MergeEngine
from arctic_sql.table.model.schemas import spark_schema
from arctic_sql.table.model.table_settings import TableSettings

if TYPE_CHECKING:
    from pyiceberg.types import IcebergType
    from pyspark.sql.types import StructType

# pyiceberg must not replay a commit that lost a race: base commits carry a watermark it cannot
# re-derive, and row-level changes must be re-validated. arctic-sql's committer retries (writing/commit.py).
# Appends merge manifests as Iceberg Java's do (pyiceberg's default is off): once 100 small manifests
# have piled up they become one, so a stream's commits do not write (and reads do not open) one more
# manifest per commit kept; the metadata log keeps Iceberg's 100 entries, said here for every catalog.
STORE_DEFAULTS = {
    "format-version": "2",
    "commit.retry.num-retries": "0",
    "commit.manifest-merge.enabled": "true",
    "write.metadata.previous-versions-max": "100",
}


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
    def spark_schema(self) -> StructType:
        """The table's columns as Spark types (field ids in their metadata)."""

        return spark_schema(self.schema)

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

    @property
    def key_types(self) -> tuple[IcebergType, ...]:
        schema = self.schema
        return tuple(schema.find_field(k).field_type for k in self.primary_key)

    @property
    def key_as_int(self) -> tuple[bool, ...]:
        """Per primary-key column: whether it was widened from int to bigint and so still hashes as an
        int where its value fits in one (format/keyhash.py)."""
        raw = self.properties.get(KEY_AS_INT_KEY, "")
        if not raw:
            return tuple(False for _ in self.primary_key)
        ids = {int(i) for i in raw.split(",")}
        return tuple(fid in ids for fid in self.schema.identifier_field_ids)

    def user_properties(self) -> dict[str, str]:
        return {
            k: v
            for k, v in self.properties.items()
            if not k.startswith(props.RESERVED_PREFIX) and k not in STORE_DEFAULTS
        }

    @property
    def merge_engine(self) -> MergeEngine:
        """How a key's rows merge (``merge-engine``, ``sequence.field``: model/merge_engine.py)."""
        return MergeEngine.of(self.properties, self.schema)

    @property
    def settings(self) -> TableSettings:
        """The registry's settings, typed: ``table.settings.target_size`` (table_settings.py)."""
        return TableSettings(self.properties)

    def __repr__(self) -> str:
        return f"ArcticTable({self.identifier}, keyed={self.is_keyed})"
