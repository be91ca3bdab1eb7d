"""Commit an optimizing plan: one atomic base-store commit that swaps files and advances watermarks.

On every attempt the commit is rebuilt against the current base store (``commit.commit_base``), and
each partition is checked first: if its watermark moved (an INSERT OVERWRITE or another optimize
committed since planning) or any base file it rewrote is gone, the partition is dropped and its new
files are deleted, never committed. Change-store commits never conflict with an optimize: change
rows above the new watermark stay visible, the rest were merged into the new files. So writers are
never blocked and no row is lost or resurrected.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from arctic_sql.errors import CommitConflictError
from arctic_sql.optimizer.planner import PartitionPlan
from arctic_sql.table.files import position_deletes, storage
from arctic_sql.table.format import versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading.scan import live_files
from arctic_sql.table.writing import commit

log = logging.getLogger(__name__)

MODE = "arctic.optimize.mode"
PARTITIONS = "arctic.optimize.partitions"  # JSON {partition: mode}: what the evaluator's clocks read
PROCESS = "arctic.optimize.process-id"


@dataclass
class CommitOutcome:
    committed: list[str] = field(default_factory=list)  # partitions
    dropped: dict[str, str] = field(default_factory=dict)  # partition -> why
    snapshot_id: int | None = None


def _paths(files: tuple[DataFile, ...]) -> set[str]:
    return {f.file_path for f in files}


class _NothingLeft(CommitConflictError):
    """Every partition of the plan was dropped: there is nothing to commit."""


def commit_plan(
    table: ArcticTable,
    partitions: list[PartitionPlan],
    outputs: dict[str, list[DataFile]],
    process_id: str,
    mode: str,
) -> CommitOutcome:
    """Commit the partitions whose inputs are unchanged; ``outputs`` maps partition -> new files."""
    outcome = CommitOutcome()

    def build(store: Table) -> commit.BaseChange:
        current = store.current_snapshot()
        marks = versions.watermarks_of(current)
        live = {f.path: f for f in live_files(store, current, Store.BASE)}
        delete: list[DataFile] = []
        add: list[DataFile] = []
        outcome.committed, outcome.dropped = [], {}
        for p in partitions:
            why = None
            if marks.get(p.partition, 0) != p.from_watermark:
                why = (
                    f"watermark moved from {p.from_watermark} to {marks.get(p.partition, 0)} "
                    "(an overwrite or another optimize committed first)"
                )
            elif any(f.path not in live for f in [*p.rewritten_base, *p.kept_base]):
                why = "base files it rewrote were replaced by another commit"
            elif any(
                _paths(live[f.path].deletes) != _paths(f.deletes) for f in [*p.rewritten_base, *p.kept_base]
            ):
                why = "position deletes of its base files changed since planning"
            if why is not None:
                outcome.dropped[p.partition] = why
                continue
            outcome.committed.append(p.partition)
            new_files = outputs.get(p.partition, [])
            # A kept file's new delete file holds its old positions too: the old one goes.
            superseded = {
                position_deletes.referenced_path(f)
                for f in new_files
                if position_deletes.is_position_deletes(f)
            }
            for f in p.rewritten_base:
                delete.append(f.data_file)  # type: ignore[arg-type]
                delete.extend(live[f.path].deletes)
            for f in p.kept_base:
                if f.path in superseded:
                    delete.extend(live[f.path].deletes)
            add.extend(new_files)
            if p.to_watermark > p.from_watermark:
                marks[p.partition] = p.to_watermark
        if not outcome.committed:
            raise _NothingLeft("every partition's inputs moved since planning")
        summary = {
            versions.OPERATION: versions.OPTIMIZE,
            MODE: mode,
            PARTITIONS: json.dumps(
                {p.partition: p.mode for p in partitions if p.partition in outcome.committed}, sort_keys=True
            ),
            PROCESS: process_id,
        }
        return commit.BaseChange(delete=delete, add=add, watermarks=marks, summary=summary)

    written = [f.file_path for files in outputs.values() for f in files]
    try:
        snapshot = commit.commit_base(table, build, written)
    except _NothingLeft:
        return outcome  # commit_base deleted every written file
    outcome.snapshot_id = snapshot.snapshot_id
    dropped_files = [f.file_path for p in outcome.dropped for f in outputs.get(p, [])]
    storage.delete_files(dropped_files)
    for p, why in outcome.dropped.items():
        log.info("optimize %s: partition %s dropped: %s", table.identifier, p or "(table)", why)
    return outcome
