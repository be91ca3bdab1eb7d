"""The driver's half of an Arrow write: make keys unique, skip a replayed micro-batch, commit.

A streaming sink's commit names its query and micro-batch in the snapshot summary
(``arctic.stream.query-id``, ``arctic.stream.batch-id``), as Iceberg's Spark sink does. Spark
replays a batch whose commit it did not record (a crash between our commit and its commit log);
the replay finds the batch among the store's retained commits and commits nothing. The check runs
again before every commit attempt, against the freshly loaded store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow.parquet as pq
from pyarrow.fs import FileType
from pyiceberg.table import Table

from arctic_sql.errors import CommitConflictError, ExecutionError
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout, versions
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.writing import base_rows, commit
from arctic_sql.table.writing.arrow_files import WrittenFile, sidecar_path
from arctic_sql.table.writing.arrow_tasks import (
    APPEND,
    CHANGES,
    OVERWRITE,
    WritePlan,
    discard,
    resolve_across_files,
)

_FILL_ATTEMPTS = 5  # fills of a narrower write, each against the newest version


@dataclass(frozen=True)
class StreamBatch:
    """One micro-batch of one streaming query (the query id survives restarts from its checkpoint)."""

    query_id: str
    batch_id: int

    def summary(self) -> dict[str, str]:
        return {versions.STREAM_QUERY_ID: self.query_id, versions.STREAM_BATCH_ID: str(self.batch_id)}

    def committed_in(self, store: Table) -> bool:
        last = versions.last_stream_batch(store, self.query_id)
        return last is not None and last >= self.batch_id


class BatchAlreadyCommitted(Exception):
    """A replayed micro-batch: the table already holds it."""


def commit_write(
    table: ArcticTable,
    plan: WritePlan,
    files: list[WrittenFile],
    stream: StreamBatch | None = None,
    *,
    fresh: bool = False,
    validate: Callable[[Table], None] | None = None,
    summary: dict[str, str] | None = None,
) -> int | None:
    """Commit the files of one write as one version; return its number, or None when nothing was
    committed (no rows, or a micro-batch the table already holds: its files are deleted).

    ``fresh``: ``table`` was loaded just now, so a change-store commit's first attempt need not
    reload it (commit.commit_loop). ``validate`` (change store only) runs against the freshly loaded
    store before every attempt, as for commit.commit_change. ``summary``: entries for the snapshot
    summary (change store only)."""
    store = table.change if plan.mode == CHANGES else table.base
    assert store is not None
    if stream is not None and stream.committed_in(store):
        discard(files)
        return None
    try:
        files = resolve_across_files(plan, files)
        _check_present(plan, files)
    except BaseException:
        discard(files)
        raise
    if not files and not empties_table(table, plan):
        return None
    paths = [f.path for f in files]
    footers = {f.path: (f.size, f.footer) for f in files if f.size is not None and f.footer is not None}
    if stream is not None:

        def validate(current: Table, check=validate) -> None:  # noqa: ANN001
            if stream.committed_in(current):
                raise BatchAlreadyCommitted()
            if check is not None:
                check(current)

    try:
        if plan.keep_missing and plan.mode == CHANGES:
            return _commit_filled(table, plan, files, stream, validate, summary)
        return _commit(table, plan, paths, stream, validate, footers, fresh, summary)
    except BatchAlreadyCommitted:
        return None  # commit_loop deleted the files: nothing was sent
    finally:
        if (
            plan.sequence_column is not None
        ):  # only then did the tasks write sidecars (arrow_writes.write_task)
            storage.delete_files([sidecar_path(p) for p in paths])


def _commit_filled(
    table: ArcticTable,
    plan: WritePlan,
    files: list[WrittenFile],
    stream: StreamBatch | None,
    validate: Callable[[Table], None] | None,
    summary: dict[str, str] | None,
) -> int | None:
    """Commit rows that lack ``plan.keep_missing``, those columns filled from the stored rows at the
    newest version (narrow_writes.py); a data commit landing after it makes the fill run again.
    Each attempt commits copies of the tasks' files (narrow_writes.fill), so the originals are
    referenced by no commit and deleted at the end, whatever the outcome."""
    from arctic_sql.table.reading import pairs, scan
    from arctic_sql.table.writing import narrow_writes

    try:
        for _ in range(_FILL_ATTEMPTS):
            pairs.reload(table)
            assert table.change is not None
            version = scan.latest_version(table)
            filled = narrow_writes.fill(table, files, plan.keep_missing, version)

            def check(current: Table, read: int = version) -> None:
                if validate is not None:
                    validate(current)
                table.base.refresh()
                commits = versions.data_commits(table.base, current)
                if (commits and commits[-1].version > read) or commit.reservation_pending(
                    table.base, current, read
                ):
                    raise base_rows.StaleRead()

            try:
                return _commit(table, plan, [f.path for f in filled], stream, check, {}, False, summary)
            except base_rows.StaleRead:
                continue  # commit_loop deleted the filled files: fill again from the tasks' files
        raise CommitConflictError(
            f"{plan.what}: other commits kept landing while it read the rows it updates"
        )
    finally:  # the commit was sent the copies (or refused and deleted them), never the originals
        storage.delete_files([f.path for f in files])


def empties_table(table: ArcticTable, plan: WritePlan) -> bool:
    """Whether ``plan`` commits even without rows: an overwrite of an unpartitioned table replaces it all
    (of a partitioned one, only the partitions its rows fall in: none)."""
    return plan.mode == OVERWRITE and not table.spec.fields


def _check_present(plan: WritePlan, files: list[WrittenFile]) -> None:
    """Raise unless every file is still there with the size its writer reported: a file deleted
    between the write and the commit (by anyone) must fail the write, not commit a reference to
    nothing. One batched stat for all of them."""
    # The files' own write folders, not the plan's: the commit of a stream's batch runs in another
    # process than its tasks, whose writer (made again there) named another folder.
    by_folder: dict[str, list[WrittenFile]] = {}
    for f in files:
        by_folder.setdefault(layout.write_folder(f.path), []).append(f)
    infos = {}
    for folder, written in by_folder.items():
        paths = [f.path for f in written]
        infos.update(zip(paths, storage.file_infos(paths, under=folder), strict=True))
    for f, info in ((f, infos[f.path]) for f in files):
        if info.type != FileType.File or (f.size is not None and info.size != f.size):
            rows = sum(x.rows for x in files)
            raise ExecutionError(
                f"{plan.what} wrote {rows} rows in {len(files)} file(s), but {f.path} was gone "
                "or changed before the commit; nothing was committed"
            )


def _commit(
    table: ArcticTable,
    plan: WritePlan,
    paths: list[str],
    stream: StreamBatch | None,
    validate,
    footers: dict[str, tuple[int, pq.FileMetaData]],
    fresh: bool,
    extra: dict[str, str] | None = None,
) -> int | None:  # noqa: ANN001
    summary = {**(extra or {}), **stream.summary()} if stream is not None else extra
    if plan.mode == CHANGES:
        return commit.commit_change(
            table, paths, plan.operation, validate=validate, summary=summary, footers=footers, fresh=fresh
        )
    if plan.mode == OVERWRITE:
        base_rows.commit_overwrite(table, paths, plan.operation)
    elif plan.mode == APPEND:
        base_rows.commit_append(table, paths, plan.operation, summary=summary, validate=validate)
    table.base.refresh()
    return versions.data_commits(table.base, table.change)[-1].version
