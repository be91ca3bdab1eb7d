"""What the evaluator and planner see: files with their node, size, rows and key range; the
table's optimizing settings. Built from Iceberg metadata; the planner itself never reads a file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.types import NestedField, PrimitiveType

from arctic_sql.table.format.clustering import Clustering
from arctic_sql.table.format.layout import Store
from arctic_sql.table.format.tree import DataTreeNode

if TYPE_CHECKING:
    from arctic_sql.table.model.table import ArcticTable
    from arctic_sql.table.reading.scan import FileEntry

KeyBounds = tuple[tuple[Any, Any], ...]


@dataclass(frozen=True)
class PlanFile:
    """One live data file, as optimizing sees it."""

    path: str
    store: str  # base | change
    node_id: int
    partition: str
    record_count: int
    file_size: int
    sequence_number: int = 0
    is_delete: bool = False
    key_bounds: KeyBounds | None = None  # (min, max) per key column; None: unknown, overlaps everything
    data_file: DataFile | None = field(default=None, compare=False, repr=False)
    deletes: tuple[DataFile, ...] = field(default=(), compare=False, repr=False)  # its position-delete files

    @property
    def deleted_rows(self) -> int:
        """Rows of this base file that position deletes remove."""
        return sum(d.record_count for d in self.deletes)

    @property
    def node(self) -> DataTreeNode:
        return DataTreeNode.of_id(self.node_id)

    @property
    def is_change(self) -> bool:
        return self.store == Store.CHANGE


def overlaps(a: PlanFile, b: PlanFile) -> bool:
    """Whether two files may hold a common key: every key column's ranges intersect.

    Per-column bounds are a conservative test for composite keys: if any column's ranges are
    disjoint no key can be in both files; otherwise they may share one.
    """
    if a.key_bounds is None or b.key_bounds is None:
        return True
    for (lo_a, hi_a), (lo_b, hi_b) in zip(a.key_bounds, b.key_bounds, strict=True):
        if None in (lo_a, hi_a, lo_b, hi_b):
            continue
        if hi_a < lo_b or hi_b < lo_a:
            return False
    return True


def _primitive(field: NestedField) -> PrimitiveType:
    return cast(PrimitiveType, field.field_type)  # a key column's: keys are of primitive types


def plan_files(table: ArcticTable, entries: list[FileEntry]) -> list[PlanFile]:
    """PlanFiles for scanned entries, with key ranges decoded from the Iceberg column bounds."""
    schema = table.schema
    key_fields = [schema.find_field(k) for k in table.primary_key]
    result = []
    for e in entries:
        bounds = None
        if key_fields:
            lower, upper = e.data_file.lower_bounds or {}, e.data_file.upper_bounds or {}
            if all(f.field_id in lower and f.field_id in upper for f in key_fields):
                bounds = tuple(
                    (
                        from_bytes(_primitive(f), lower[f.field_id]),
                        from_bytes(_primitive(f), upper[f.field_id]),
                    )
                    for f in key_fields
                )
        result.append(
            PlanFile(
                e.path,
                e.store,
                e.node_id,
                e.partition,
                e.record_count,
                e.file_size,
                e.sequence_number,
                e.is_delete,
                bounds,
                e.data_file,
                e.deletes,
            )
        )
    return result


@dataclass(frozen=True)
class Settings:
    """A table's optimizing properties (DESIGN "Self-optimizing"; defaults are Amoro's)."""

    target_size: int = 128 * 1024 * 1024
    fragment_ratio: int = 8
    min_target_size_ratio: float = 0.75
    base_buckets: int = 4
    change_buckets: int = 4
    keyed: bool = True
    minor_file_count: int = 12
    minor_interval_ms: int = 3_600_000
    major_duplicate_ratio: float = 0.1
    major_delete_rows: int = 1_000_000
    major_delete_ratio: float = 0.2
    major_min_rows: int = 100_000
    major_small_file_count: int = 64
    major_interval_ms: int = -1
    full_interval_ms: int = -1
    max_file_count: int = 10_000
    # A task at most this large merges in memory, where minor and major leave segments in place and
    # write position deletes for them; a larger one is rewritten whole by a Spark query.
    in_memory_max_bytes: int = 256 * 1024 * 1024
    # Major and full write each node's rows in the table's clustering order (format/clustering.py),
    # so a full optimize rewrites whole nodes, lone clean segments included.
    clustered: bool = False

    @property
    def fragment_size(self) -> int:
        return self.target_size // self.fragment_ratio

    @property
    def min_target_size(self) -> int:
        return int(self.target_size * self.min_target_size_ratio)

    @property
    def write_level(self) -> int:
        """Tree level of the nodes base files are written at (log2 of the base bucket count)."""
        return (self.base_buckets - 1).bit_length() if self.keyed else 0

    @classmethod
    def of(cls, table: ArcticTable) -> Settings:
        s = table.settings
        return cls(
            target_size=s.target_size,
            fragment_ratio=s.fragment_ratio,
            min_target_size_ratio=s.min_target_size_ratio,
            base_buckets=s.base_file_index_hash_bucket if table.is_keyed else 1,
            change_buckets=s.change_file_index_hash_bucket if table.is_keyed else 1,
            keyed=table.is_keyed,
            minor_file_count=s.minor_trigger_file_count,
            minor_interval_ms=s.minor_trigger_interval,
            major_duplicate_ratio=s.major_trigger_duplicate_ratio,
            major_delete_rows=s.major_trigger_delete_rows,
            major_delete_ratio=s.major_trigger_delete_ratio,
            major_min_rows=s.major_trigger_min_rows,
            major_small_file_count=s.major_trigger_small_file_count,
            major_interval_ms=s.major_trigger_interval,
            full_interval_ms=s.full_trigger_interval,
            max_file_count=s.max_file_count,
            in_memory_max_bytes=s.execute_in_memory_max_bytes,
            clustered=table.is_keyed and Clustering.of(table.properties, table.schema) is not None,
        )
