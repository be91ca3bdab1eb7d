"""A table's health score, 0-100, and the breakdown that explains it (Amoro #3736).

Amoro's score (``CommonPartitionEvaluator.getHealthScore``) is 100 minus three penalties: small files
(40 points), equality deletes (40) and position deletes (20). Its users asked which part cost the
points; here every component says what it measured, against which threshold, and what to do.

The components, each losing its points linearly up to its threshold (the optimizer's own trigger
settings, so "unhealthy" means "the optimizer would act"):

- ``small_files`` (40): small files a table would not need, per partition the fragments and
  unmerged change files beyond one file per base node (``base.file-index.hash-bucket`` on a
  primary-key table, 1 otherwise); all 40 points are lost at
  ``self-optimizing.minor.trigger.file-count`` such files per partition.
- ``unmerged_changes`` (40): change rows not yet merged into the base, as a share of the base rows;
  all 40 are lost at ``self-optimizing.major.trigger.duplicate-ratio`` (change rows with no base
  at all count as the whole ratio).
- ``delete_ratio`` (20): unmerged delete rows / (base rows + upserted rows); all 20 are lost at
  ``self-optimizing.major.trigger.delete-ratio``.

An empty table, or one with nothing to merge, scores 100.

A **penalty** comes on top: while a table's last optimize failed (and none has succeeded since),
it loses :data:`FAILED_OPTIMIZE_PENALTY` points, whatever its files look like now: nothing will
merge them until the failure is dealt with, so the table ranks among the unhealthy (< 60).

>>> score = health_score(TableMeasure(files=8, small_files=8, nodes=4, partitions=1, base_rows=100,
...                      change_rows=0, delete_rows=0, upsert_rows=0), HealthSettings())
>>> score.score, [c.points for c in score.components]
(87, [26.7, 40.0, 20.0])
"""

from __future__ import annotations

from dataclasses import dataclass, replace

FAILED_OPTIMIZE_PENALTY = 50


@dataclass(frozen=True)
class HealthSettings:
    """The thresholds, from the table's optimizing properties (defaults are Amoro's)."""

    minor_file_count: int = 12
    duplicate_ratio: float = 0.1
    delete_ratio: float = 0.2


@dataclass(frozen=True)
class TableMeasure:
    """What the score looks at, summed over a table's partitions (read plan of the latest version)."""

    files: int  # base files + unmerged change files
    small_files: int  # fragments + unmerged change files
    nodes: int  # base nodes a merged partition may keep one file each in, summed over partitions
    partitions: int  # partitions with data
    base_rows: int
    change_rows: int  # unmerged
    delete_rows: int  # unmerged
    upsert_rows: int  # unmerged


@dataclass(frozen=True)
class Component:
    name: str
    max_points: int
    points: float  # what is left of max_points
    value: float  # what was measured
    threshold: float  # where every point is lost
    explanation: str

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "max_points": self.max_points,
            "points": self.points,
            "value": self.value,
            "threshold": self.threshold,
            "explanation": self.explanation,
        }


@dataclass(frozen=True)
class Penalty:
    name: str
    points: int  # taken off the components' sum
    explanation: str

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "points": self.points, "explanation": self.explanation}


@dataclass(frozen=True)
class HealthScore:
    score: int
    components: tuple[Component, ...]
    penalties: tuple[Penalty, ...] = ()

    def with_penalty(self, penalty: Penalty) -> HealthScore:
        """This score with ``penalty`` taken off (never below 0)."""
        return replace(self, score=max(0, self.score - penalty.points), penalties=(*self.penalties, penalty))

    def as_dict(self) -> dict[str, object]:
        worst = min(self.components, key=lambda c: c.points - c.max_points)
        lost = worst.max_points - worst.points
        summary = f"most points lost to {worst.name} ({lost:g})" if lost > 0 else "healthy"
        if self.penalties:
            taken = "; ".join(f"{p.name} (-{p.points})" for p in self.penalties)
            summary = f"{taken}; {summary}" if lost > 0 else taken
        return {
            "score": self.score,
            "components": [c.as_dict() for c in self.components],
            "penalties": [p.as_dict() for p in self.penalties],
            "summary": summary,
        }


def _component(name: str, max_points: int, value: float, threshold: float, explanation: str) -> Component:
    share = min(1.0, value / threshold) if threshold > 0 else (1.0 if value > 0 else 0.0)
    return Component(
        name, max_points, round(max_points * (1 - share), 1), round(value, 4), threshold, explanation
    )


def health_score(m: TableMeasure, s: HealthSettings) -> HealthScore:
    """The score of a table from its measure; see the module docstring for the definition."""
    excess = max(0, m.small_files - m.nodes)
    file_threshold = s.minor_file_count * max(1, m.partitions)
    small = _component(
        "small_files",
        40,
        excess,
        file_threshold,
        f"{excess} small file(s) beyond one per base node ({m.small_files} small of {m.files} files); "
        f"all points lost at {file_threshold} (minor.trigger.file-count {s.minor_file_count} per partition); "
        "minor optimizing merges them",
    )
    change_share = (
        m.change_rows / m.base_rows if m.base_rows else (s.duplicate_ratio if m.change_rows else 0.0)
    )
    unmerged = _component(
        "unmerged_changes",
        40,
        change_share,
        s.duplicate_ratio,
        f"{m.change_rows} unmerged change row(s) over {m.base_rows} base row(s); all points lost at a share of "
        f"{s.duplicate_ratio} (major.trigger.duplicate-ratio); optimizing merges them into the base",
    )
    volume = m.base_rows + m.upsert_rows
    delete_share = m.delete_rows / volume if volume else (s.delete_ratio if m.delete_rows else 0.0)
    deletes = _component(
        "delete_ratio",
        20,
        delete_share,
        s.delete_ratio,
        f"{m.delete_rows} unmerged delete row(s) over {volume} row(s); all points lost at "
        f"{s.delete_ratio} (major.trigger.delete-ratio); major optimizing removes deleted rows",
    )
    components = (small, unmerged, deletes)
    return HealthScore(round(sum(c.points for c in components)), components)
