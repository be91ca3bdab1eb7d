"""Which partitions need optimizing, and how much: classification and triggers (metadata only).

Files are sorted by size like generations in a garbage collector (Amoro's ``CommonPartitionEvaluator``):
a *fragment* is at most ``target-size / fragment-ratio``; an *undersized segment* is above that and
at most ``target-size x min-target-size-ratio``; anything larger is a *segment*. Every change file is
a fragment (it is write-optimised, never read-optimised).

Triggers, strongest first (the first that fires decides the partition's mode):

- full: ``full.trigger.interval`` passed since the last full, and there is change data, more than B
  fragments, or two undersized segments (B = base buckets).
- major: a segment whose related change rows exceed ``major.trigger.duplicate-ratio`` of its rows;
  enough undersized segments to fill a target file; unmerged delete rows >= ``delete-rows``; deletes /
  (base + upserted rows) >= ``delete-ratio`` once that sum reaches ``min-rows`` (so a near-empty base
  does not trigger on a few deletes); small files >= ``small-file-count`` per node; or
  ``major.trigger.interval`` passed with any small file or change data left.
- minor: small files (fragments + change files) >= ``max(B + 1, minor.trigger.file-count x nodes)``,
  or change data (or more than B fragments) older than ``minor.trigger.interval``.

Count thresholds scale with the number of tree nodes written: every commit writes one file per
node and kind of change, so "12 small files" means 12 per node, as in an unbucketed Amoro table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from arctic_sql.optimizer.inputs import PlanFile, Settings
from arctic_sql.table.format.tree import DataTreeNode


class Mode(StrEnum):
    """The generations of optimizing (DESIGN "Self-optimizing"), as users spell them."""

    MINOR = "minor"
    MAJOR = "major"
    FULL = "full"


MINOR, MAJOR, FULL = Mode.MINOR, Mode.MAJOR, Mode.FULL
MODES = (MINOR, MAJOR, FULL)
RANK: dict[str | None, int] = {None: 0, MINOR: 1, MAJOR: 2, FULL: 3}


@dataclass
class PartitionMetrics:
    """What the triggers look at for one partition."""

    partition: str
    fragments: int = 0
    fragment_bytes: int = 0
    undersized: list[int] = field(default_factory=list)  # sizes
    # The same sizes by the base node they lie in: files of different nodes never merge into one
    # file (every key's rows stay in its node), so only a node's own undersized files can fill one.
    undersized_by_node: dict[int, list[int]] = field(default_factory=dict)
    segments: int = 0
    rewrite_segments: int = 0  # segments whose related change rows exceed the duplicate ratio
    base_rows: int = 0
    change_files: int = 0
    change_bytes: int = 0
    upserted_rows: int = 0
    deleted_rows: int = 0
    nodes: int = 1  # tree nodes written (change nodes, or base nodes holding fragments)

    @property
    def small_files(self) -> int:
        return self.fragments + self.change_files

    @property
    def undersized_groups(self) -> list[list[int]]:
        """Undersized sizes that could merge into one file: per node (all together when not known)."""
        return list(self.undersized_by_node.values()) if self.undersized_by_node else [self.undersized]

    @property
    def mergeable_undersized(self) -> bool:
        """Whether some node holds two undersized segments (files of two nodes never merge)."""
        return any(len(sizes) >= 2 for sizes in self.undersized_groups)


@dataclass(frozen=True)
class Decision:
    partition: str
    mode: str | None  # None: nothing due
    reason: str


def classify(f: PlanFile, settings: Settings) -> str:
    """``fragment``, ``undersized`` or ``segment``."""
    if f.is_change or f.file_size <= settings.fragment_size:
        return "fragment"
    if f.file_size <= settings.min_target_size:
        return "undersized"
    return "segment"


def measure(
    partition: str, base: Iterable[PlanFile], change: Iterable[PlanFile], settings: Settings
) -> PartitionMetrics:
    """Classify a partition's live base files and its change files above the watermark."""
    base, change = list(base), list(change)
    m = PartitionMetrics(partition)
    for f in base:
        m.base_rows += f.record_count - f.deleted_rows  # rows its position deletes remove are gone
        kind = classify(f, settings)
        if kind == "fragment":
            m.fragments += 1
            m.fragment_bytes += f.file_size
        elif kind == "undersized":
            m.undersized.append(f.file_size)
            m.undersized_by_node.setdefault(_write_node(f, settings), []).append(f.file_size)
        else:
            m.segments += 1
            if duplicate_ratio(f, base, change) > settings.major_duplicate_ratio:
                m.rewrite_segments += 1
    for f in change:
        m.change_files += 1
        m.change_bytes += f.file_size
        if f.is_delete:
            m.deleted_rows += f.record_count
        else:
            m.upserted_rows += f.record_count
    written = {f.node_id for f in change} | {f.node_id for f in base if classify(f, settings) == "fragment"}
    m.nodes = max(1, len(written))
    return m


def _write_node(f: PlanFile, settings: Settings) -> int:
    """The id of the base node at the write level that ``f`` lies in (its own id when above it)."""
    level = settings.write_level
    if f.node.level < level:
        return f.node_id
    mask = (1 << level) - 1
    return DataTreeNode(mask, f.node.index & mask).id


def duplicate_ratio(segment: PlanFile, base: list[PlanFile], change: list[PlanFile]) -> float:
    """Rows of ``segment`` that are garbage or about to be / its rows: those its position deletes
    remove, plus the change rows that may hit it. A change file's rows spread evenly over the nodes
    below it, and over the base rows of related nodes in proportion to their sizes."""
    node = segment.node
    related_base = sum(b.record_count for b in base if b.node.is_related(node)) or 1
    hits = 0.0
    for c in change:
        if not c.node.is_related(node):
            continue
        share = 1.0 / (1 << max(0, node.level - c.node.level))  # c above the segment's node
        hits += c.record_count * share * segment.record_count / related_base
    return (segment.deleted_rows + hits) / max(1, segment.record_count)


@dataclass(frozen=True)
class History:
    """When a partition was last optimized in each mode (ms), and its oldest unmerged change (ms)."""

    last_minor_ms: int | None = None
    last_major_ms: int | None = None
    last_full_ms: int | None = None
    oldest_change_ms: int | None = None
    created_ms: int | None = None


def _since(now_ms: int, *times: int | None) -> int | None:
    known = [t for t in times if t is not None]
    return now_ms - max(known) if known else None


def _latest(*times: int | None) -> int | None:
    return max((t for t in times if t is not None), default=None)


def _unless(mark: int | None, fallback: int | None) -> tuple[int | None, ...]:
    """``fallback`` only when there is no ``mark``."""
    return () if mark is not None else (fallback,)


def evaluate(m: PartitionMetrics, settings: Settings, history: History, now_ms: int) -> Decision:
    """The strongest optimizing mode due for a partition, and why (for the log and dry runs)."""
    b = settings.base_buckets
    has_change = m.change_files > 0
    # A mode's clock restarts with that mode or any stronger one; never optimized: since the data came.
    start = history.oldest_change_ms if history.oldest_change_ms is not None else history.created_ms
    since_full = _since(now_ms, history.last_full_ms, *_unless(history.last_full_ms, start))
    major_marks = (history.last_major_ms, history.last_full_ms)
    since_major = _since(now_ms, *major_marks, *_unless(_latest(*major_marks), start))
    minor_marks = (history.last_minor_ms, *major_marks)
    since_minor = _since(now_ms, *minor_marks, *_unless(_latest(*minor_marks), start))

    full_due = (
        settings.full_interval_ms >= 0 and since_full is not None and since_full >= settings.full_interval_ms
    )
    if full_due and (has_change or m.fragments > b or m.mergeable_undersized):
        return Decision(
            m.partition, FULL, f"full interval passed ({since_full} ms >= {settings.full_interval_ms})"
        )

    if m.rewrite_segments:
        return Decision(
            m.partition,
            MAJOR,
            f"{m.rewrite_segments} segment(s) with duplicate ratio > {settings.major_duplicate_ratio}",
        )
    for sizes in m.undersized_groups:
        small_undersized = sorted(sizes)
        if (
            sum(small_undersized) >= settings.target_size
            and len(small_undersized) >= 2
            and small_undersized[0] + small_undersized[1] <= settings.target_size
        ):
            return Decision(
                m.partition, MAJOR, f"{len(sizes)} undersized segments of one node fill a target-size file"
            )
    if m.deleted_rows >= settings.major_delete_rows:
        return Decision(
            m.partition, MAJOR, f"{m.deleted_rows} unmerged deleted rows >= {settings.major_delete_rows}"
        )
    volume = m.base_rows + m.upserted_rows
    if volume >= settings.major_min_rows and m.deleted_rows >= settings.major_delete_ratio * volume:
        return Decision(
            m.partition, MAJOR, f"delete ratio {m.deleted_rows / volume:.2f} >= {settings.major_delete_ratio}"
        )
    if m.small_files >= settings.major_small_file_count * m.nodes:
        return Decision(
            m.partition,
            MAJOR,
            f"{m.small_files} small files >= {settings.major_small_file_count} per node x {m.nodes}",
        )
    if (
        settings.major_interval_ms >= 0
        and since_major is not None
        and since_major >= settings.major_interval_ms
        and (has_change or m.fragments > 1 or m.mergeable_undersized)
    ):
        return Decision(m.partition, MAJOR, f"major interval passed ({since_major} ms)")

    threshold = (
        max(b + 1, settings.minor_file_count * m.nodes) if settings.keyed else settings.minor_file_count
    )
    if m.small_files >= threshold:
        return Decision(
            m.partition,
            MINOR,
            f"{m.small_files} small files >= {threshold} ({settings.minor_file_count} per node x {m.nodes})",
        )
    enough = (m.small_files > b or has_change) if settings.keyed else m.small_files > 1
    if enough and since_minor is not None and since_minor >= settings.minor_interval_ms >= 0:
        return Decision(
            m.partition, MINOR, f"minor interval passed ({since_minor} ms >= {settings.minor_interval_ms})"
        )
    return Decision(
        m.partition,
        None,
        f"nothing due: {m.small_files} small files, "
        f"{m.change_files} change files, {len(m.undersized)} undersized segments",
    )
